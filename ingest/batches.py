"""Record batches as the trace file holds them, and the run's content hash fed with them.

`fixed_batches` cuts any table's rows into compact batches of exactly `_BATCH_ROWS` rows with nothing under
their nulls, so equal rows serialise to equal bytes however they arrived; `RunDigest` hashes tables streamed
as Arrow IPC in those batches (`Trace.content_hash`, `write_run`). Split from ingest/trace.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from .trace import RunInfo

_BATCH_ROWS = 1 << 20  # rows per record batch written (and hashed)


def batch_rows() -> int:
    """Rows per record batch written (and hashed): a producer that cuts its batches so passes them on uncopied."""
    return _BATCH_ROWS


class RunDigest:
    """The content hash, fed table by table (by `Trace.content_hash`, or by `write_trace` as it writes)."""

    def __init__(self, run_info: RunInfo) -> None:
        self.digest = hashlib.sha256()  # with SHA-NI the fastest in hashlib here (1.45 GB/s; blake2b 0.55)
        self.digest.update(json.dumps(run_info.to_json(), sort_keys=True, default=str).encode())

    def table(self, name: str, table_schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
        """Hash one table (a run without the newer tables leaves their empty ones out, as before they existed)."""
        with self.stream(name, table_schema) as writer:
            for batch in fixed_batches(batches):
                writer.write_batch(batch)

    def stream(self, name: str, table_schema: pa.Schema) -> pa.ipc.RecordBatchStreamWriter:
        self.digest.update(name.encode())
        return pa.ipc.new_stream(pa.PythonFile(_HashSink(self.digest), mode="w"), table_schema)

    def run_id(self) -> str:
        return self.digest.hexdigest()[:16]


def fixed_batches(batches: Iterable[pa.RecordBatch], rows: int | None = None) -> Iterator[pa.RecordBatch]:
    """The same rows as record batches of exactly `rows` (default `_BATCH_ROWS`) rows, the last one fewer,
    each compact (exactly sized buffers, no slice of a larger one) with nothing under its nulls.

    That is what makes equal rows serialise equal: Arrow's IPC writer writes a sliced or over-allocated
    array with what lies around it in its buffers (bits past its end, bytes up to the next multiple of 8),
    so the same rows given as a converter's slices, as one table's chunks or as a mapped file's batches
    would otherwise give other bytes. A batch given whole that is already compact (a file's, as portscope
    writes them) is passed on; any other is copied (`pa.concat_batches`). Rows left over from one batch
    are carried into the next: at most ~2 batches are held.
    """
    rows = rows or _BATCH_ROWS
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if not held and batch.num_rows <= rows:
            batch = _compacted(batch)
            if batch.num_rows == rows:
                yield _canonical(batch)
            else:  # kept whole: passed on as it is if no rows follow
                pending, held = [batch], batch.num_rows
            del batch  # not held while the next one is made (the loop rebinds it only once that is done)
            continue
        at = 0
        while at < batch.num_rows:
            take = min(rows - held, batch.num_rows - at)
            pending.append(batch.slice(at, take))
            held += take
            at += take
            if held == rows:
                yield _canonical(pa.concat_batches(pending))
                pending, held = [], 0
        if held:  # the rest copied now: a slice would keep the whole batch's buffers alive
            pending = [pa.concat_batches(pending)]
        del batch  # not held while the next one is made
    if held:
        yield _canonical(pending[0])


def _compacted(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with each column that is not compact copied (`pa.concat_arrays`); the others as they are."""
    columns = [column if _compact(column) else pa.concat_arrays([column]) for column in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _compact(array: pa.Array) -> bool:
    """Whether an array's buffers hold exactly its values (read from their sizes and ends, not their data):
    then it serialises as a fresh copy of it would (what lies under its nulls aside: `_canonical`)."""
    n, typ, buffers = len(array), array.type, array.buffers()
    if array.offset:
        return False
    if pa.types.is_dictionary(typ):
        return _compact(array.indices) and _compact(array.dictionary)
    if array.null_count and not _exact_bits(buffers[0], n):
        return False
    if pa.types.is_boolean(typ):
        return _exact_bits(buffers[1], n)
    if pa.types.is_integer(typ) or pa.types.is_floating(typ):
        return buffers[1] is not None and buffers[1].size == n * typ.bit_width // 8
    if pa.types.is_string(typ):
        offsets, data = buffers[1], buffers[2]
        if offsets is None or offsets.size != 4 * (n + 1):
            return False
        first, last = (int.from_bytes(memoryview(offsets)[at : at + 4], "little", signed=True) for at in (0, 4 * n))
        return first == 0 and (data.size if data is not None else 0) == last
    return False  # lists and the rest: copied


def _exact_bits(bitmap: pa.Buffer | None, n: int) -> bool:
    """A bitmap of n bits in exactly its bytes, the bits past n zero."""
    if bitmap is None or bitmap.size != (n + 7) // 8:
        return False
    return not n % 8 or not memoryview(bitmap)[-1] >> (n % 8)


def _canonical(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A compact batch with zeros under its nulls (numbers, booleans, dictionary codes) and no bytes under
    null strings: what lies under a null is not part of the rows, but Arrow's IPC writer writes it, and
    different converters leave different values there. (Lists keep theirs: the format's only list column,
    `stacks.frame_ids`, has no nulls.)"""
    columns = [_nulls_cleared(column) if column.null_count else column for column in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _nulls_cleared(array: pa.Array) -> pa.Array:
    import numpy as np

    n, typ = len(array), array.type
    if pa.types.is_dictionary(typ):
        return pa.DictionaryArray.from_arrays(_nulls_cleared(array.indices), array.dictionary)
    if array.offset or not (pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ)
                            or pa.types.is_string(typ)):
        return array
    validity = array.buffers()[0]
    valid_bits = np.frombuffer(validity, np.uint8, count=(n + 7) // 8)
    if pa.types.is_boolean(typ):
        data = np.frombuffer(array.buffers()[1], np.uint8, count=(n + 7) // 8) & valid_bits
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(data)], null_count=array.null_count)
    valid = np.unpackbits(valid_bits, count=n, bitorder="little").view(bool)
    if pa.types.is_string(typ):
        offsets = np.frombuffer(array.buffers()[1], np.int32, count=n + 1)
        lengths = np.diff(offsets)
        if not lengths[~valid].any():
            return array
        lengths[~valid] = 0
        data = np.frombuffer(array.buffers()[2], np.uint8, count=int(offsets[-1]))[np.repeat(valid, np.diff(offsets))]
        new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(new_offsets), pa.py_buffer(data)], null_count=array.null_count)
    values = np.frombuffer(array.buffers()[1], np.dtype(f"u{typ.bit_width // 8}"), count=n)
    if not values[~valid].any():
        return array
    values = values.copy()
    values[~valid] = 0
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values)], null_count=array.null_count)


class _HashSink:
    """A write-only file object that feeds a hash."""

    closed = False

    def __init__(self, digest: Any) -> None:
        self.digest = digest

    def write(self, data: Any) -> int:
        self.digest.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

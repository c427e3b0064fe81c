"""The engine lanes of an assembled run (`assemble`): the host lanes of the top-level operators, device streams and
copy engines, a memory lane per device, and the readers' own lanes, planned as a few codes per row and written
`slice_rows` rows at a time, every batch sharing one dictionary per column."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from .arrow_values import numbers, strings
from .columns import Coder, coded_column, nullable, table_of
from .events import KIND_CODES, NONE, EventKind, rows_where
from .kineto_vocabulary import ONLINE_COMPILE_CALLS, SYNC_RUNTIME_CALLS
from .op_categories import is_communication
from .schema import (
    MEMORY_ALLOCATED,
    MEMORY_RESERVED,
    Direction,
    EngineKind,
    SliceKind,
    memory_engine,
)
from .trace import TableSlices

_HOST_KINDS = np.array([0, 0, 1, 2], dtype=np.int8)  # a host slice's kind by its operator's placement code (assemble_ops'
# order: host, device compute; fallback; the compiler's work a compile)
_DMA = {Direction.H2D: EngineKind.DMA_H2D, Direction.D2H: EngineKind.DMA_D2H, Direction.D2D: EngineKind.DMA_D2D,
        Direction.UNKNOWN: EngineKind.OTHER}  # fmt: skip


@dataclasses.dataclass
class LanePart:
    """One part of the engine slices, planned: its event rows (ascending but for memory lanes) and per row a code
    into each of `engine_values`, `engine_kind_values`, `kind_values` (an array of one code: every row), or the
    engine by a per-event column (`engine_of`: the thread code); optional columns of its own (else the events')."""

    rows: np.ndarray
    engine_values: list[str] = dataclasses.field(default_factory=list)
    engine: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1, np.int32))
    engine_of: str | None = None
    engine_kind_values: list[str] = dataclasses.field(default_factory=list)
    engine_kind: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1, np.int8))
    kind_values: list[str] = dataclasses.field(default_factory=list)
    kind: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1, np.int8))
    name: np.ndarray | None = None
    nbytes: np.ndarray | None = None
    start: np.ndarray | None = None
    dur: np.ndarray | None = None
    remap: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


class Words:
    """One dictionary shared by every batch of a column: words added part by part, each once."""

    def __init__(self) -> None:
        self.at: dict[str, int] = {}
        self._array: pa.Array | None = None

    def add(self, values: list[str], used_codes: np.ndarray) -> np.ndarray:
        """Index in the dictionary of each of `values` that some row uses (by code)."""
        index = np.zeros(max(len(values), 1), dtype=np.int32)
        for code in np.flatnonzero(np.bincount(np.asarray(used_codes).reshape(-1))).tolist():
            index[code] = self.at.setdefault(values[code], len(self.at))
        self._array = None
        return index

    def array(self) -> pa.Array:
        if self._array is None:
            self._array = strings(list(self.at))
        return self._array


def used_codes(read: Callable[[np.ndarray], np.ndarray], rows: np.ndarray, size: int, step: int = 1 << 20) -> np.ndarray:
    """A flag per code 0..size-1: whether some of these rows of a code column holds it (`read`: the column's values
    at rows, asked `step` rows at a time)."""
    used = np.zeros(max(size, 1), dtype=bool)
    for lo in range(0, len(rows), step):
        used[np.asarray(read(rows[lo : lo + step]))] = True
    return used[:size]


def factorize(values: np.ndarray, span: int = 1 << 24) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values in order, each value's index among them as int32), as np.unique with return_inverse
    gives them; values within `span` of each other by a table of that range (no sort of the rows)."""
    values = np.asarray(values)
    if not len(values):
        return values[:0], np.zeros(0, dtype=np.int32)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo >= span:
        used, at = np.unique(values, return_inverse=True)
        return used, at.reshape(-1).astype(np.int32)
    shifted = values - lo if lo else values
    seen = np.zeros(hi - lo + 1, dtype=bool)
    seen[shifted] = True
    present = np.flatnonzero(seen)
    index = np.zeros(len(seen), dtype=np.int32)
    index[present] = np.arange(len(present), dtype=np.int32)
    return (present + lo).astype(values.dtype), index[shifted]


class EngineLanes:
    """The engine-slices part of the assembly (`assemble.Assembly` inherits it): reads its events (`a`, `links`,
    `texts`, `column`...) and writes the lanes."""

    slice_rows: int  # rows a batch holds (assemble.SLICE_ROWS when the assembly began)
    fallbacks: np.ndarray  # the event rows of CPU fallback signals (their slices are drawn as fallbacks)

    def engine_slices(self, placement: np.ndarray) -> TableSlices:
        """Every lane's slices, made `self.slice_rows` at a time as written: the host lanes (the operators no other
        encloses, a lane per thread, the one with most operators "host"), then device work, memory and the readers'
        own lanes. Each part is planned here as a few codes per row; every batch shares one dictionary per column."""
        top = np.concatenate([self.links.op[self.op_rows[lo : lo + self.slice_rows]] < 0
                              for lo in range(0, len(self.op_rows), self.slice_rows)] or [np.zeros(0, bool)]) & ~self.ran_op
        counts = np.zeros(len(self.threads), dtype=np.int64)  # operators per thread, read a slice at a time
        for lo in range(0, len(self.op_rows), self.slice_rows):
            counts += np.bincount(self.column("thread", self.op_rows[lo : lo + self.slice_rows]), minlength=len(counts))
        main = int(np.argmax(counts)) if len(counts) else -1
        host = LanePart(rows=self.op_rows[top], engine_of="thread",
                      engine_values=["host" if t == main else f"host thread {tid}" for t, (_, tid) in enumerate(self.threads)],
                      engine_kind_values=[EngineKind.HOST.value],
                      kind_values=[SliceKind.COMPUTE.value, SliceKind.FALLBACK.value, SliceKind.COMPILE.value],
                      kind=_HOST_KINDS[placement[top]])  # fmt: skip
        del top
        parts = [p for p in (host, self._device_lanes(), *self._memory_lanes(), self._span_lanes()) if p is not None and len(p.rows)]
        names_used = np.zeros(len(self.texts) + 2, dtype=bool)  # the last two: memory lanes' allocated and reserved
        for p in parts:
            if p.name is not None:
                names_used[p.name] = True
            else:
                names_used[: len(self.texts)] |= used_codes(lambda r: self.column("name", r), p.rows, len(self.texts))
        name = Coder([*self.texts, MEMORY_ALLOCATED, MEMORY_RESERVED], names_used)
        dictionaries = {c: Words() for c in ("engine", "engine_kind", "kind")}
        for p in parts:
            engines = self.column(p.engine_of, p.rows) if p.engine_of is not None else p.engine
            p.remap = {"engine": dictionaries["engine"].add(p.engine_values, engines),
                       "engine_kind": dictionaries["engine_kind"].add(p.engine_kind_values, p.engine_kind),
                       "kind": dictionaries["kind"].add(p.kind_values, p.kind)}  # fmt: skip

        def batches() -> Iterator[pa.RecordBatch]:
            for p in parts:
                for lo in range(0, len(p.rows), self.slice_rows):
                    yield from self._lane_batch(p, lo, name, dictionaries).to_batches()

        return TableSlices(sum(len(p.rows) for p in parts), batches)

    def _lane_batch(self, p: LanePart, lo: int, name: Coder, dictionaries: dict[str, Words]) -> pa.Table:
        """Rows lo.. of one planned lane part as a table of the schema."""
        rows = p.rows[lo : lo + self.slice_rows]
        hi = lo + len(rows)

        def codes(column: str, per_row: np.ndarray) -> pa.DictionaryArray:
            values = p.remap[column][per_row[lo:hi] if len(per_row) > 1 or len(p.rows) == 1 else np.repeat(per_row, len(rows))]
            return pa.DictionaryArray.from_arrays(numbers(values.astype(np.int32)), dictionaries[column].array())

        engine = self.column(p.engine_of, rows) if p.engine_of is not None else None
        columns = {"engine": codes("engine", p.engine) if engine is None else pa.DictionaryArray.from_arrays(
                       numbers(p.remap["engine"][engine].astype(np.int32)), dictionaries["engine"].array()),
                   "engine_kind": codes("engine_kind", p.engine_kind), "kind": codes("kind", p.kind)}  # fmt: skip
        start = p.start[lo:hi] if p.start is not None else self.column("start_ns", rows)
        dur = p.dur[lo:hi] if p.dur is not None else self.column("dur_ns", rows)
        names = name(p.name[lo:hi] if p.name is not None else self.column("name", rows))
        op = self.op_id(rows) if p.engine_of == "thread" else self._op_of(rows)
        return self._slices(rows, columns["engine"], columns["engine_kind"], columns["kind"], op=op,
                            nbytes=p.nbytes[lo:hi] if p.nbytes is not None else None, name=names, start=start, dur=dur)

    def _slices(self, rows: np.ndarray, engine: pa.Array, engine_kind: pa.Array | list[str], kind: pa.Array | list[str],
                op: np.ndarray, nbytes: np.ndarray | None = None, name: pa.Array | None = None,
                start: np.ndarray | None = None, dur: np.ndarray | None = None) -> pa.Table:
        corr = self.column("correlation", rows)
        b = nbytes if nbytes is not None else np.full(len(rows), NONE, dtype=np.int64)
        start = self.column("start_ns", rows) if start is None else start
        return table_of("engine_slices", {
            "region_id": self._region(rows, op, start), "engine": engine, "engine_kind": engine_kind, "kind": kind,
            "name": name if name is not None else coded_column(self.texts, self.column("name", rows)),
            "start": start, "dur": self.column("dur_ns", rows) if dur is None else dur,
            "op_id": nullable(op, op < 0), "bytes": nullable(np.maximum(b, 0), b == NONE),
            "correlation": nullable(corr, corr == NONE)})  # fmt: skip

    def _op_of(self, rows: np.ndarray) -> np.ndarray:
        """op_id of the operator around each event row (-1: none)."""
        op = self.links.op[rows]
        return self.op_id(op)

    def _device_lanes(self) -> LanePart | None:
        """Kernels, memsets, copies and device waits in the order the trace gives them: a lane per device stream
        (``stream 7``; ``cuda:1 stream 7`` when there are several devices) and per copy direction (``DMA h2d``), or
        the lane the reader named; AI CPU kernels as fallback slices."""
        a = self.a
        codes = [KIND_CODES[k] for k in (EventKind.KERNEL, EventKind.MEMSET, EventKind.COPY, EventKind.WAIT)]
        rows = rows_where(np.isin(a["kind"], codes))  # 4 bytes a slice while planned
        if not len(rows):
            return None
        kind = a["kind"][rows]
        copy = kind == KIND_CODES[EventKind.COPY]
        directions = list(Direction)
        multi = len(self.devices) > 1
        step = self.slice_rows

        def key_parts(lo: int) -> list[np.ndarray]:
            """The parts of the lane key of rows lo.. (a slice): lane, copy direction (-1: none), device, stream
            (-1 for copies), engine kind."""
            r, is_copy = rows[lo : lo + step], copy[lo : lo + step]
            direction = np.full(len(r), -1, dtype=np.int64)
            direction[is_copy] = self.copy_dir[np.searchsorted(self.copy_rows, r[is_copy])]
            stream = np.where(is_copy, -1, a["stream"][r])
            stream = np.where(stream == NONE, 0, stream)
            device = a["device"][r] if multi else np.zeros(len(r), np.int64)
            return [a["lane"][r], direction, device, stream, a["engine_kind"][r]]

        # one key per row from the parts' distinct values, a slice at a time (a 2-D unique would sort 40 bytes a row)
        parts = [np.zeros(0, dtype=np.int64)] * 5
        for lo in range(0, len(rows), step):
            parts = [np.union1d(p, factorize(c)[0]) for p, c in zip(parts, key_parts(lo), strict=True)]
        size = int(np.prod([len(p) for p in parts], dtype=np.float64))
        key = np.zeros(len(rows), dtype=np.int32 if size < 2**31 else np.int64)
        for lo in range(0, len(rows), step):
            k = np.zeros(min(step, len(rows) - lo), dtype=np.int64)
            for values, column in zip(parts, key_parts(lo), strict=True):
                k = k * len(values) + np.searchsorted(values, column)
            key[lo : lo + len(k)] = k
        used, at = factorize(key)
        del key
        distinct = []
        for k in used.tolist():  # each distinct key back to its parts, last part first
            fields = []
            for values in reversed(parts):
                k, i = divmod(k, len(values))
                fields.append(int(values[i]))
            distinct.append(fields[::-1])
        engines, kinds = [], []
        for lane, d, dev, st, ekind in distinct:
            prefix = f"{self.device_name(dev)} " if multi else ""
            if d >= 0:
                engines.append(self.texts[lane] or f"{prefix}DMA {directions[d].value}")
                kinds.append(self.texts[ekind] or _DMA[directions[d]].value)
            else:
                engines.append(self.texts[lane] or f"{prefix}stream {st}")
                kinds.append(self.texts[ekind] or EngineKind.STREAM.value)
        slice_kinds = [SliceKind.COMPUTE.value, SliceKind.TRANSFER.value, SliceKind.SYNC.value, SliceKind.FALLBACK.value,
                       SliceKind.COMMUNICATION.value]  # fmt: skip
        at = at.reshape(-1).astype(np.int16 if len(used) < 2**15 else np.int32)  # a few lanes: 2 bytes a slice
        collective = np.array([k == EngineKind.COLLECTIVE.value for k in kinds])
        fell_back = np.zeros(len(a["kind"]), dtype=bool)
        fell_back[self.fallbacks] = True
        slice_kind = np.zeros(len(rows), dtype=np.int8)  # compute, transfer, sync, fallback: by the kinds (no int64)
        nbytes = None  # copies' and memsets' bytes (none: the column is null); a copy with none of its own: its call's
        for lo in range(0, len(rows), step):  # a slice at a time: what is held per row is the few codes above
            r, k, is_copy = rows[lo : lo + step], kind[lo : lo + step], copy[lo : lo + step]
            part = slice_kind[lo : lo + len(r)]
            part[k == KIND_CODES[EventKind.WAIT]] = 2
            part[is_copy] = 1
            part[self._communication(r, k, collective[at[lo : lo + step]])] = 4
            part[fell_back[r] & ~is_copy] = 3
            sized = np.flatnonzero(np.isin(k, codes[1:3]))
            if len(sized):
                if nbytes is None:
                    nbytes = np.full(len(rows), NONE, dtype=np.int64)
                own = np.asarray(a["bytes"][r[sized]], dtype=np.int64)
                ask = np.flatnonzero((own == NONE) & is_copy[sized])
                if len(ask):
                    launcher = np.asarray(self.links.launcher[r[sized[ask]]])
                    by_call = launcher >= 0
                    own[ask[by_call]] = a["bytes"][launcher[by_call]]
                nbytes[lo + sized] = own
        del fell_back
        return LanePart(rows=rows, engine_values=engines, engine=at, engine_kind_values=kinds, engine_kind=at,
                      kind_values=slice_kinds, kind=slice_kind, nbytes=nbytes)  # fmt: skip

    def _communication(self, rows: np.ndarray, kind: np.ndarray, collective_lane: np.ndarray) -> np.ndarray:
        """Which device rows are communication kernels: named as a collective's or a peer transfer's
        (`op_categories.is_communication`: ``ncclDevKernel_AllReduce...``, ``hcom_allReduce_...``), or on a lane
        of kind collective (torch_npu's HCCL)."""
        kernel = np.flatnonzero(kind == KIND_CODES[EventKind.KERNEL])
        names = self.column("name", rows[kernel])
        said = [c for c in np.unique(names).tolist() if is_communication(self.texts[c] or "")]
        out = np.zeros(len(rows), dtype=bool)
        out[kernel] = np.isin(names, said) | collective_lane[kernel]
        return out

    def _memory_lanes(self) -> list[LanePart]:
        """A lane per device: one slice from each allocator event to the next, named allocated with the total
        allocated as its bytes (led by a slice of no length holding the total before the first event, when that
        event gives its own bytes), and one named reserved with the total reserved where the events give it."""
        a = self.a
        rows = np.flatnonzero(a["kind"] == KIND_CODES[EventKind.MEMORY])
        rows = rows[a["total_allocated"][rows] != NONE]
        out = []
        for dev in np.unique(a["device"][rows]).tolist():
            on = rows[a["device"][rows] == dev]
            on = on[np.argsort(self.column("start_ns", on), kind="stable")]
            starts = self.column("start_ns", on)
            ends = np.r_[starts[1:], max(self.links.end_ns, int(starts[-1]))]
            lane = {"engine_values": [memory_engine(self.device_name(dev))],
                    "engine_kind_values": [EngineKind.OTHER.value], "kind_values": [SliceKind.ANNOTATION.value]}
            totals, first = a["total_allocated"][on], a["bytes"][on[0]]
            if first != NONE:  # a slice of no length before the first event: the total it started from
                lead = {"rows": np.r_[on[0], on], "nbytes": np.r_[totals[0] - first, totals], "start": np.r_[starts[0], starts],
                        "dur": np.r_[0, ends - starts]}  # fmt: skip
            else:
                lead = {"rows": on, "nbytes": totals, "start": starts, "dur": ends - starts}
            out.append(LanePart(name=np.full(len(lead["rows"]), len(self.texts), dtype=np.int32), **lead, **lane))
            reserved = a["total_reserved"][on] != NONE
            if reserved.any():
                kept = starts[reserved]
                out.append(LanePart(rows=on[reserved], name=np.full(len(kept), len(self.texts) + 1, dtype=np.int32),
                                  nbytes=a["total_reserved"][on][reserved], start=kept, dur=np.r_[kept[1:], ends[-1]] - kept,
                                  **lane))  # fmt: skip
        return out

    def _span_lanes(self) -> LanePart | None:
        """Spans of no other kind on their lanes, and runtime calls a reader gave a lane (torch_npu's CANN): a wait
        call as sync, a compile call as compile, others as dispatch. A span is drawn as its lane's engine kind says:
        dispatch as dispatch, a copy engine (dma_*) as transfer, a compiler as compile, other as annotation, any
        other kind (host, stream, a compute unit) as compute; a span whose reader names no engine kind (a generic
        trace's thread) as compute, on a lane of kind other. Names and kinds are made once per distinct lane, engine
        kind and call name, not per row (a generic trace has millions of spans). A span its reader says how to draw
        (`drawn_as`: a schedule's synthetic sync) is drawn so."""
        a = self.a
        runtime = a["kind"] == KIND_CODES[EventKind.RUNTIME]
        calls = np.flatnonzero(runtime)
        rows = np.union1d(np.flatnonzero(a["kind"] == KIND_CODES[EventKind.SPAN]), calls[a["lane"][calls] != 0])
        del calls
        if not len(rows):
            return None
        texts = self.texts

        def distinct(key: np.ndarray, size: int) -> tuple[list[int], np.ndarray]:
            """(the distinct keys in 0..size-1, each row's position among them): no sort."""
            seen = np.zeros(size, dtype=bool)
            seen[key] = True
            used = np.flatnonzero(seen)
            at = np.zeros(size, dtype=np.int32)
            at[used] = np.arange(len(used), dtype=np.int32)
            return used.tolist(), at[key]

        # a lane: its text, else "<pid> / <tid>" of its thread (thread codes numbered after the text codes)
        lane = a["lane"][rows]
        keys, engine = distinct(np.where(lane != 0, lane, len(texts) + self.column("thread", rows)),
                                len(texts) + max(len(self.threads), 1))  # fmt: skip
        del lane
        engines = [texts[k] if k < len(texts) else "{} / {}".format(*self.threads[k - len(texts)]) for k in keys]
        kinds, engine_kind = distinct(a["engine_kind"][rows], len(texts))
        words = [k.value for k in SliceKind]
        by_engine = {EngineKind.DISPATCH.value: SliceKind.DISPATCH, EngineKind.COMPILER.value: SliceKind.COMPILE,
                     EngineKind.OTHER.value: SliceKind.ANNOTATION, EngineKind.DMA_H2D.value: SliceKind.TRANSFER,
                     EngineKind.DMA_D2H.value: SliceKind.TRANSFER, EngineKind.DMA_D2D.value: SliceKind.TRANSFER}  # fmt: skip
        span_kind = np.array([words.index(by_engine.get(texts[k], SliceKind.COMPUTE).value) if k else
                              words.index(SliceKind.COMPUTE.value) for k in kinds], dtype=np.int8)  # fmt: skip
        slice_kind = span_kind[engine_kind]
        said = np.flatnonzero(a["drawn_as"][rows] != 0)  # spans their format calls a sync
        if len(said):
            slice_kind[said] = [words.index(texts[k]) for k in a["drawn_as"][rows[said]].tolist()]
        calls = np.flatnonzero(runtime[rows])
        if len(calls):  # runtime calls: by their name
            names, at = distinct(self.column("name", rows[calls]), len(texts))
            call_kind = [SliceKind.SYNC if texts[k] in SYNC_RUNTIME_CALLS else SliceKind.COMPILE
                         if texts[k] in ONLINE_COMPILE_CALLS else SliceKind.DISPATCH for k in names]  # fmt: skip
            slice_kind[calls] = np.array([words.index(k.value) for k in call_kind], dtype=np.int8)[at]
        return LanePart(rows=rows, engine_values=engines, engine=engine,
                      engine_kind_values=[texts[k] or EngineKind.OTHER.value for k in kinds],
                      engine_kind=engine_kind.astype(np.int8), kind_values=words, kind=slice_kind)  # fmt: skip


__all__ = ["EngineLanes", "LanePart", "Words", "factorize", "used_codes"]

"""kernel_details.csv read in bounded memory: blocks of pyarrow's streaming CSV reader into compact
columns (names coded on disk, `_kernel_names`; other cells as one combo code a kernel), spilled to temporary files."""

from __future__ import annotations

import codecs
import csv
import dataclasses
import io
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyarrow import csv as pa_csv

from ..errors import TraceFormatError
from ..spill import HOLD_ROWS, DiskColumn, release_memory
from ._chrome_stream import file_chunks, micros_to_ns
from ._kernel_names import DiskNames, NameCoder
from ._source import SizeCaps

CORE_COLUMNS = ("Accelerator Core", "Task Type")  # older exports name the core column "Task Type"
KERNEL_NEEDS = ("Name", "Start Time(us)", "Duration(us)")
MAX_PROBLEMS = 12
LIMIT = 2**61  # ns and counts beyond this are not a profile (and would overflow int64 columns)
_BLOCK_BYTES = 4 << 20  # CSV read this much at a time
_HOLD = HOLD_ROWS  # kernels' column values kept in memory before they go to a temporary file (tests make it tiny)


def clean_cell(value: str | None) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip().strip('"').strip()
    return None if value in ("", "N/A", "NA", "-") else value


class Cells:
    """Distinct cells, each once: a code per cell as cleaned (`clean_cell`; None for empty or N/A), so cells that differ
    only in quotes or spaces share one; `clean[code]` is the cleaned cell."""

    def __init__(self) -> None:
        self.codes: dict[str | None, int] = {}  # raw cell -> code
        self.by_clean: dict[str | None, int] = {}
        self.clean: list[str | None] = []

    def code(self, raw: str | None) -> int:
        c = self.codes.get(raw)
        if c is None:
            value = clean_cell(raw)
            c = self.by_clean.get(value)
            if c is None:
                c = self.by_clean[value] = len(self.clean)
                self.clean.append(value)
            self.codes[raw] = c
        return c


class _ChunkFile(io.RawIOBase):
    """The (gunzipped) bytes of a file as a readable stream for pyarrow's CSV reader, within the caps."""

    def __init__(self, path: Path, chunks: Iterator[bytes]) -> None:
        self.path, self.chunks, self.rest = path, chunks, b""
        self.utf8 = codecs.getincrementaldecoder("utf-8")()  # checks the text as it passes (pyarrow's row errors cannot)
        self.offset = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.rest:
            piece = next(self.chunks, None)
            final = piece is None
            try:
                self.utf8.decode(piece or b"", final)
            except UnicodeDecodeError as exc:
                raise TraceFormatError(self.path, f"not UTF-8 text (invalid byte at offset {self.offset + exc.start})") from None
            if final:
                return 0
            self.offset += len(piece)
            self.rest = piece
        n = min(len(buffer), len(self.rest))
        buffer[:n] = self.rest[:n]
        self.rest = self.rest[n:]
        return n


_KERNEL_CELLS = ("Name", "Type", "Start Time(us)", "Duration(us)", "Device_id", "Step Id", "Stream ID", "Input Shapes",
                 "Input Data Types", "Output Shapes", "Output Data Types")  # fmt: skip


@dataclasses.dataclass
class Kernels:
    """A kernel_details.csv as columns on disk, in file order: per kernel its start and duration (int64 ns), name
    code and combo; each combo a distinct tuple of the other cells (a code into `cells` per column of
    `combo_cells`)."""

    header: list[str]
    core_col: str
    start: DiskColumn  # int64
    dur: DiskColumn  # int64
    name: DiskColumn  # int32 codes into `names`, in order of first appearance in the file
    names: pa.Array | DiskNames  # DiskNames: too many to hold (`_kernel_names.DICT_MAX_BYTES`), written as plain strings
    combo: DiskColumn  # int32
    combo_cells: dict[str, np.ndarray]
    cells: Cells


def read_kernel_columns(path: Path, caps: SizeCaps) -> Kernels:
    """The columns of a kernel_details.csv read in blocks by pyarrow's CSV reader: times as int64 ns (exact
    decimals), names coded block by block, every other cell as a code into `cells`, a kernel's cells as one combo
    (24 bytes a kernel in all, written to temporary files as they are read)."""
    chunks = file_chunks(path, caps)
    first = next(chunks, b"")
    line = first.split(b"\n", 1)[0]
    try:
        raw_header = next(csv.reader([line.decode("utf-8").lstrip("\ufeff").rstrip("\r")]), [])
    except UnicodeDecodeError:
        raise TraceFormatError(path, "not UTF-8 text (in the header)") from None
    except csv.Error as exc:  # e.g. a bare carriage return inside the header line
        raise TraceFormatError(path, f"the header line is not CSV ({exc})") from None
    header = [c.strip() for c in raw_header]
    missing = [c for c in KERNEL_NEEDS if c not in header]
    if missing:
        raise TraceFormatError(path, f"the header lacks the columns {missing} (has {header[:12]})")
    core_col = next((c for c in CORE_COLUMNS if c in header), None)
    if core_col is None:
        raise TraceFormatError(path, f"the header has neither of {list(CORE_COLUMNS)}")
    wanted = [c for c in (*_KERNEL_CELLS, core_col) if c in header]
    raw_of = {c: raw_header[header.index(c)] for c in wanted}
    names = [f"c{i}" for i in range(len(raw_header))]  # positions: header cells may repeat or differ in spaces
    ragged: list[str] = []

    def bad_row(row: Any) -> str:
        ragged.append(f"line {row.number or '?'}: {row.actual_columns} cells, the header has {row.expected_columns}")
        return "skip"

    cells = Cells()
    code = cells.code
    coded = [c for c in wanted if c not in ("Start Time(us)", "Duration(us)", "Name")]
    combos: dict[tuple[int, ...], int] = {}
    coder = NameCoder(path, _HOLD)
    spill = {"start": DiskColumn("q", _HOLD), "dur": DiskColumn("q", _HOLD), "name": DiskColumn("i", _HOLD),
             "combo": DiskColumn("i", _HOLD)}  # fmt: skip
    blocks = 0
    problems: list[str] = []
    bad = rows = 0
    try:
        reader = pa_csv.open_csv(
            _ChunkFile(path, itertools.chain([first], chunks)),
            read_options=pa_csv.ReadOptions(column_names=names, skip_rows=1, block_size=max(_BLOCK_BYTES, 4 * len(line))),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True, invalid_row_handler=bad_row),
            convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()),
                                                  include_columns=[names[raw_header.index(raw_of[c])] for c in wanted],
                                                  strings_can_be_null=False, quoted_strings_can_be_null=False),
        )  # fmt: skip
        for batch in reader:
            got = {c: batch.column(names[raw_header.index(raw_of[c])]).to_pylist() for c in ("Start Time(us)", "Duration(us)", "Name")}
            local: dict[str, int] = {}
            kept: list[int] = []
            start: list[int] = []
            dur: list[int] = []
            good = np.zeros(batch.num_rows, dtype=bool)
            for n, (s_raw, d_raw, name_raw) in enumerate(zip(got["Start Time(us)"], got["Duration(us)"], got["Name"], strict=True)):
                s, d = micros_to_ns(clean_cell(s_raw)), micros_to_ns(clean_cell(d_raw))
                name = clean_cell(name_raw)
                if s is None or d is None or not (abs(s) < LIMIT and 0 <= d < LIMIT) or name is None:
                    bad += 1
                    if len(problems) < MAX_PROBLEMS:
                        problems.append(f"line {rows + n + 2} ({name!r:.40}): needs a Name, a Start Time(us) and a "
                                        "non-negative Duration(us)")  # fmt: skip
                    continue
                start.append(s)
                dur.append(d)
                kept.append(local.setdefault(name, len(local)))
                good[n] = True
            del got
            rows += batch.num_rows
            if bad or not kept:
                continue  # malformed: reported below
            spill["name"].extend(coder.add(list(local), np.array(kept, dtype=np.int32)))
            spill["start"].extend(np.array(start, dtype=np.int64))
            spill["dur"].extend(np.array(dur, dtype=np.int64))
            block = np.empty((len(kept), len(coded)), dtype=np.int32)
            for j, c in enumerate(coded):  # cells of few distinct values: coded per distinct value of the block
                encoded = batch.column(names[raw_header.index(raw_of[c])]).dictionary_encode()
                of_value = np.array([code(v) for v in encoded.dictionary.to_pylist()] or [0], dtype=np.int32)
                block[:, j] = of_value[encoded.indices.to_numpy(zero_copy_only=False)][good]
            key = block[:, 0].astype(np.int64)  # the rows' distinct tuples, one column at a time (as int64 keys)
            for j in range(1, len(coded)):
                key = np.unique(key * (len(cells.clean) + 1) + block[:, j], return_inverse=True)[1].reshape(-1)
            _, first_at, inverse = np.unique(key, return_index=True, return_inverse=True)
            of_combo = np.array([combos.setdefault(tuple(r), len(combos)) for r in block[first_at].tolist()], dtype=np.int32)
            spill["combo"].extend(of_combo[inverse.reshape(-1)])
            blocks += 1
            if blocks % 8 == 0:  # the blocks' freed cells, between the kept columns: back to the system
                release_memory()
    except pa.ArrowInvalid as exc:
        what = "not UTF-8 text" if "UTF8" in str(exc) else "not valid CSV"
        raise TraceFormatError(path, f"{what}: {exc}") from None
    if bad or ragged:
        raise TraceFormatError(path, [f"{bad + len(ragged)} of {rows + len(ragged)} rows are malformed",
                                      *[*ragged, *problems][:MAX_PROBLEMS]])  # fmt: skip
    if not len(spill["start"]):
        raise TraceFormatError(path, "the table has a header but no rows: nothing to convert")
    table = np.array(list(combos), dtype=np.int32).reshape(len(combos), len(coded))
    spill["name"], words = coder.finish(spill["name"])
    del coder
    release_memory()
    return Kernels(header, core_col, spill["start"], spill["dur"], spill["name"], words, spill["combo"],
                   {c: table[:, j] for j, c in enumerate(coded)}, cells)  # fmt: skip

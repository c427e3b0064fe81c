"""torch_npu (Ascend) profiler tables ``kernel_details.csv`` and ``op_statistic.csv`` -> Trace.

``kernel_details.csv``: one row per kernel the device ran. Header variants (both real):
``Step Id,Model ID,Task ID,Stream ID,Name,Type,[OP State,]Accelerator Core,Start Time(us),Duration(us),
Wait Time(us),Block Dim,...,Input Shapes,Input Data Types,...`` or the same led by ``Device_id,``.
``Accelerator Core`` (``Task Type`` in older exports) is AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU (the
kernel ran on the device's AI CPU), HCCL (communication) or DSA_SQE. Quirks kept by the reader: a TAB inside the
quoted start time (``"1736413971558972.912<TAB>"``), shapes in tripled quotes (three double quotes around
``81920,4096;8192,512``), ``N/A`` for an unknown field (HCCL rows have no stream). Times are parsed as decimals,
exactly. A header is read as CSV (`header_cells`: an Excel or pandas QUOTE_ALL export quotes every name). A row
whose every cell is empty (``,,,,`` as a spreadsheet saves a blank row) is skipped and counted (``empty_rows`` in
``run_info.extra``, and the "could not provide" line); any other row lacking a Name or a time is an error.

Events (`events.EventColumns`), in order of start: each kernel is an OP named by its ``Type`` (its ``Name`` where
it has none; shapes and dtypes of its inputs and outputs, its device) and the KERNEL it ran as (named by its
``Name``, its ``Accelerator Core`` as its unit), joined by an id of the reader's (no runtime call lies between);
the kernel drawn on ``NPU [<device> ]stream <Stream ID>`` (``NPU HCCL``, a collective lane; ``NPU <core>`` without
a stream); each ``Step Id`` an ANNOTATION from its first kernel's start to its last one's end. `assemble` and its
rules do the rest (AI CPU kernels: the ``ai-cpu`` rule). Read in blocks by pyarrow's CSV reader into numpy
columns: nothing is held per kernel but a few numbers.

``op_statistic.csv``: ``[Device_id,]OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),
Max Time(us),Ratio(%)`` -- totals per operator type, no timeline: each operator type that ran is a PLACEMENT on its
device (its ``Core Type`` as its unit, its ``Count`` as its count, no time), inside one ANNOTATION, the file's
region, as long as the busiest device's time summed over its types (devices run side by side, so a region of
several devices is as long as the longest one, not their sum; one device's types are added, the file giving no
overlap between them); per device totals in ``run_info.extra["device_time_ns"]``. The ``ai-cpu`` rule makes the
AI_CPU rows counted fallbacks; the table is kept in ``run_info.extra["op_statistic"]``. Empty rows are skipped as
in ``kernel_details.csv``.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..arrow_values import numbers, strings, values_of
from ..assemble import assemble
from ..errors import TraceFormatError
from ..events import NONE, EventColumns, EventKind, Logged, RegionFacts, Translated
from ..schema import EngineKind, Source
from ..spill import DiskColumn, release_memory
from ..trace import RunInfo, Trace
from .chrome_stream import file_chunks, micros_to_ns
from .memory_table import blank_line, blank_rows, empty_rows
from .source import DEFAULT_CAPS, SizeCaps, decode_text, read_bytes

KERNELS_FORMAT = "ascend-kernels"
STATISTIC_FORMAT = "ascend-op-statistic"
CORE_COLUMNS = ("Accelerator Core", "Task Type")  # older exports name the core column "Task Type"
KERNEL_NEEDS = ("Name", "Start Time(us)", "Duration(us)")
_STAT_NEEDS = ("OP Type", "Core Type", "Count", "Total Time(us)")
MAX_PROBLEMS = 12
_GROUPED = r"^[+-]?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]*)?$"  # 1,234.5: a figure a spreadsheet wrote with thousands marks
LIMIT = 2**61  # ns and counts beyond this are not a profile (and would overflow int64 columns)
BLOCK_BYTES = 4 << 20  # CSV read this much at a time (tests make it tiny)
SLICE_ROWS = 1 << 20  # kernels made into events at a time
_ZERO, _EMPTY = strings(["0", ""])  # Arrow scalars: a Python value given to a kernel would import pandas
_CELLS = ("Type", "Device_id", "Step Id", "Stream ID", "Input Shapes", "Input Data Types", "Output Shapes",
          "Output Data Types")  # the columns read besides Name and the times, and the core's  # fmt: skip
# Ascend (GE) data type names -> torch names
DTYPES = {"FLOAT16": "float16", "FLOAT": "float32", "FLOAT32": "float32", "BF16": "bfloat16", "BFLOAT16": "bfloat16",
          "DOUBLE": "float64", "INT64": "int64", "INT32": "int32", "INT16": "int16", "INT8": "int8", "UINT8": "uint8",
          "BOOL": "bool", "UINT64": "uint64", "UINT32": "uint32", "COMPLEX64": "complex64"}  # fmt: skip
_MISSING = ["host operators, syncs, transfers and compiles (kernel_details lists device kernels only)",
            "dispatch/cpu_fallback on the host (AI CPU kernels are counted as device-side fallbacks, reason ai-cpu)"]


def _name(cell: str) -> str:
    return cell.strip().strip('"').strip()


def header_cells(text: str) -> list[str]:
    """The column names of the first line of `text`, read as CSV: quoted names (an Excel or pandas QUOTE_ALL export:
    ``"Step Id","Model ID",...``), a byte order mark and spaces and quotes around a name removed. Raises csv.Error
    where the line is no CSV."""
    line = text.split("\n", 1)[0].lstrip("\ufeff").rstrip("\r")
    return [_name(c) for c in next(csv.reader([line], skipinitialspace=True), [])]


def _header(text: str) -> list[str]:
    try:
        return header_cells(text)
    except csv.Error:  # a sniff: nothing raised
        return []


def _blank(cells: list[str]) -> bool:
    """Whether a row's every cell is empty (spaces and quotes aside): a spreadsheet's blank row ``,,,,``."""
    return not any(_name(c) for c in cells)


def sniff_kernels(text: str) -> bool:
    """True when the first line is a kernel_details.csv header."""
    head = _header(text)
    return all(c in head for c in KERNEL_NEEDS) and any(c in head for c in CORE_COLUMNS)


def sniff_statistic(text: str) -> bool:
    """True when the first line is an op_statistic.csv header."""
    head = _header(text)
    return all(c in head for c in _STAT_NEEDS)


def clean_cell(value: str | None) -> str | None:
    """A cell without surrounding quotes, tabs and spaces; None for empty or N/A."""
    if not isinstance(value, str):
        return None
    value = value.strip().strip('"').strip()
    return None if value in ("", "N/A", "NA", "-") else value


def ungrouped(value: str | None) -> str | None:
    """A figure without its thousands marks (``"1,200"`` -> ``"1200"``); other text as it is."""
    if value is not None and re.fullmatch(_GROUPED, value):
        return value.replace(",", "")
    return value


def _shapes(text: str | None) -> str | None:
    """``81920,4096;8192,512`` -> ``81920x4096;8192x512`` (the trace format's notation)."""
    if text is None:
        return None
    return ";".join("x".join(d.strip() for d in s.split(",") if d.strip()) or "()" for s in text.split(";"))


def _dtypes(text: str | None) -> str | None:
    if text is None:
        return None
    names = [t.strip().upper().removeprefix("DT_") for t in text.split(";")]
    return ";".join(DTYPES.get(n, n.lower()) for n in names)


class _Cells:
    """The distinct cells of one column, each coded once as cleaned (`clean_cell`, then `form`): by `code` where
    given (the events' own text codes), else as an index into `values` (0: None, an empty or absent cell)."""

    def __init__(self, code: Callable[[str | None], int] | None = None, form: Callable[[str | None], str | None] | None = None) -> None:
        self.values: list[str | None] = [None]
        self._codes: dict[str | None, int] = {None: 0}
        self._code = code or self._own
        self._form = form or (lambda v: v)

    def _own(self, value: str | None) -> int:
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self.values)
            self.values.append(value)
        return code

    def __call__(self, cells: pa.Array) -> np.ndarray:
        """The code of each cell of a block's column (int32)."""
        encoded = cells.dictionary_encode()
        at = np.array([self._code(self._form(clean_cell(v))) for v in encoded.dictionary.to_pylist()] or [0], dtype=np.int32)
        return at[values_of(encoded.indices)]


def _ns(cells: pa.Array) -> np.ndarray:
    """Integer ns of microsecond cells (quotes, tabs and spaces around them removed), exactly: digits past ns cut;
    NONE where a cell is no decimal or is not below `LIMIT`."""
    import pyarrow.compute as pc  # here: every conversion imports this module, few read a CSV

    text = pc.utf8_trim_whitespace(pc.utf8_trim(pc.utf8_trim_whitespace(cells), '"'))
    text = pc.if_else(pc.match_substring_regex(text, _GROUPED), pc.replace_substring(text, ",", ""), text)
    ok = values_of(pc.match_substring_regex(text, r"^[+-]?[0-9]+(\.[0-9]*)?$"), null=False)
    text = pc.if_else(numbers(ok), text, _ZERO)
    digits = pc.utf8_ltrim(text, "+-")
    whole = pc.utf8_ltrim(pc.replace_substring_regex(digits, r"\..*$", ""), "0")
    long = values_of(pc.utf8_length(whole)) > 16
    whole = pc.if_else(numbers(long | values_of(pc.equal(whole, _EMPTY))), _ZERO, whole)
    frac = pc.utf8_slice_codeunits(pc.utf8_rpad(pc.replace_substring_regex(digits, r"^[0-9]*\.?", ""), 3, "0"), 0, 3)
    ns = values_of(pc.cast(whole, pa.int64())) * 1000 + values_of(pc.cast(frac, pa.int64()))
    ns = np.where(values_of(pc.starts_with(text, "-")), -ns, ns)
    bad = ~ok | long | (np.abs(ns) >= LIMIT)
    return np.where(bad, NONE, ns)


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


def _read_kernels(path: Path, caps: SizeCaps, out: EventColumns) -> tuple[list[str], dict[str, DiskColumn], dict[str, _Cells], int]:
    """(header, per kernel in file order its start and duration in ns and a code per cell of each column read, in
    temporary files, the columns' cells, the empty rows skipped): read in blocks by pyarrow's CSV reader; names and
    types coded as the events' texts (`out`)."""
    chunks = file_chunks(path, caps)
    first = next(chunks, b"")
    line = first.split(b"\n", 1)[0]
    try:
        header = header_cells(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise TraceFormatError(path, "not UTF-8 text (in the header)") from None
    except csv.Error as exc:  # e.g. a bare carriage return inside the header line
        raise TraceFormatError(path, f"the header line is not CSV ({exc})") from None
    missing = [c for c in KERNEL_NEEDS if c not in header]
    if missing:
        raise TraceFormatError(path, f"the header lacks the columns {missing} (has {header[:12]})")
    core_col = next((c for c in CORE_COLUMNS if c in header), None)
    if core_col is None:
        raise TraceFormatError(path, f"the header has neither of {list(CORE_COLUMNS)}")
    text = _Cells(out.text)
    cells = {"Name": text, "Type": text, "core": _Cells(), **{c: _Cells() for c in _CELLS[1:4]},
             **{c: _Cells(form=_dtypes if "Types" in c else _shapes) for c in _CELLS[4:]}}  # fmt: skip
    at = {c: f"c{header.index(c)}" for c in (*KERNEL_NEEDS, *_CELLS) if c in header} | {"core": f"c{header.index(core_col)}"}
    names = [f"c{i}" for i in range(len(header))]  # by position: header cells may repeat or differ in spaces
    ragged: list[str] = []
    empty = [0]  # blank rows of another width than the header's, skipped by the CSV reader
    skipped: list[int] = []  # lines of the rows the CSV reader skipped (of another width than the header)

    def bad_row(row: Any) -> str:
        if blank_line(row.text):  # a blank row of another width (``,,,`` one cell short): no kernel, skipped
            empty[0] += 1
        else:
            ragged.append(f"line {row.number or '?'}: {row.actual_columns} cells, the header has {row.expected_columns}")
        if row.number:
            skipped.append(row.number)
        return "skip"

    def line_of(n: int) -> int:
        """The line of the row that the CSV reader gave n-th (the header's is 1)."""
        line = n + 2
        for s in sorted(skipped):
            line += s <= line
        return line

    got = {c: DiskColumn("q" if c in ("start", "dur") else "i", hold=1 << 16) for c in ("start", "dur", *cells)}
    problems: list[str] = []
    bad = rows = blank_rows_read = 0  # blank_rows_read: blank rows of the header's width, skipped here
    from pyarrow import csv as pa_csv  # here: every conversion imports this module, few read a CSV

    try:
        reader = pa_csv.open_csv(
            _ChunkFile(path, itertools.chain([first], chunks)),
            read_options=pa_csv.ReadOptions(column_names=names, skip_rows=1, block_size=max(BLOCK_BYTES, 4 * len(line)),
                                            use_threads=False),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True, invalid_row_handler=bad_row),
            # every column, not only those read: a row is blank only where all its cells are (~3% slower than 11 columns)
            convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False,
                                                  quoted_strings_can_be_null=False),
        )  # fmt: skip
        for batch in reader:
            blank = blank_rows(batch)
            given = rows + np.flatnonzero(~blank)  # the kept rows, as the CSV reader gave them
            rows += batch.num_rows
            if blank.any():
                blank_rows_read += int(blank.sum())
                batch = batch.filter(numbers(~blank))
            start, dur = _ns(batch.column(at["Start Time(us)"])), _ns(batch.column(at["Duration(us)"]))
            name = text(batch.column(at["Name"]))
            wrong = np.flatnonzero((start == NONE) | (dur == NONE) | (dur < 0) | (name == 0))
            if len(wrong) and len(problems) < MAX_PROBLEMS:
                problems += [f"line {line_of(given[n])} ({out.texts[name[n]]!r:.40}): needs a Name, a Start Time(us) and a "
                             "non-negative Duration(us)" for n in wrong[: MAX_PROBLEMS - len(problems)].tolist()]  # fmt: skip
            bad += len(wrong)
            if bad:
                continue  # malformed: reported below
            got["start"].extend(start)
            got["dur"].extend(dur)
            got["Name"].extend(name)
            for c in (c for c in cells if c != "Name"):
                got[c].extend(cells[c](batch.column(at[c])) if c in at else np.zeros(batch.num_rows, dtype=np.int32))
            release_memory()  # the block's cells, freed between the kept columns: back to the system
    except pa.ArrowInvalid as exc:
        what = "not UTF-8 text" if "UTF8" in str(exc) else "not valid CSV"
        raise TraceFormatError(path, f"{what}: {exc}") from None
    if bad or ragged:
        filled = rows - blank_rows_read + len(ragged)  # the rows with a cell filled
        raise TraceFormatError(path, [f"{bad + len(ragged)} of {filled} rows are malformed",
                                      *[*ragged, *problems][:MAX_PROBLEMS]])  # fmt: skip
    if not len(got["start"]):
        blanks = f" ({blank_rows_read + empty[0]} empty: every cell empty)" if blank_rows_read + empty[0] else ""
        raise TraceFormatError(path, f"the table has a header but no rows{blanks}: nothing to convert")
    for column in got.values():
        column.flush()
    release_memory()
    return header, got, cells, blank_rows_read + empty[0]


def translate(path: Path, caps: SizeCaps = DEFAULT_CAPS) -> Translated:
    """The kernels of one kernel_details.csv in the one event model (module docstring): read into temporary files,
    then made into events `SLICE_ROWS` kernels at a time, in order of start (ties in file order)."""
    out = EventColumns(spill=True)  # a kernel is two events: on disk as they are made, not all held
    header, k, cells, empty = _read_kernels(path, caps, out)
    n = len(k["start"])
    order = _start_order(k["start"])

    def slices(*columns: str) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """(first kernel, these columns of kernels first.. in order of start), `SLICE_ROWS` kernels at a time."""
        for lo in range(0, n, SLICE_ROWS):
            at = order[lo : lo + SLICE_ROWS] if order is not None else slice(lo, lo + SLICE_ROWS)
            yield lo, {c: k[c][at] for c in columns}

    core, step, stream = cells["core"].values, cells["Step Id"].values, cells["Stream ID"].values
    dev_of = [d or "0" for d in cells["Device_id"].values]  # none given: device 0
    width = max(len(core), len(dev_of), len(stream))
    # what the events share, in one pass: the run's first start, devices, lanes, steps, cores, argument signatures
    t0, steps_first, steps_end = np.iinfo(np.int64).max, {}, {}
    dev_codes, raw_lanes, signatures = set(), set(), set()
    cores = np.zeros(len(core), dtype=np.int64)
    dtypes = cells["Input Data Types"].values
    for lo, c in slices("start", "dur", "Device_id", "core", "Stream ID", "Step Id", "Input Shapes", "Input Data Types"):
        t0 = min(t0, int(c["start"][0]))  # in order of start: a slice's first is its least
        dev_codes.update(np.unique(c["Device_id"]).tolist())
        raw_lanes.update(np.unique((c["core"].astype(np.int64) * width + c["Device_id"]) * width + c["Stream ID"]).tolist())
        signatures.update(np.unique(c["Input Shapes"].astype(np.int64) * len(dtypes) + c["Input Data Types"]).tolist())
        cores += np.bincount(c["core"], minlength=len(core))
        present, first, at = np.unique(c["Step Id"], return_index=True, return_inverse=True)  # per step: first start ...
        end = np.full(len(present), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(end, at.reshape(-1), c["start"] + c["dur"])  # ... and last end
        for s_, f, e in zip(present.tolist(), (lo + first).tolist(), end.tolist(), strict=True):
            steps_first.setdefault(s_, (f, int(c["start"][f - lo])))
            steps_end[s_] = max(steps_end.get(s_, e), e)
    used = sorted({dev_of[d] for d in dev_codes}, key=lambda d: (len(d), d))
    position = {d: i for i, d in enumerate(used)}
    dev_index = np.array([position.get(d, 0) for d in dev_of], dtype=np.int64)  # a device no kernel ran on: never read
    # lanes: one per distinct (core, device, stream)
    keys = np.unique([(r // width // width * width + dev_index[r // width % width]) * width + r % width for r in raw_lanes])
    lanes = [_lane(core[c // width // width] or "unknown", used[c // width % width] if len(used) > 1 else None,
                   stream[c % width]) for c in keys.tolist()]  # fmt: skip
    # steps: each from its first kernel's start to its last one's end, or the next step's first start
    ordered = sorted(steps_first, key=lambda s_: steps_first[s_][0])
    for s_, following in zip(ordered, [*ordered[1:], None], strict=True):
        if following is not None:
            steps_end[s_] = min(steps_end[s_], steps_first[following][1])
    for s_ in sorted(steps_first):
        if step[s_] is not None:
            lo_ns = steps_first[s_][1] - t0
            out.add(EventKind.ANNOTATION, f"step {step[s_]}", "NPU", None, lo_ns, steps_end[s_] - t0 - lo_ns)
    counts: dict[str, int] = {}
    for c in np.flatnonzero(cores).tolist():
        counts[core[c] or "unknown"] = counts.get(core[c] or "unknown", 0) + int(cores[c])
    signature = np.array(sorted(signatures), dtype=np.int64)
    shapes = cells["Input Shapes"].values
    arguments = [(shapes[s_ // len(dtypes)], None, dtypes[s_ % len(dtypes)], 0) for s_ in signature.tolist()]
    threads = [("NPU", name) for name, _ in lanes]  # a thread per lane: an operator nests in its lane's only

    def lane_of(c: dict[str, np.ndarray]) -> np.ndarray:
        key = (c["core"].astype(np.int64) * width + dev_index[c["Device_id"]]) * width + c["Stream ID"]
        return np.searchsorted(keys, key)

    for lo, c in slices("start", "dur", "Type", "Name", "Device_id", "core", "Stream ID", "Input Shapes", "Input Data Types",
                        "Output Shapes", "Output Data Types"):  # fmt: skip
        m = len(c["start"])
        sig = np.searchsorted(signature, c["Input Shapes"].astype(np.int64) * len(dtypes) + c["Input Data Types"])
        out.extend(EventKind.OP, m, start_ns=c["start"] - t0, dur_ns=c["dur"], correlation=np.arange(lo, lo + m),
                   threads=(threads, lane_of(c)), arguments=(arguments, sig),
                   device=dev_index[c["Device_id"]] if len(used) > 1 else None,  # an operator's own device (one: the run's)
                   texts={"name": (out.texts, np.where(c["Type"] != 0, c["Type"], c["Name"])),
                          **{t: (cells[f].values, c[f]) for t, f in (("output_shapes", "Output Shapes"),
                                                                     ("output_dtypes", "Output Data Types"))}})  # fmt: skip
    for lo, c in slices("start", "dur", "Name", "Device_id", "core", "Stream ID"):
        m = len(c["start"])
        lane = lane_of(c)
        out.extend(EventKind.KERNEL, m, start_ns=c["start"] - t0, dur_ns=c["dur"], correlation=np.arange(lo, lo + m),
                   device=dev_index[c["Device_id"]], threads=(threads, lane),
                   texts={"name": (out.texts, c["Name"]), "unit": (core, c["core"]), "lane": ([x[0] for x in lanes], lane),
                          "engine_kind": ([x[1] for x in lanes], lane)})  # fmt: skip
    for column in k.values():
        column.close()
    release_memory()
    missing = [*_MISSING, *([empty_rows(empty)] if empty else [])]
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=KERNELS_FORMAT,
                   devices=["cpu", *(f"npu:{d}" for d in used)], missing_signals=missing,
                   extra={"kernels": n, "columns": header, "accelerator_cores": dict(sorted(counts.items())),
                          "empty_rows": empty})  # fmt: skip
    return Translated(out, info, root_name=path.name.split(".")[0], root_device=f"npu:{used[0]}",
                      device_names={i: f"npu:{d}" for i, d in enumerate(used)})  # fmt: skip


def _start_order(start: DiskColumn) -> np.ndarray | None:
    """None where the kernels come in order of start (read a slice at a time), else the order (ties in file order:
    the starts then read whole)."""
    last = np.iinfo(np.int64).min
    for _, s in start.blocks(SLICE_ROWS):
        if s[0] < last or (s[1:] < s[:-1]).any():
            return np.argsort(start[:], kind="stable")
        last = s[-1]
    return None


def _lane(core: str, device: str | None, stream: str | None) -> tuple[str, str]:
    """(lane, engine kind) of kernels of one core, device (None: the only one) and stream."""
    prefix = "NPU" if device is None else f"NPU {device}"
    if core == "HCCL":
        return f"{prefix} HCCL" + (f" stream {stream}" if stream else ""), EngineKind.COLLECTIVE.value
    return (f"{prefix} stream {stream}" if stream else f"{prefix} {core}"), EngineKind.STREAM.value


def read_kernel_details(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert a torch_npu ``kernel_details.csv`` into device lanes, kernel rows and AI CPU fallbacks.

    sliced: the big tables as `Trace.slices`, made as they are written (converting never holds them whole)."""
    return assemble(translate(Path(path), caps), sliced=sliced)


def _rows(path: Path, caps: SizeCaps, needs: tuple[str, ...]) -> tuple[list[str], list[tuple[int, dict[str, str]]], int]:
    """(header, (line, cells by column) of each row, the empty rows skipped) of a small CSV table."""
    text = decode_text(path, read_bytes(path, caps)).lstrip("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    rows, empty = [], 0
    try:
        header = [_name(c) for c in next(reader, [])]
        missing = [c for c in needs if c not in header]
        if missing:
            raise TraceFormatError(path, f"the header lacks the columns {missing} (has {header[:12]})")
        for cells in reader:
            if not cells:
                continue  # a blank line
            if _blank(cells):
                empty += 1
                continue
            rows.append((reader.line_num, dict(zip(header, cells, strict=False))))
    except csv.Error as exc:
        raise TraceFormatError(path, f"not valid CSV: {exc}") from None
    if not rows:
        blanks = f" ({empty} empty: every cell empty)" if empty else ""
        raise TraceFormatError(path, f"the table has a header but no rows{blanks}: nothing to convert")
    return header, rows, empty


def read_op_statistic(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a torch_npu ``op_statistic.csv`` (totals per operator type) into counted AI CPU fallbacks."""
    path = Path(path)
    header, rows, empty = _rows(path, caps, _STAT_NEEDS)
    table, problems = [], []
    for line, row in rows:
        count, total = ungrouped(clean_cell(row.get("Count"))), micros_to_ns(ungrouped(clean_cell(row.get("Total Time(us)"))))
        op_type, core = clean_cell(row.get("OP Type")), clean_cell(row.get("Core Type")) or "unknown"
        if (op_type is None or count is None or not count.isdigit() or int(count) >= LIMIT or total is None
                or not 0 <= total < LIMIT):  # fmt: skip
            problems.append(f"line {line} ({op_type!r:.40}): needs an OP Type, an integer Count and a Total Time(us)")
            continue
        table.append({"device": clean_cell(row.get("Device_id")), "op_type": op_type, "core_type": core,
                      "count": int(count), "total_ns": total})  # fmt: skip
    if problems:
        raise TraceFormatError(path, [f"{len(problems)} of {len(rows)} rows are malformed", *problems[:MAX_PROBLEMS]])
    devices = sorted({t["device"] or "0" for t in table}, key=lambda d: (len(d), d))
    device_ns = dict.fromkeys(devices, 0)  # each device's time summed over its operator types
    for t in table:
        device_ns[t["device"] or "0"] += t["total_ns"]
    busiest = max(devices, key=lambda d: device_ns[d])  # the first of equals
    missing = ["timeline (op_statistic holds totals per operator type, no times)",
               "host operators, syncs, transfers and compiles (device totals only)", *([empty_rows(empty)] if empty else [])]
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=STATISTIC_FORMAT,
                   devices=["cpu", *(f"npu:{d}" for d in devices)], missing_signals=missing,
                   extra={"op_statistic": table, "columns": header, "empty_rows": empty,
                          "device_time_ns": {f"npu:{d}": ns for d, ns in device_ns.items()}})  # fmt: skip
    out = EventColumns()
    note = "dur_ns is the sum of device time over operator types"
    if len(devices) > 1:
        note += f" of the busiest device, npu:{busiest} (devices run side by side: their times are not added)"
    facts = RegionFacts(tags=json.dumps({"note": note}))
    out.add(EventKind.ANNOTATION, path.name.split(".")[0], "NPU", None, 0, min(device_ns[busiest], LIMIT),
            region_facts=out.region_facts(facts))  # fmt: skip
    untimed = out.log(Logged(timed=False))
    for t in table:
        if t["count"]:  # an operator type that ran, where and how often (no time)
            out.add(EventKind.PLACEMENT, t["op_type"], "NPU", t["device"] or "0", 0, unit=t["core_type"],
                    device=devices.index(t["device"] or "0"), count=t["count"], logged=untimed)  # fmt: skip
    return assemble(Translated(out, info, root_name=None, root_device=f"npu:{devices[0]}",
                               device_names={i: f"npu:{d}" for i, d in enumerate(devices)}))  # fmt: skip


__all__ = ["BLOCK_BYTES", "KERNELS_FORMAT", "STATISTIC_FORMAT", "header_cells", "read_kernel_details", "read_op_statistic",
           "sniff_kernels", "sniff_statistic", "translate"]  # fmt: skip

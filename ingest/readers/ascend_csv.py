"""torch_npu (Ascend) profiler tables ``kernel_details.csv`` and ``op_statistic.csv`` -> Trace.

``kernel_details.csv``: one row per kernel the device ran. Header variants (both real):
``Step Id,Model ID,Task ID,Stream ID,Name,Type,[OP State,]Accelerator Core,Start Time(us),Duration(us),
Wait Time(us),Block Dim,...,Input Shapes,Input Data Types,...`` or the same led by ``Device_id,``.
``Accelerator Core`` is AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU (the kernel ran on the
device's AI CPU: a device-side fallback, ``dispatch/cpu_fallback`` with reason ``ai-cpu``), HCCL
(communication: collective lane) or DSA_SQE. Quirks kept by the reader: a TAB inside the quoted start
time (``"1736413971558972.912<TAB>"``), shapes in tripled quotes (three double quotes around ``81920,4096;8192,512``),
``N/A`` for an unknown field (HCCL rows have no stream). Times are parsed as decimals, exactly.
Each kernel becomes an operator row (named by its ``Type``; placement device, shapes, dtypes) and an engine
slice on ``NPU [<device> ]stream <Stream ID>`` (``NPU HCCL`` without a stream); each ``Step Id`` a region.

``op_statistic.csv``: ``[Device_id,]OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),
Max Time(us),Ratio(%)`` -- totals per operator type, no timeline: AI_CPU rows become counted
fallback signals, and the table is kept in ``run_info.extra["op_statistic"]``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..builder import TraceBuilder
from ..columns import Coder, table_of
from ..errors import TraceFormatError
from ..rules import AI_CPU, AI_CPU_NOTE
from ..schema import TABLES, EngineKind, Mode, Placement, SignalKind, SliceKind, Source
from ..spill import release_memory
from ..trace import RunInfo, TableSlices, Trace
from . import _chrome_slices
from ._chrome_slices import finish
from ._chrome_stream import micros_to_ns
from ._kernel_columns import (
    CORE_COLUMNS,
    KERNEL_NEEDS,
    LIMIT,
    MAX_PROBLEMS,
    Cells,
    Kernels,
    clean_cell,
    read_kernel_columns,
)
from ._kernel_names import DiskNames
from ._kernel_order import first_seen, in_order, sort_by_start
from ._source import DEFAULT_CAPS, SizeCaps, decode_text, read_bytes

KERNELS_FORMAT = "ascend-kernels"
_SLICES = TABLES["engine_slices"]
_PLAIN_SLICES = _SLICES.set(_SLICES.get_field_index("name"), _SLICES.field("name").with_type(pa.string()))  # many names
STATISTIC_FORMAT = "ascend-op-statistic"
_STAT_NEEDS = ("OP Type", "Core Type", "Count", "Total Time(us)")
# Ascend (GE) data type names -> torch names
DTYPES = {"FLOAT16": "float16", "FLOAT": "float32", "FLOAT32": "float32", "BF16": "bfloat16", "BFLOAT16": "bfloat16",
          "DOUBLE": "float64", "INT64": "int64", "INT32": "int32", "INT16": "int16", "INT8": "int8", "UINT8": "uint8",
          "BOOL": "bool", "UINT64": "uint64", "UINT32": "uint32", "COMPLEX64": "complex64"}  # fmt: skip


def _header(text: str) -> list[str]:
    return [c.strip() for c in text.split("\n", 1)[0].lstrip("\ufeff").strip().split(",")]


def sniff_kernels(text: str) -> bool:
    """True when the first line is a kernel_details.csv header."""
    head = _header(text)
    return all(c in head for c in KERNEL_NEEDS) and any(c in head for c in CORE_COLUMNS)


def sniff_statistic(text: str) -> bool:
    """True when the first line is an op_statistic.csv header."""
    head = _header(text)
    return all(c in head for c in _STAT_NEEDS)


def _rows(path: Path, caps: SizeCaps, needs: tuple[str, ...]) -> tuple[list[str], list[dict[str, str]]]:
    text = decode_text(path, read_bytes(path, caps)).lstrip("\ufeff")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [c.strip() for c in reader.fieldnames or []]
    missing = [c for c in needs if c not in header]
    if missing:
        raise TraceFormatError(path, f"the header lacks the columns {missing} (has {header[:12]})")
    reader.fieldnames = header
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise TraceFormatError(path, f"not valid CSV: {exc}") from None
    if not rows:
        raise TraceFormatError(path, "the table has a header but no rows: nothing to convert")
    return header, rows


def _field(row: dict[str, str], key: str) -> str | None:
    """A cell without surrounding quotes, tabs and spaces; None for empty or N/A."""
    return clean_cell(row.get(key))


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


def read_kernel_details(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert a torch_npu ``kernel_details.csv`` into device lanes, kernel rows and AI CPU fallbacks.

    Read in blocks by pyarrow's CSV reader into columns on disk (24 bytes a kernel; names coded on disk,
    `_kernel_names`: only the dictionary of distinct names is held, once read), put in start order on disk if
    they are not (`_kernel_order`); the ops, engine slices and signals are made `SLICE_ROWS` kernels at a time as
    they are written (sliced: `Trace.slices`) or gathered. Names too many for a dictionary of
    `_kernel_names.DICT_MAX_BYTES` stay on disk and `engine_slices.name` is a plain string column, gathered slice by
    slice."""
    path = Path(path)
    k = read_kernel_columns(path, caps)
    cells, clean = k.cells, k.cells.clean
    n, n_combo = len(k.start), len(k.combo_cells[k.core_col])
    rows = _chrome_slices.SLICE_ROWS
    renumber = None  # codes given in order of first appearance already when the kernels come in start order
    if not in_order(k.start, rows):  # kernels by start (a stable sort: ties keep file order)
        cols = sort_by_start({"start": k.start, "dur": k.dur, "name": k.name, "combo": k.combo}, hold=k.start.hold)
        k.start, k.dur, k.name, k.combo = cols["start"], cols["dur"], cols["name"], cols["combo"]
        if isinstance(k.names, pa.Array):  # plain strings (DiskNames) have no dictionary to put in order
            renumber, order = first_seen(k.name, len(k.names), rows)  # the dictionary in order of first appearance (by start)
            k.names = k.names.take(pa.array(order))
            del order
    release_memory()
    none = np.full(n_combo, cells.code(None), dtype=np.int32)
    of = {c: k.combo_cells.get(c, none) for c in ("Device_id", "Step Id", "Stream ID", "Type")}  # per combo
    typed = np.array([v is not None for v in clean] or [False], dtype=bool)[of["Type"]]  # per combo
    t0, end = int(k.start[0]), None
    first_of = np.full(n_combo, np.iinfo(np.int64).max, dtype=np.int64)  # per combo: its first start, last end
    last_of = np.full(n_combo, np.iinfo(np.int64).min, dtype=np.int64)
    per_combo = np.zeros(n_combo, dtype=np.int64)
    untyped: list[np.ndarray] = []  # name codes of kernels without a Type
    for _, start, dur, combo, name in _blocks(k, renumber, 0, rows):
        ends = start + dur
        end = int(ends.max()) if end is None else max(end, int(ends.max()))
        np.minimum.at(first_of, combo, start)
        np.maximum.at(last_of, combo, ends)
        per_combo += np.bincount(combo, minlength=n_combo)
        untyped = [np.unique(np.concatenate([*untyped, name[~typed[combo]]]))]
    named = untyped[0].astype(np.int32) if untyped else np.zeros(0, dtype=np.int32)
    del untyped
    dev_of = [c or "0" for c in clean]
    used_devs = sorted({dev_of[c] for c in np.unique(of["Device_id"]).tolist()}, key=lambda d: (len(d), d))
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=KERNELS_FORMAT,
                   devices=["cpu", *(f"npu:{d}" for d in used_devs)],
                   missing_signals=["host operators, syncs, transfers and compiles (kernel_details lists device kernels only)",
                                    "dispatch/cpu_fallback on the host (AI CPU kernels are counted as device-side "
                                    "fallbacks, reason ai-cpu)"],
                   extra={"kernels": n, "columns": k.header})  # fmt: skip
    b = TraceBuilder(info)
    root = b.add_region(path.name.split(".")[0], dur_ns=end - t0, mode=Mode.UNKNOWN, device=f"npu:{used_devs[0]}")
    region_of_cell = np.full(len(clean) or 1, root, dtype=np.int32)
    step_code = of["Step Id"]
    steps = [c for c in np.unique(step_code).tolist() if clean[c] is not None]
    first = np.full(len(clean), np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(len(clean), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, step_code, first_of)  # per step: its first start and last end
    np.maximum.at(last, step_code, last_of)
    for c in sorted(steps, key=lambda c: (len(clean[c]), clean[c])):  # type: ignore[arg-type]
        region_of_cell[c] = b.add_region(f"step {clean[c]}", start_ns=int(first[c]) - t0, dur_ns=int(last[c] - first[c]),
                                         parent_id=root, device=f"npu:{used_devs[0]}")  # fmt: skip
    region = region_of_cell[step_code]  # per combo
    # lanes: one per distinct (core, device, stream)
    core_code, stream_code = k.combo_cells[k.core_col], of["Stream ID"]
    width = max(len(clean), 1)
    lane_key = (core_code.astype(np.int64) * width + of["Device_id"]) * width + stream_code
    keys, lane_at = np.unique(lane_key, return_inverse=True)
    lane_at = lane_at.astype(np.int32).reshape(-1)  # per combo
    keys = np.stack([keys // (width * width), keys // width % width, keys % width], axis=1)
    prefix_dev = len(used_devs) > 1
    lanes = []
    for core_c, dev_c, stream_c in keys.tolist():
        core, dev, stream = clean[core_c] or "unknown", dev_of[dev_c], clean[stream_c]
        prefix = f"NPU {dev}" if prefix_dev else "NPU"
        if core == "HCCL":
            lanes.append((f"{prefix} HCCL" + (f" stream {stream}" if stream else ""), EngineKind.COLLECTIVE, SliceKind.COMPUTE))
        else:
            lanes.append((f"{prefix} stream {stream}" if stream else f"{prefix} {core}", EngineKind.STREAM,
                          SliceKind.FALLBACK if core == AI_CPU else SliceKind.COMPUTE))  # fmt: skip
    per_core = np.zeros(len(clean) or 1, dtype=np.int64)
    np.add.at(per_core, core_code, per_combo)
    cores: dict[str, int] = {}
    for c in np.flatnonzero(per_core).tolist():
        cores[clean[c] or "unknown"] = cores.get(clean[c] or "unknown", 0) + int(per_core[c])
    b.run_info.extra["accelerator_cores"] = dict(sorted(cores.items()))
    ai_cpu = np.array([v == AI_CPU for v in clean], dtype=bool)[core_code]  # per combo: AI CPU kernels, a fallback each
    trace = b.build()
    cell = {c: k.combo_cells.get(c, none) for c in ("Input Shapes", "Input Data Types", "Output Shapes", "Output Data Types", "Device_id")}
    op_name = _OpNames(clean, of["Type"], typed, named, k.names)
    made = _KernelRows(k, renumber, t0, region, op_name, ai_cpu)
    tables = _kernel_tables(made, cell, cells, lanes, lane_at, dev_of)
    signals = int(per_combo[ai_cpu].sum())
    if signals:
        tables["signals"] = TableSlices(signals, made.signal_batches)
    return finish(trace, tables, sliced=sliced)


def _blocks(k: Kernels, renumber: np.ndarray | None, t0: int,
            rows: int) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:  # fmt: skip
    """(first kernel, start - t0, dur, combo, name code) of `rows` kernels at a time, read from disk."""
    for lo in range(0, len(k.start), max(1, rows)):
        name = k.name.read(lo, lo + rows)
        start = k.start.read(lo, lo + rows)
        start -= t0
        yield lo, start, k.dur.read(lo, lo + rows), k.combo.read(lo, lo + rows), name if renumber is None else renumber[name]


class _OpNames:
    """Per kernel its Type, or its Name where it has none, dictionary-encoded (types first, then those names:
    `named`, the sorted name codes of kernels without a Type)."""

    def __init__(self, clean: list[str | None], type_of: np.ndarray, typed: np.ndarray, named: np.ndarray,
                 names: pa.Array | DiskNames) -> None:  # fmt: skip
        types = np.unique(type_of[typed])
        at = np.zeros(len(clean) or 1, dtype=np.int32)
        at[types] = np.arange(len(types), dtype=np.int32)
        self.of_combo, self.typed, self.named, self.first_named = at[type_of], typed, named, len(types)
        texts = names.take(pa.array(named)) if isinstance(names, pa.Array) else names.texts(named)
        self.words = pa.concat_arrays([pa.array([clean[c] for c in types.tolist()], pa.string()), texts])

    def __call__(self, combo: np.ndarray, name: np.ndarray) -> pa.DictionaryArray:
        has_type = self.typed[combo]
        indices = self.of_combo[combo]
        indices[~has_type] = self.first_named + np.searchsorted(self.named, name[~has_type])
        return pa.DictionaryArray.from_arrays(pa.array(indices), self.words)


@dataclasses.dataclass
class _KernelRows:
    """What the tables' slices are made of: the kernels on disk and per-combo lookups."""

    k: Kernels
    renumber: np.ndarray | None
    t0: int
    region: np.ndarray  # per combo
    op_name: _OpNames
    ai_cpu: np.ndarray  # per combo

    def blocks(self) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        return _blocks(self.k, self.renumber, self.t0, _chrome_slices.SLICE_ROWS)

    def signal_batches(self) -> Iterator[pa.RecordBatch]:
        """A fallback signal per AI CPU kernel."""
        for lo, start, _, combo, name in self.blocks():
            which = np.flatnonzero(self.ai_cpu[combo])
            m = len(which)
            if not m:
                continue

            def constant(word: str, m: int = m) -> pa.DictionaryArray:
                return pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, dtype=np.int32)), pa.array([word]))

            yield from table_of("signals", {
                "region_id": self.region[combo[which]], "op_id": which.astype(np.int64) + lo,
                "kind": constant(SignalKind.CPU_FALLBACK.value), "reason": constant("ai-cpu"),
                "op_name": self.op_name(combo[which], name[which]), "count": np.ones(m, dtype=np.int64),
                "bytes": np.zeros(m, dtype=np.int64), "note": constant(AI_CPU_NOTE), "time_ns": start[which]}).to_batches()  # fmt: skip


def _kernel_tables(made: _KernelRows, cell: dict[str, np.ndarray], cells: Cells, lanes: list[tuple[str, EngineKind, SliceKind]],
                   lane_at: np.ndarray, dev_of: list[str]) -> dict[str, TableSlices]:  # fmt: skip
    """The ops (one per kernel, placement device) and engine slices, made slice by slice with shared dictionaries;
    `cell`, `made.region` and `lane_at` are per combo."""
    clean = cells.clean
    n = len(made.k.start)
    region = made.region

    def coder(values: list, codes: np.ndarray) -> Coder:
        used = np.zeros(len(values), dtype=bool)
        used[codes] = True
        return Coder(values, used)

    shapes, dtypes = [_shapes(v) for v in clean], [_dtypes(v) for v in clean]
    ops = {"device": coder([f"npu:{d}" for d in dev_of], cell["Device_id"]),
           "input_shapes": coder(shapes, cell["Input Shapes"]), "input_dtypes": coder(dtypes, cell["Input Data Types"]),
           "output_shapes": coder(shapes, cell["Output Shapes"]), "output_dtypes": coder(dtypes, cell["Output Data Types"])}  # fmt: skip
    placement = Coder([Placement.DEVICE.value], np.ones(1, dtype=bool))
    engines = sorted({e for e, _, _ in lanes})
    lane_engine = np.array([engines.index(e) for e, _, _ in lanes], dtype=np.int32)
    ekinds = sorted({k.value for _, k, _ in lanes})
    lane_ekind = np.array([ekinds.index(k.value) for _, k, _ in lanes], dtype=np.int32)
    kinds = sorted({k.value for _, _, k in lanes})
    lane_kind = np.array([kinds.index(k.value) for _, _, k in lanes], dtype=np.int32)
    slices = {"engine": Coder(engines, np.ones(len(engines), dtype=bool)), "engine_kind": Coder(ekinds, np.ones(len(ekinds), dtype=bool)),
              "kind": Coder(kinds, np.ones(len(kinds), dtype=bool))}
    names = made.k.names
    plain = None if isinstance(names, pa.Array) else _PLAIN_SLICES

    def op_batches() -> Iterator[pa.RecordBatch]:
        for lo, start, dur, of, name in made.blocks():
            m = len(of)
            yield from table_of("ops", {
                "op_id": np.arange(lo, lo + m, dtype=np.int64), "region_id": region[of], "name": made.op_name(of, name),
                "start_ns": start, "dur_ns": dur, "placement": placement(np.zeros(m, dtype=np.int32)),
                "device": ops["device"](cell["Device_id"][of]),
                **{k: ops[k](cell[c][of]) for k, c in (("input_shapes", "Input Shapes"), ("input_dtypes", "Input Data Types"),
                                                       ("output_shapes", "Output Shapes"), ("output_dtypes", "Output Data Types"))},
                "bytes_in": np.zeros(m, dtype=np.int64), "bytes_out": np.zeros(m, dtype=np.int64)}).to_batches()  # fmt: skip

    def slice_batches() -> Iterator[pa.RecordBatch]:
        for lo, start, dur, of, name in made.blocks():
            lane = lane_at[of]
            table = table_of("engine_slices", {
                "region_id": region[of], "engine": slices["engine"](lane_engine[lane]),
                "engine_kind": slices["engine_kind"](lane_ekind[lane]), "kind": slices["kind"](lane_kind[lane]),
                "name": pa.DictionaryArray.from_arrays(pa.array(name), names) if plain is None else None,
                "start": start, "dur": dur, "op_id": np.arange(lo, lo + len(lane), dtype=np.int64)})  # fmt: skip
            if plain is not None:  # the names' text gathered from disk for this slice only
                at = plain.get_field_index("name")
                table = table.set_column(at, plain.field(at), names.texts(name))  # type: ignore[union-attr]
            yield from table.to_batches()

    return {"ops": TableSlices(n, op_batches), "engine_slices": TableSlices(n, slice_batches, plain)}


def read_op_statistic(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a torch_npu ``op_statistic.csv`` (totals per operator type) into counted AI CPU fallbacks."""
    path = Path(path)
    header, rows = _rows(path, caps, _STAT_NEEDS)
    table, problems = [], []
    for n, row in enumerate(rows):
        count, total = _field(row, "Count"), micros_to_ns(_field(row, "Total Time(us)"))
        op_type, core = _field(row, "OP Type"), _field(row, "Core Type") or "unknown"
        if (op_type is None or count is None or not count.isdigit() or int(count) >= LIMIT or total is None
                or not 0 <= total < LIMIT):  # fmt: skip
            problems.append(f"line {n + 2} ({op_type!r:.40}): needs an OP Type, an integer Count and a Total Time(us)")
            continue
        table.append({"device": _field(row, "Device_id"), "op_type": op_type, "core_type": core, "count": int(count),
                      "total_ns": total})  # fmt: skip
    if problems:
        raise TraceFormatError(path, [f"{len(problems)} of {len(rows)} rows are malformed", *problems[:MAX_PROBLEMS]])
    devices = sorted({t["device"] or "0" for t in table}, key=lambda d: (len(d), d))
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=STATISTIC_FORMAT,
                   devices=["cpu", *(f"npu:{d}" for d in devices)],
                   missing_signals=["timeline (op_statistic holds totals per operator type, no times)",
                                    "host operators, syncs, transfers and compiles (device totals only)"],
                   extra={"op_statistic": table, "columns": header})  # fmt: skip
    b = TraceBuilder(info)
    total = min(sum(t["total_ns"] for t in table), LIMIT)
    rid = b.add_region(path.name.split(".")[0], dur_ns=total, mode=Mode.UNKNOWN, device=f"npu:{devices[0]}",
                       tags=json.dumps({"note": "dur_ns is the sum of device time over operator types"}))  # fmt: skip
    for t in table:
        if t["core_type"] == AI_CPU and t["count"]:
            b.signals.append(region_id=rid, kind=SignalKind.CPU_FALLBACK, reason="ai-cpu", op_name=t["op_type"],
                             count=t["count"], bytes=0, note=AI_CPU_NOTE)  # fmt: skip
    return b.build()


__all__ = ["KERNELS_FORMAT", "STATISTIC_FORMAT", "read_kernel_details", "read_op_statistic", "sniff_kernels",
           "sniff_statistic"]  # fmt: skip

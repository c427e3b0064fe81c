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
import io
import json
from pathlib import Path

from ..builder import TraceBuilder
from ..errors import TraceFormatError
from ..schema import EngineKind, Mode, Placement, SignalKind, SliceKind, Source
from ..trace import RunInfo, Trace
from ._chrome_stream import micros_to_ns
from ._source import DEFAULT_CAPS, SizeCaps, decode_text, read_bytes
from .ascend_trace import AI_CPU, AI_CPU_NOTE

KERNELS_FORMAT = "ascend-kernels"
STATISTIC_FORMAT = "ascend-op-statistic"
_CORE = ("Accelerator Core", "Task Type")  # older exports name the core column "Task Type"
_KERNEL_NEEDS = ("Name", "Start Time(us)", "Duration(us)")
_STAT_NEEDS = ("OP Type", "Core Type", "Count", "Total Time(us)")
# Ascend (GE) data type names -> torch names
DTYPES = {"FLOAT16": "float16", "FLOAT": "float32", "FLOAT32": "float32", "BF16": "bfloat16", "BFLOAT16": "bfloat16",
          "DOUBLE": "float64", "INT64": "int64", "INT32": "int32", "INT16": "int16", "INT8": "int8", "UINT8": "uint8",
          "BOOL": "bool", "UINT64": "uint64", "UINT32": "uint32", "COMPLEX64": "complex64"}  # fmt: skip
_MAX_PROBLEMS = 12
_LIMIT = 2**61  # ns and counts beyond this are not a profile (and would overflow int64 columns)


def _header(text: str) -> list[str]:
    return [c.strip() for c in text.split("\n", 1)[0].lstrip("\ufeff").strip().split(",")]


def sniff_kernels(text: str) -> bool:
    """True when the first line is a kernel_details.csv header."""
    head = _header(text)
    return all(c in head for c in _KERNEL_NEEDS) and any(c in head for c in _CORE)


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
    value = row.get(key)
    if not isinstance(value, str):
        return None
    value = value.strip().strip('"').strip()
    return None if value in ("", "N/A", "NA", "-") else value


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


def read_kernel_details(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a torch_npu ``kernel_details.csv`` into device lanes, kernel rows and AI CPU fallbacks."""
    path = Path(path)
    header, rows = _rows(path, caps, _KERNEL_NEEDS)
    core_col = next((c for c in _CORE if c in header), None)
    if core_col is None:
        raise TraceFormatError(path, f"the header has neither of {list(_CORE)}")
    problems: list[str] = []
    kernels = []
    for n, row in enumerate(rows):
        start, dur = micros_to_ns(_field(row, "Start Time(us)")), micros_to_ns(_field(row, "Duration(us)"))
        name = _field(row, "Name")
        if start is None or dur is None or not (abs(start) < _LIMIT and 0 <= dur < _LIMIT) or name is None:
            problems.append(f"line {n + 2} ({name!r:.40}): needs a Name, a Start Time(us) and a non-negative Duration(us)")
            continue
        kernels.append((start, dur, name, row))
    if problems:
        raise TraceFormatError(path, [f"{len(problems)} of {len(rows)} rows are malformed", *problems[:_MAX_PROBLEMS]])
    kernels.sort(key=lambda k: k[0])
    t0 = kernels[0][0]
    end = max(s + d for s, d, _, _ in kernels)
    devices = sorted({_field(r, "Device_id") or "0" for *_, r in kernels}, key=lambda d: (len(d), d))
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=KERNELS_FORMAT,
                   devices=["cpu", *(f"npu:{d}" for d in devices)],
                   missing_signals=["host operators, syncs, transfers and compiles (kernel_details lists device kernels only)",
                                    "dispatch/cpu_fallback on the host (AI CPU kernels are counted as device-side "
                                    "fallbacks, reason ai-cpu)"],
                   extra={"kernels": len(kernels), "columns": header})  # fmt: skip
    b = TraceBuilder(info)
    root = b.add_region(path.name.split(".")[0], dur_ns=end - t0, mode=Mode.UNKNOWN, device=f"npu:{devices[0]}")
    steps: dict[str, int] = {}
    for step in sorted({_field(r, "Step Id") for *_, r in kernels} - {None}, key=lambda s: (len(s), s)):
        own = [(s, d) for s, d, _, r in kernels if _field(r, "Step Id") == step]
        first, last = min(s for s, _ in own), max(s + d for s, d in own)
        steps[step] = b.add_region(f"step {step}", start_ns=first - t0, dur_ns=last - first, parent_id=root,
                                   device=f"npu:{devices[0]}")  # fmt: skip
    cores: dict[str, int] = {}
    for op_id, (start, dur, name, row) in enumerate(kernels):
        core = _field(row, core_col) or "unknown"
        cores[core] = cores.get(core, 0) + 1
        dev = _field(row, "Device_id") or "0"
        rid = steps.get(_field(row, "Step Id") or "", root)
        stream = _field(row, "Stream ID")
        prefix = f"NPU {dev}" if len(devices) > 1 else "NPU"
        if core == "HCCL":
            engine, engine_kind = f"{prefix} HCCL" + (f" stream {stream}" if stream else ""), EngineKind.COLLECTIVE
        else:
            engine, engine_kind = f"{prefix} stream {stream}" if stream else f"{prefix} {core}", EngineKind.STREAM
        kind = SliceKind.FALLBACK if core == AI_CPU else SliceKind.COMPUTE
        op_type = _field(row, "Type") or name
        b.ops.append(op_id=op_id, region_id=rid, name=op_type, start_ns=start - t0, dur_ns=dur, placement=Placement.DEVICE,
                     device=f"npu:{dev}", input_shapes=_shapes(_field(row, "Input Shapes")),
                     input_dtypes=_dtypes(_field(row, "Input Data Types")),
                     output_shapes=_shapes(_field(row, "Output Shapes")),
                     output_dtypes=_dtypes(_field(row, "Output Data Types")), bytes_in=0, bytes_out=0)  # fmt: skip
        b.engine_slices.append(region_id=rid, engine=engine, engine_kind=engine_kind, kind=kind, name=name,
                               start=start - t0, dur=dur, op_id=op_id)  # fmt: skip
        if core == AI_CPU:
            b.signals.append(region_id=rid, op_id=op_id, kind=SignalKind.CPU_FALLBACK, reason="ai-cpu", op_name=op_type,
                             count=1, bytes=0, note=AI_CPU_NOTE, time_ns=start - t0)  # fmt: skip
    b.run_info.extra["accelerator_cores"] = dict(sorted(cores.items()))
    return b.build()


def read_op_statistic(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a torch_npu ``op_statistic.csv`` (totals per operator type) into counted AI CPU fallbacks."""
    path = Path(path)
    header, rows = _rows(path, caps, _STAT_NEEDS)
    table, problems = [], []
    for n, row in enumerate(rows):
        count, total = _field(row, "Count"), micros_to_ns(_field(row, "Total Time(us)"))
        op_type, core = _field(row, "OP Type"), _field(row, "Core Type") or "unknown"
        if (op_type is None or count is None or not count.isdigit() or int(count) >= _LIMIT or total is None
                or not 0 <= total < _LIMIT):  # fmt: skip
            problems.append(f"line {n + 2} ({op_type!r:.40}): needs an OP Type, an integer Count and a Total Time(us)")
            continue
        table.append({"device": _field(row, "Device_id"), "op_type": op_type, "core_type": core, "count": int(count),
                      "total_ns": total})  # fmt: skip
    if problems:
        raise TraceFormatError(path, [f"{len(problems)} of {len(rows)} rows are malformed", *problems[:_MAX_PROBLEMS]])
    devices = sorted({t["device"] or "0" for t in table}, key=lambda d: (len(d), d))
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=STATISTIC_FORMAT,
                   devices=["cpu", *(f"npu:{d}" for d in devices)],
                   missing_signals=["timeline (op_statistic holds totals per operator type, no times)",
                                    "host operators, syncs, transfers and compiles (device totals only)"],
                   extra={"op_statistic": table, "columns": header})  # fmt: skip
    b = TraceBuilder(info)
    total = min(sum(t["total_ns"] for t in table), _LIMIT)
    rid = b.add_region(path.name.split(".")[0], dur_ns=total, mode=Mode.UNKNOWN, device=f"npu:{devices[0]}",
                       tags=json.dumps({"note": "dur_ns is the sum of device time over operator types"}))  # fmt: skip
    for t in table:
        if t["core_type"] == AI_CPU and t["count"]:
            b.signals.append(region_id=rid, kind=SignalKind.CPU_FALLBACK, reason="ai-cpu", op_name=t["op_type"],
                             count=t["count"], bytes=0, note=AI_CPU_NOTE)  # fmt: skip
    return b.build()


__all__ = ["KERNELS_FORMAT", "STATISTIC_FORMAT", "read_kernel_details", "read_op_statistic", "sniff_kernels",
           "sniff_statistic"]  # fmt: skip

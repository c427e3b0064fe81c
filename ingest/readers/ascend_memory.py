"""torch_npu (Ascend) profiler memory tables ``memory_record.csv`` and ``operator_memory.csv`` -> events -> Trace.

Both become MEMORY events (bytes, ``total_allocated``, ``total_reserved``, ``device``) as Kineto's ``[memory]``
instants do, so `assemble` makes the same tables of them: a memory lane per device (``memory npu:0``: the total
allocated as a stepped level, and the total reserved) and each region's peak, the greatest total allocated inside
it. Columns are found by name and read in the unit their header gives (`memory_table`: B, KB, MB, GB with
KB = 1024 B as the Ascend documentation converts them; times in ns, us, ms), decimal cells exactly (times to the
ns, sizes to the nearest byte); times count from the first event's. An empty or negative time or total is "not
collected": the Ascend documentation says the allocation or release fell outside the collection. The device is
the row's ``Device Type`` (``NPU:0``), else ``Device``, else ``Device_id``; ``CPU`` is the host (device -1); none:
device 0. A row whose every cell is empty (a spreadsheet's blank row) is skipped and counted (``empty_rows`` in
``run_info.extra`` and the "could not provide" line). The file holds no steps: its one region is the run (the file).

``memory_record.csv`` — the totals of each allocator component after each change: torch_npu ``Component,
Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type``, CANN's msprof
``Device_id,Component,Timestamp(us),Total Allocated(KB),Total Reserved(KB),Device``. Components: ``PTA``
(torch_npu's caching allocator), ``GE`` (the graph engine's pool), ``PTA+GE`` (the two summed), ``APP`` (the whole
process's device memory), ``WORKSPACE``, ``MindSpore``... The lanes hold one component, the framework's allocator
(`allocator_component`): ``PTA``, else ``MindSpore``, else ``GE`` (an msprof collection has only GE), else the
first of ``PTA+GE``, ``MindSpore+GE``, ``APP`` present, else the first row's. ``PTA`` is what Kineto's
``[memory]`` events are on CUDA (the PyTorch caching allocator), so a peak means the same for both readers; a lane
per (device, component) would set ``APP`` (which holds all the others) beside it and make every region's peak
(the greatest total among its device memory events) ``APP``'s. The other components are kept as figures
(`run_info.extra["memory_components"]`: records, peak allocated and reserved per component and device). Each
event's bytes are the change from the previous total of its lane (the file gives no size per change; a lane's
first event has none). ``Total Active`` and ``Stream Ptr`` have no column in the event model.

``operator_memory.csv`` — one row per block an operator allocated: torch_npu ``Name,Size(KB),Allocation
Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),Allocation Total Allocated(MB),
Allocation Total Reserved(MB),Allocation Total Active(MB),Release Total Allocated(MB),Release Total Reserved(MB),
Release Total Active(MB),Stream Ptr,Device Type`` (its totals are the PyTorch and GE pools' together), msprof
``Device_id,Name,Size(KB),Allocation Time(us),Duration(us),Allocation Total Allocated(KB),...,Device`` (GE's). A
row gives an allocation (+size, the allocation totals) at its Allocation Time and a release (-size, the release
totals) at its Release Time, else its Allocation Time + Duration. A negative Size is a release whose allocation
came before the collection (the Ascend documentation: its allocation cells are empty): a release only, at its
Release Time, else at the one time the row gives; empty release cells, a block still held when the collection
ended: an allocation only. Both events are named after the row's operator (``Name``). Operators are not made
events: the file says when each block was allocated and released, never when its operator ran, so an operator
event would be a timing invented per allocation (a block each, not a call each) and the operators table would
count blocks as calls. The operators table stays empty and the regions' memory has no call sites; what the file
does say per operator (blocks, bytes allocated, blocks released) is in `run_info.extra["operator_memory"]` (the 50
that allocated most). Convert the run's ``trace_view.json`` for its operators.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..assemble import assemble
from ..errors import TraceFormatError
from ..events import NONE, EventColumns, EventKind, Translated
from ..schema import Source
from ..trace import RunInfo, Trace
from .chrome_generic import epoch_iso
from .memory_table import MemoryColumns, empty_rows, header_keys, read_memory_table
from .source import DEFAULT_CAPS, SizeCaps

RECORD_FORMAT = "ascend-memory-record"
OPERATOR_FORMAT = "ascend-operator-memory"
ALLOCATOR_ORDER = ("PTA", "MindSpore", "GE", "PTA+GE", "MindSpore+GE", "APP")
TOP_OPERATORS = 50
_RECORD_NEEDS = ("timestamp", "total allocated")
_OPERATOR_NEEDS = ("name", "size", "allocation time", "allocation total allocated")
_OPERATOR_SIZES = ("size", "allocation total allocated", "allocation total reserved", "release total allocated",
                   "release total reserved")  # fmt: skip


def sniff_record(text: str) -> bool:
    """True when the first line is a memory_record.csv header."""
    head = header_keys(text)
    return all(c in head for c in ("component", *_RECORD_NEEDS))


def sniff_operator(text: str) -> bool:
    """True when the first line is an operator_memory.csv header."""
    head = header_keys(text)
    return all(c in head for c in _OPERATOR_NEEDS)


def allocator_component(components: list[str | None]) -> str | None:
    """The component whose totals the lanes hold: the first of `ALLOCATOR_ORDER` present, else the first given."""
    return next((c for c in ALLOCATOR_ORDER if c in components), components[0] if components else None)


def _events(path: Path, fmt: str, col: dict[str, np.ndarray], names: tuple[list[str | None], np.ndarray],
            missing: list[str], extra: dict[str, Any]) -> Translated:  # fmt: skip
    """MEMORY events of columns "start" (absolute ns), "bytes", "total_allocated", "total_reserved", "device" (NONE:
    not given) and their names, with the run they make; one error when none holds a total allocated."""
    if not (col["total_allocated"] != NONE).any():
        raise TraceFormatError(path, f"none of its {extra['rows']} rows has a time and a total allocated: nothing to convert")
    t0 = int(col["start"].min())
    devices = sorted(d for d in np.unique(col["device"]).tolist() if d >= 0)
    device_names = {d: f"npu:{d}" for d in devices}
    n = len(col["start"])
    device_values, device_codes = np.unique(col["device"], return_inverse=True)
    out = EventColumns()
    out.extend(EventKind.MEMORY, n, start_ns=col["start"] - t0, bytes=col["bytes"], device=col["device"],
               total_allocated=col["total_allocated"], total_reserved=col["total_reserved"], texts={"name": names},
               lanes={"pid": ([device_names.get(d, "cpu") for d in device_values.tolist()], device_codes.reshape(-1)),
                      "tid": ([fmt], np.zeros(n, dtype=np.int64))})  # fmt: skip
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=fmt, start_time=epoch_iso(t0),
                   devices=["cpu", *device_names.values()], missing_signals=missing, extra=extra)  # fmt: skip
    return Translated(out, info, root_name=path.name, root_device=device_names[devices[0]] if devices else "cpu",
                      device_names=device_names)  # fmt: skip


_NOT_IN_TABLES = ("operators, kernels, syncs, transfers and steps (a memory table holds allocator totals only; "
                  "convert the run's trace_view.json for its timeline)")  # fmt: skip


def _given(cols: MemoryColumns, name: str) -> np.ndarray:
    """A time or total as collected (NONE: empty, absent or negative: "not collected")."""
    v = cols.numbers.get(name)
    return np.full(cols.rows, NONE, dtype=np.int64) if v is None else np.where(v >= 0, v, NONE)


def translate_record(path: Path, caps: SizeCaps = DEFAULT_CAPS) -> Translated:
    """The events of a memory_record.csv: the allocator component's totals per device (module docstring)."""
    cols = read_memory_table(path, caps, needs=_RECORD_NEEDS, sizes=("total allocated", "total reserved"),
                             times=("timestamp",), texts=("component",))  # fmt: skip
    t, allocated, reserved = (_given(cols, c) for c in ("timestamp", "total allocated", "total reserved"))
    values, component = cols.texts.get("component", ([None], np.zeros(cols.rows, dtype=np.int64)))
    timed = t != NONE
    present = np.unique(component[timed]).tolist()  # codes in order of first appearance in the file
    chosen = allocator_component([values[c] for c in present])
    kept = []
    for c in present:
        for d in np.unique(cols.device[timed & (component == c)]).tolist():
            on = timed & (component == c) & (cols.device == d)
            kept.append({"component": values[c], "device": d, "records": int(on.sum()), "on_lane": values[c] == chosen,
                         "peak_allocated_bytes": _peak(allocated[on]), "peak_reserved_bytes": _peak(reserved[on])})  # fmt: skip
    lane = np.flatnonzero(timed & (component == values.index(chosen))) if present else np.zeros(0, dtype=np.int64)
    lane = lane[np.lexsort((t[lane], cols.device[lane]))]  # by device, then time (stable: file order in ties)
    nbytes = np.full(len(lane), NONE, dtype=np.int64)
    has = np.flatnonzero(allocated[lane] != NONE)  # the change from the lane's previous total, on the same device
    same = cols.device[lane[has[1:]]] == cols.device[lane[has[:-1]]]
    nbytes[has[1:][same]] = allocated[lane[has[1:]]][same] - allocated[lane[has[:-1]]][same]
    missing = [_NOT_IN_TABLES, "memory per operator and call site (memory_record.csv names no operator; "
                               "operator_memory.csv does)"]  # fmt: skip
    others = [values[c] for c in present if values[c] != chosen]
    if others:
        missing.append(f"memory of {', '.join(repr(c) for c in others)} on the lanes (they hold {chosen!r}, the framework's "
                       "allocator; the others' peaks are in run_info extra 'memory_components')")  # fmt: skip
    if (~timed).any():
        missing.append(f"{int((~timed).sum())} records without a time (not collected)")
    missing += [empty_rows(cols.empty_rows)] if cols.empty_rows else []
    extra = {"memory_components": kept, "allocator_component": chosen, "rows": cols.rows, "columns": cols.header,
             "empty_rows": cols.empty_rows}  # fmt: skip
    col = {"start": t[lane], "bytes": nbytes, "total_allocated": allocated[lane], "total_reserved": reserved[lane],
           "device": cols.device[lane]}  # fmt: skip
    names = [v if v is not None else "[memory]" for v in values]
    return _events(path, RECORD_FORMAT, col, (names, component[lane]), missing, extra)


def _peak(v: np.ndarray) -> int | None:
    v = v[v != NONE]
    return int(v.max()) if len(v) else None


def translate_operator(path: Path, caps: SizeCaps = DEFAULT_CAPS) -> Translated:
    """The events of an operator_memory.csv: an allocation and a release per block (module docstring)."""
    cols = read_memory_table(path, caps, needs=_OPERATOR_NEEDS, sizes=_OPERATOR_SIZES, texts=("name",), required=("size",),
                             times=("allocation time", "release time", "duration"))  # fmt: skip
    size = cols.numbers["size"]
    at, released, held = (_given(cols, c) for c in ("allocation time", "release time", "duration"))
    before = size < 0  # allocated before the collection: a release alone, at its Release Time or the row's one time
    released = np.where(before & (released == NONE), at, released)
    at = np.where(before, NONE, at)
    derived = (released == NONE) & (at != NONE) & (held != NONE)
    released = np.where(derived, at + np.where(derived, held, 0), released)
    alloc, free = np.flatnonzero(at != NONE), np.flatnonzero(released != NONE)
    order = np.argsort(np.r_[alloc * 2, free * 2 + 1], kind="stable")  # per row its allocation, then its release
    totals = [_given(cols, c) for c in _OPERATOR_SIZES[1:]]
    col = {"start": np.r_[at[alloc], released[free]], "bytes": np.r_[size[alloc], -np.abs(size[free])],
           "total_allocated": np.r_[totals[0][alloc], totals[2][free]],
           "total_reserved": np.r_[totals[1][alloc], totals[3][free]], "device": np.r_[cols.device[alloc], cols.device[free]]}  # fmt: skip
    values, name = cols.texts["name"]
    blocks = np.bincount(name[alloc], minlength=len(values))
    allocated = np.zeros(len(values), dtype=np.int64)
    np.add.at(allocated, name[alloc], size[alloc])
    releases = np.bincount(name[free], minlength=len(values))
    top = sorted(range(len(values)), key=lambda k: (-allocated[k], str(values[k])))
    per_op = [{"name": values[k], "blocks": int(blocks[k]), "allocated_bytes": int(allocated[k]), "releases": int(releases[k])}
              for k in top if blocks[k] or releases[k]][:TOP_OPERATORS]  # fmt: skip
    missing = [_NOT_IN_TABLES, "operator timings and call sites (operator_memory.csv says when each block was "
                               "allocated and released, not when its operator ran: the operators table stays empty; "
                               "bytes per operator are in run_info extra 'operator_memory')"]  # fmt: skip
    for side, n in (("allocation", cols.rows - len(alloc)), ("release", cols.rows - len(free))):
        if n:
            missing.append(f"{side}s outside the collection: {n} ({side} cells empty or negative)")
    missing += [empty_rows(cols.empty_rows)] if cols.empty_rows else []
    extra = {"operator_memory": per_op, "operators": int(np.count_nonzero(blocks + releases)), "rows": cols.rows,
             "columns": cols.header, "empty_rows": cols.empty_rows}  # fmt: skip
    return _events(path, OPERATOR_FORMAT, {k: v[order] for k, v in col.items()}, (values, np.r_[name[alloc], name[free]][order]),
                   missing, extra)


def read_memory_record(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert a torch_npu or msprof memory_record.csv into memory lanes and region peaks (sliced: as `assemble`)."""
    return assemble(translate_record(Path(path), caps), sliced=sliced)


def read_operator_memory(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert a torch_npu or msprof operator_memory.csv into memory lanes and region peaks (sliced: as `assemble`)."""
    return assemble(translate_operator(Path(path), caps), sliced=sliced)

__all__ = ["ALLOCATOR_ORDER", "OPERATOR_FORMAT", "RECORD_FORMAT", "allocator_component", "read_memory_record",
           "read_operator_memory", "sniff_operator", "sniff_record", "translate_operator", "translate_record"]

"""NPU lanes of a PyTorch-profiler (Kineto) export from a backend with a Kineto plugin (torch-rbln's layout).

The contract of torch-rbln's Kineto emitter (enabled by ``RBLN_PROFILER=1``):

* device rows are processes whose pid is the device's, with ``process_sort_index`` 5000000 + pid
  (a process named ``NPU <id>`` is recognised too); their lanes are threads named by ``thread_name``
  metadata (``NPU <id> <thread name>``); a process Kineto labels ``GPU <id>`` (``process_labels``) is a
  CUDA/ROCm device row, not an NPU one, though newer Kineto gives it the same sort index;
* device activity categories: ``kernel`` (compute: stream lane), ``gpu_memcpy`` (DMA: a transfer,
  direction from its name), ``privateuse1_driver`` (a synchronisation: a ``sync`` signal) and
  ``privateuse1_runtime`` (runtime work: dispatch);
* every device slice of one launch and the host marker slice ``rbln_run`` carry the arg
  ``launch_id``: it is the correlation that ties device work to the host operator open around the
  marker; ``ac2g`` flows (marker -> device slice) link slices that lack the arg;
* graph-mode launches sit inside the host slice ``Torch-Compiled Region``, which becomes the launching
  operator.

The Kineto reader calls this module through three hooks: :func:`npu_layout` (is this such a trace),
:func:`link` (give markers and device slices the launch id as correlation, and move markers that sit
on an NPU lane onto the main operator thread) and :meth:`NpuLayout.lane` (engine lane of a device
slice), then :func:`finish` names the devices ``npu:<id>``, counts the driver syncs and says which
figures the source lacked.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from ..builder import TableBuilder
from ..catalog import Cause, cause_hint, copy_direction
from ..schema import Direction, EngineKind, SignalKind, SliceKind
from ..trace import Trace
from ._kineto_events import KinetoEvents
from .chrome_json import ChromeDocument

LAUNCH_MARKERS = {"rbln_run"}
SORT_INDEX_BASE = 5_000_000
_PROCESS = re.compile(r"^NPU\s*(\d+)$")
_NUMBER = re.compile(r"(\d+)\s*$")
_GPU_LABEL = re.compile(r"^GPU\s*\d+$")  # Kineto's label of a CUDA/ROCm device row (whose sort index is 5000000 + id too)
_DEVICE_SORT_INDEX = re.compile(rb'"sort_index"\s*:\s*5\d{6}\b')
# device activity category -> (engine kind, slice kind, default lane name)
_CATEGORIES = {
    "kernel": (EngineKind.STREAM, SliceKind.COMPUTE, "compute"),
    "gpu_memcpy": (None, SliceKind.TRANSFER, "copy"),
    "privateuse1_driver": (EngineKind.OTHER, SliceKind.SYNC, "driver"),
    "privateuse1_runtime": (EngineKind.DISPATCH, SliceKind.DISPATCH, "runtime"),
}
_DMA = {Direction.H2D: EngineKind.DMA_H2D, Direction.D2H: EngineKind.DMA_D2H, Direction.D2D: EngineKind.DMA_D2D}
MISSING_COPY_BYTES = "copy bytes (the NPU copy lane carries no byte counts)"


@dataclasses.dataclass(frozen=True)
class DeviceLane:
    """Where a device slice goes: engine lane, its kind, the slice kind, the device name and a copy's direction."""

    engine: str
    engine_kind: EngineKind
    slice_kind: SliceKind
    device: str
    direction: Direction | None


@dataclasses.dataclass
class NpuLayout:
    """The NPU processes and lanes of one trace, and its launch links."""

    processes: dict[Any, int]  # pid -> NPU id
    lanes: dict[tuple[Any, Any], str]  # (pid, tid) -> lane name
    marker_ids: dict[tuple[Any, Any, float], int] = dataclasses.field(default_factory=dict)  # (pid, tid, ts) -> launch id
    flow_ends: dict[tuple[Any, Any], list[tuple[float, int]]] = dataclasses.field(default_factory=dict)  # sorted (ts, launch id)
    # (pid, tid, ts) of a device-row slice -> (category, launch id or None)
    slices: dict[tuple[Any, Any, float], tuple[str, int | None]] = dataclasses.field(default_factory=dict)
    linked: int = 0
    by_launch_id: int = 0

    def device_name(self, dev: Any) -> str:
        """``npu:<id>`` of a pid (or of a device id an event's args name)."""
        return f"npu:{self.processes.get(dev, dev)}"

    def lane(self, cat: str, name: str, dev: Any, stream: Any) -> DeviceLane | None:
        """The lane of a device slice on an NPU process; None leaves it to the Kineto reader."""
        pid = dev if dev in self.processes else next((p for p, i in self.processes.items() if i == dev), None)
        if pid is None:
            return None
        engine_kind, slice_kind, default = _CATEGORIES.get(cat, (EngineKind.OTHER, SliceKind.COMPUTE, "other"))
        label = self.lanes.get((pid, stream)) or default
        direction = copy_direction(name) if cat == "gpu_memcpy" else None
        if cat == "gpu_memcpy":
            direction = direction or Direction.D2D
            engine_kind, slice_kind = _DMA[direction], SliceKind.TRANSFER
        npu = self.processes[pid]
        return DeviceLane(f"NPU {npu} {label}", engine_kind or EngineKind.OTHER, slice_kind, f"npu:{npu}", direction)


def npu_layout(doc: ChromeDocument) -> NpuLayout | None:
    """The NPU layout of a Kineto document, or None when no process is a device row (checked on the bytes first)."""
    return npu_layout_of(doc.batches()) if may_hold_device_rows(doc.raw) else None


def may_hold_device_rows(text: bytes) -> bool:
    """Whether JSON text holds a word of an NPU device row (False: no event in it makes one)."""
    # Every PyTorch trace has process_sort_index rows; a device row's index is 5000000 + pid.
    if b'"launch_id"' in text or b'"NPU' in text:
        return True
    at = text.find(b'"sort_index"')
    while at >= 0:  # a plain search for the key, the pattern only where it is (a whole-text regex scan is 10x slower)
        if _DEVICE_SORT_INDEX.match(text, at):
            return True
        at = text.find(b'"sort_index"', at + 12)
    return False


def npu_layout_of(batches: Iterable[list[Any]]) -> NpuLayout | None:
    """The NPU layout of batches of raw events (dicts), or None when no process is a device row."""
    names: dict[Any, str] = {}
    sort_index: dict[Any, int] = {}
    gpus: set[Any] = set()
    threads: dict[tuple[Any, Any], str] = {}
    markers: dict[tuple[Any, Any, float], int] = {}
    slices: dict[tuple[Any, Any, float], tuple[str, int | None]] = {}
    starts: dict[Any, tuple[Any, Any, float]] = {}
    ends: list[tuple[Any, Any, float, Any]] = []
    for batch in batches:
        for ev in batch:
            if type(ev) is not dict:
                continue
            ph, args = ev.get("ph"), ev.get("args")
            key = (ev.get("pid"), ev.get("tid"))
            if not (_hashable(key[0]) and _hashable(key[1])):
                continue
            ts = ev.get("ts", 0)
            ts = float(ts) if type(ts) in (int, float) else None
            if ph == "M" and isinstance(args, dict):
                if ev.get("name") == "process_name" and isinstance(args.get("name"), str):
                    names[key[0]] = args["name"]
                elif ev.get("name") == "thread_name" and isinstance(args.get("name"), str):
                    threads[key] = args["name"]
                elif ev.get("name") == "process_sort_index" and type(args.get("sort_index")) is int:
                    sort_index[key[0]] = args["sort_index"]
                elif (ev.get("name") == "process_labels" and isinstance(args.get("labels"), str)
                      and _GPU_LABEL.match(args["labels"].strip())):
                    gpus.add(key[0])
            elif ph == "X" and ts is not None:
                launch = args.get("launch_id") if isinstance(args, dict) else None
                launch = launch if type(launch) is int and 0 <= launch < 2**63 else None
                if ev.get("name") in LAUNCH_MARKERS:
                    if launch is not None:
                        markers[(*key, ts)] = launch
                elif ev.get("cat") in _CATEGORIES:
                    slices[(*key, ts)] = (ev["cat"], launch)
            elif (ph in ("s", "f") and ev.get("cat") == "ac2g" and ev.get("id") is not None and _hashable(ev["id"])
                  and ts is not None):  # a flow without an id links nothing
                if ph == "s":
                    starts[ev["id"]] = (*key, ts)
                else:
                    ends.append((*key, ts, ev["id"]))
    processes = {}
    for pid in {*names, *sort_index}:
        m = _PROCESS.match(names.get(pid, "").strip())
        if m:
            processes[pid] = int(m.group(1))
        elif type(pid) is int and sort_index.get(pid) == SORT_INDEX_BASE + pid and pid not in gpus:
            number = _NUMBER.search(names.get(pid, ""))
            processes[pid] = int(number.group(1)) if number else pid
    if not processes:
        return None
    lanes = {k: v.strip() for k, v in threads.items() if k[0] in processes}
    layout = NpuLayout(processes, lanes, markers, slices={k: v for k, v in slices.items() if k[0] in processes})
    for pid, tid, ts, flow in ends:
        launch = markers.get(starts[flow], flow) if flow in starts else flow
        layout.flow_ends.setdefault((pid, tid), []).append((ts, launch))
    for items in layout.flow_ends.values():
        items.sort(key=lambda x: x[0])
    return layout


def _hashable(value: Any) -> bool:
    return value is None or type(value) in (int, str, float, bool)


def link(ev: KinetoEvents, layout: NpuLayout) -> None:
    """Give launch markers and device slices the launch id as correlation (in place): the slice's own
    ``launch_id``, else the launch its ``ac2g`` flow comes from."""
    op_threads: dict[tuple[Any, Any], int] = {}
    for o in ev.ops:
        op_threads[(o[3], o[4])] = op_threads.get((o[3], o[4]), 0) + 1
    main = max(op_threads, key=op_threads.__getitem__) if op_threads else None
    runtime = []
    for r in ev.runtime:
        ts, dur, name, pid, tid, corr, ext, size = r
        launch = layout.marker_ids.get((pid, tid, float(ts)))
        if name in LAUNCH_MARKERS:
            if launch is not None:
                corr = launch
            if (pid, tid) not in op_threads and main is not None:
                pid, tid = main  # a marker on an NPU lane: let the operator open on the main thread claim it
            runtime.append((ts, dur, name, pid, tid, corr, ext, size))
        elif pid in layout.processes:  # runtime and driver work on a device row: drawn on its lane
            cat = layout.slices.get((pid, tid, float(ts)), ("privateuse1_runtime", None))[0]
            ev.device.append((ts, dur, cat, name, pid, tid, corr, size))
        else:
            runtime.append(r)
    ev.runtime[:] = runtime
    for i, d in enumerate(ev.device):
        ts, dur, cat, name, dev, stream, corr, nbytes = d
        if dev not in layout.processes:
            continue
        launch = layout.slices.get((dev, stream, float(ts)), ("", None))[1]
        if launch is not None:
            ev.device[i] = (ts, dur, cat, name, dev, stream, launch, nbytes)
            layout.by_launch_id += 1
            continue
        if corr is not None:
            continue
        flows = layout.flow_ends.get((dev, stream), [])
        j = bisect.bisect_left(flows, (float(ts), -(2**62)))
        if j < len(flows) and flows[j][0] <= ts + dur:
            ev.device[i] = (ts, dur, cat, name, dev, stream, flows[j][1], nbytes)
            layout.linked += 1
    ev.device.sort(key=lambda d: d[0])


def finish(trace: Trace, layout: NpuLayout, ev: KinetoEvents) -> Trace:
    """Name the NPU devices, count driver slices as syncs, and say which figures the source lacked."""
    info = trace.run_info
    info.devices = ["cpu", *(f"npu:{i}" for i in sorted(set(layout.processes.values())))]
    missing = [m.replace("GPU work", "NPU work") for m in info.missing_signals if not m.startswith("transfer bytes")]
    copies = [d for d in ev.device if d[2] == "gpu_memcpy" and d[4] in layout.processes]
    if any(d[7] is None for d in copies):
        missing.append(MISSING_COPY_BYTES)
    info.missing_signals = missing
    syncs = _driver_syncs(trace)
    if syncs is not None:
        signals = pa.concat_tables([trace.tables["signals"], syncs.cast(trace.tables["signals"].schema)])
        trace.tables["signals"] = signals.unify_dictionaries().combine_chunks()
    markers = sum(1 for r in ev.runtime if r[2] in LAUNCH_MARKERS)
    info.extra["npu"] = {"processes": {str(k): f"NPU {v}" for k, v in layout.processes.items()},
                         "lanes": sorted(set(layout.lanes.values())), "launch_markers": markers,
                         "device_slices_linked_by_launch_id": layout.by_launch_id,
                         "device_slices_linked_by_flow": layout.linked}  # fmt: skip
    return trace


def _driver_syncs(trace: Trace) -> pa.Table | None:
    """One sync signal per driver (synchronisation) slice on a device row, charged to its launching operator."""
    slices = trace.tables["engine_slices"]
    rows = [r for r in slices.select(["region_id", "engine", "kind", "name", "start", "op_id"]).to_pylist()
            if r["kind"] == SliceKind.SYNC.value and r["engine"].startswith("NPU ")]  # fmt: skip
    if not rows:
        return None
    names = trace.tables["ops"].column("name").to_pylist()
    b = TableBuilder("signals")
    for r in rows:
        b.append(region_id=r["region_id"] if r["region_id"] is not None else 0, op_id=r["op_id"], kind=SignalKind.SYNC,
                 reason=Cause.SYNC_CALL.value, op_name=names[r["op_id"]] if r["op_id"] is not None else r["name"],
                 count=1, bytes=0, note=f"{r['name']}: " + cause_hint(Cause.SYNC_CALL), time_ns=r["start"])  # fmt: skip
    return b.build()


__all__ = ["DeviceLane", "NpuLayout", "finish", "link", "may_hold_device_rows", "npu_layout", "npu_layout_of"]

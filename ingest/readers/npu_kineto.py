"""NPU lanes of a PyTorch-profiler (Kineto) export from a backend with a Kineto plugin (RBLN's layout).

Device activity sits on its own process rows, named ``NPU <id>``, one thread per lane:

=============  =====================  ======================================
lane (thread)  event category         engine lane / kind
=============  =====================  ======================================
``compute``    ``kernel``             ``NPU <id> compute`` / stream
``copy``       ``gpu_memcpy``         ``NPU <id> copy`` / dma by direction
``host``       ``privateuse1_runtime`` ``NPU <id> host`` / dispatch
``collective`` ``privateuse1_driver``  ``NPU <id> collective`` / collective
=============  =====================  ======================================

Host launch markers are zero-length ``privateuse1_runtime`` slices named ``rbln_run``
or ``rbln launch`` with ``args.launch_id``; ``ac2g`` flows (``ph`` ``s`` at the marker,
``f`` inside the device slice) link them to device activity. The Kineto reader
calls this module through three hooks: :func:`npu_layout` (is this such a trace),
:func:`link` (give markers and device slices a shared correlation: the launch id,
and move markers that sit on the NPU host lane onto the main operator thread, so
the enclosing ``cpu_op`` or ``Torch-Compiled Region`` becomes the launching
operator) and :meth:`NpuLayout.lane` (engine lane of a device slice), then
:func:`finish` names the devices ``npu:<id>`` and says which figures the source lacked.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import Any

from ..schema import Direction, EngineKind, SliceKind
from ..trace import Trace
from .chrome_json import ChromeDocument
from .kineto import KinetoEvents

LAUNCH_MARKERS = {"rbln_run", "rbln launch"}
_PROCESS = re.compile(r"^NPU\s*(\d+)$")
_LANES = {
    "compute": (EngineKind.STREAM, SliceKind.COMPUTE, "kernel"),
    "copy": (None, SliceKind.TRANSFER, "gpu_memcpy"),
    "host": (EngineKind.DISPATCH, SliceKind.DISPATCH, "privateuse1_runtime"),
    "collective": (EngineKind.COLLECTIVE, SliceKind.COMPUTE, "privateuse1_driver"),
}
_DMA = {Direction.H2D: EngineKind.DMA_H2D, Direction.D2H: EngineKind.DMA_D2H, Direction.D2D: EngineKind.DMA_D2D}
_WORDS = ((("htod", "h2d", "h2v", "host_to_device"), Direction.H2D), (("dtoh", "d2h", "v2h", "device_to_host"), Direction.D2H),
          (("dtod", "d2d", "v2v", "ptop"), Direction.D2D))  # fmt: skip
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
    linked: int = 0

    def device_name(self, dev: Any) -> str:
        """``npu:<id>`` of a pid (or of a device id an event's args name)."""
        return f"npu:{self.processes.get(dev, dev)}"

    def lane(self, cat: str, name: str, dev: Any, stream: Any) -> DeviceLane | None:
        """The lane of a device slice on an NPU process; None leaves it to the Kineto reader."""
        pid = dev if dev in self.processes else next((p for p, i in self.processes.items() if i == dev), None)
        if pid is None:
            return None
        label = self.lanes.get((pid, stream)) or next((k for k, v in _LANES.items() if v[2] == cat), "compute")
        engine_kind, slice_kind, _ = _LANES.get(label, (EngineKind.OTHER, SliceKind.COMPUTE, ""))
        direction = copy_direction(name) if cat == "gpu_memcpy" else None
        if cat == "gpu_memcpy":
            direction = direction or Direction.D2D
            engine_kind, slice_kind = _DMA[direction], SliceKind.TRANSFER
        npu = self.processes[pid]
        return DeviceLane(f"NPU {npu} {label}", engine_kind or EngineKind.OTHER, slice_kind, f"npu:{npu}", direction)


def copy_direction(name: str) -> Direction | None:
    """Direction of a copy from its name (``Memcpy HtoD``, ``rbln_copy_h2d``, ``v2h``...)."""
    low = name.lower()
    for words, direction in _WORDS:
        if any(w in low for w in words):
            return direction
    return None


def npu_layout(doc: ChromeDocument) -> NpuLayout | None:
    """The NPU layout of a Kineto document, or None when it has no ``NPU <id>`` process (checked on the bytes first)."""
    if b'"NPU' not in doc.raw:
        return None
    names: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    markers: dict[tuple[Any, Any, float], int] = {}
    starts: dict[Any, tuple[Any, Any, float]] = {}
    ends: list[tuple[Any, Any, float, Any]] = []
    for batch in doc.batches():
        for ev in batch:
            if type(ev) is not dict:
                continue
            ph, args = ev.get("ph"), ev.get("args")
            key = (ev.get("pid"), ev.get("tid"))
            if ph == "M" and isinstance(args, dict) and isinstance(args.get("name"), str):
                if ev.get("name") == "process_name":
                    names[ev.get("pid")] = args["name"]
                elif ev.get("name") == "thread_name":
                    threads[key] = args["name"]
            elif ph == "X" and ev.get("name") in LAUNCH_MARKERS and isinstance(args, dict):
                if isinstance(args.get("launch_id"), int):
                    markers[(*key, float(ev.get("ts", 0)))] = args["launch_id"]
            elif ph in ("s", "f") and ev.get("cat") == "ac2g" and "id" in ev:
                if ph == "s":
                    starts[ev["id"]] = (*key, float(ev.get("ts", 0)))
                else:
                    ends.append((*key, float(ev.get("ts", 0)), ev["id"]))
    processes = {pid: int(m.group(1)) for pid, label in names.items() if (m := _PROCESS.match(label.strip()))}
    if not processes:
        return None
    lanes = {k: v.strip().lower() for k, v in threads.items() if k[0] in processes}
    layout = NpuLayout(processes, lanes, markers)
    for pid, tid, ts, flow in ends:
        launch = markers.get(starts[flow], flow) if flow in starts else flow
        layout.flow_ends.setdefault((pid, tid), []).append((ts, launch))
    for items in layout.flow_ends.values():
        items.sort(key=lambda x: x[0])
    return layout


def link(ev: KinetoEvents, layout: NpuLayout) -> None:
    """Give launch markers and the device slices their flows reach the launch id as correlation (in place)."""
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
                pid, tid = main  # a marker on the NPU host lane: let the operator open on the main thread claim it
            runtime.append((ts, dur, name, pid, tid, corr, ext, size))
        elif pid in layout.processes:  # NPU host / collective lane work: drawn on its lane
            cat = _LANES.get(layout.lanes.get((pid, tid), "host"), _LANES["host"])[2]
            ev.device.append((ts, dur, cat, name, pid, tid, corr, size))
        else:
            runtime.append(r)
    ev.runtime[:] = runtime
    for i, d in enumerate(ev.device):
        ts, dur, cat, name, dev, stream, corr, nbytes = d
        if corr is not None or dev not in layout.processes:
            continue
        flows = layout.flow_ends.get((dev, stream), [])
        j = bisect.bisect_left(flows, (float(ts), -(2**62)))
        if j < len(flows) and flows[j][0] <= ts + dur:
            ev.device[i] = (ts, dur, cat, name, dev, stream, flows[j][1], nbytes)
            layout.linked += 1
    ev.device.sort(key=lambda d: d[0])


def finish(trace: Trace, layout: NpuLayout, ev: KinetoEvents) -> Trace:
    """Name the NPU devices in the run info and say which figures the source lacked."""
    info = trace.run_info
    info.devices = ["cpu", *(f"npu:{i}" for i in sorted(layout.processes.values()))]
    missing = [m.replace("GPU work", "NPU work") for m in info.missing_signals if not m.startswith("transfer bytes")]
    copies = [d for d in ev.device if d[2] == "gpu_memcpy" and d[4] in layout.processes]
    if any(d[7] is None for d in copies):
        missing.append(MISSING_COPY_BYTES)
    info.missing_signals = missing
    markers = sum(1 for r in ev.runtime if r[2] in LAUNCH_MARKERS)
    info.extra["npu"] = {"processes": {str(k): f"NPU {v}" for k, v in layout.processes.items()},
                         "lanes": sorted(set(layout.lanes.values())), "launch_markers": markers,
                         "device_slices_linked_by_flow": layout.linked}  # fmt: skip
    return trace


__all__ = ["DeviceLane", "NpuLayout", "copy_direction", "finish", "link", "npu_layout"]

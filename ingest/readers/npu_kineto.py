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

The Kineto reader calls this module through its hooks: the collector keeps the metadata, launch ids and flows
(``_npu_flows``) and :func:`npu_layout_of` says whether the trace has NPU rows; :func:`_npu_link.link_launches` gives markers and
device slices the launch id as correlation, moves runtime work on NPU rows to the device slices and markers that
sit on an NPU lane onto the main operator thread (joined on disk, bounded memory);
:meth:`NpuLayout.lane` is the engine lane of a device slice, then :func:`finish` names the devices ``npu:<id>`` and
says which figures the source lacked.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..kineto_vocabulary import copy_direction
from ..schema import Direction, EngineKind, SliceKind
from ..trace import Trace
from ._npu_flows import NpuCollect

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
    """The NPU processes and lanes of one trace, what the collector kept for its launch links, and their counts."""

    processes: dict[Any, int]  # pid -> NPU id
    lanes: dict[tuple[Any, Any], str]  # (pid, tid) -> lane name
    collected: NpuCollect = dataclasses.field(default_factory=NpuCollect)  # launch ids and ac2g flows
    linked: int = 0  # device slices linked by a flow
    by_launch_id: int = 0  # device slices linked by their own launch id
    markers: int = 0  # launch markers among the runtime calls
    copies_without_bytes: int = 0  # copies on an NPU row with no byte count of their own

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


def npu_layout_of(collected: NpuCollect) -> NpuLayout | None:
    """The NPU layout of a trace from the metadata its collector kept, or None when no process is a device row."""
    names, sort_index = collected.names, collected.sort_index
    gpus = {pid for pid, labels in collected.gpu_labels.items() if _GPU_LABEL.match(labels.strip())}
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
    lanes = {k: v.strip() for k, v in collected.threads.items() if k[0] in processes}
    return NpuLayout(processes, lanes, collected)


def finish(trace: Trace, layout: NpuLayout) -> Trace:
    """Name the NPU devices and say which figures the source lacked (driver slices are device waits: the rule
    layer's syncs)."""
    info = trace.run_info
    gpus = [d for d in info.devices if d != "cpu"]  # CUDA/ROCm rows beside the NPU rows keep their names
    info.devices = ["cpu", *gpus, *(f"npu:{i}" for i in sorted(set(layout.processes.values())))]
    missing = [m.replace("GPU work", "NPU work") for m in info.missing_signals if not m.startswith("transfer bytes")]
    if layout.copies_without_bytes:
        missing.append(MISSING_COPY_BYTES)
    info.missing_signals = missing
    info.extra["npu"] = {"processes": {str(k): f"NPU {v}" for k, v in layout.processes.items()},
                         "lanes": sorted(set(layout.lanes.values())), "launch_markers": layout.markers,
                         "device_slices_linked_by_launch_id": layout.by_launch_id,
                         "device_slices_linked_by_flow": layout.linked}  # fmt: skip
    layout.collected.close()
    return trace


__all__ = ["DeviceLane", "NpuLayout", "finish", "may_hold_device_rows", "npu_layout_of"]

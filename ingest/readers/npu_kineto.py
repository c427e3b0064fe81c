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
(``_npu_flows``), :func:`npu_layout_of` says whether the trace has NPU rows, and the reader translates what the file
says (nothing here links: the linker does, `ingest/link.py`):

* a launch marker (a runtime call named ``rbln_run``) with a ``launch_id`` of its own has it as its correlation
  (`runtime_calls`); one on a thread where no operator runs (an NPU lane) is placed on the main operator thread
  (most operators), where the operator open around it claims it;
* other runtime and driver calls on an NPU process are device slices of their lane (categories
  ``privateuse1_runtime``: a dispatch span, ``privateuse1_driver``: a device wait), their ``launch_id`` (else their
  correlation) as correlation;
* a device slice on an NPU process has its ``launch_id`` as its correlation where it has one (`device_ids`);
* each ``ac2g`` flow point is a `flow` event (`flow_events`) with Chrome's binding (a start binds to the slice
  enclosing it, an end with ``"bp": "e"`` too, another end to the next slice), its id as correlation (an id that is
  no int64: 2^62 + its hash, as the Chrome readers key it); a start on a thread where no operator runs is placed on
  the main operator thread with the markers. The linker binds them: a device slice without an id of its own takes
  what the flow ending in it carries, the launch id of the marker where it starts (else the flow's id).

:meth:`NpuLayout.lane` is the engine lane of a device slice, then :func:`finish` names the devices ``npu:<id>`` and
says which figures the source lacked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TraceFormatError
from ..events import NONE, EventColumns, EventKind, FlowBinding, FlowPhase, flow_point
from ..kineto_vocabulary import copy_direction
from ..schema import Direction, EngineKind, SliceKind
from ..trace import Trace
from ._npu_flows import INT, START, NpuCollect
from .chrome_stream import file_chunks
from .source import DEFAULT_CAPS, SizeCaps

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
    by_launch_id: int = 0  # device slices with a launch id of their own
    markers: int = 0  # launch markers among the runtime calls
    copies_without_bytes: int = 0  # copies on an NPU row with no byte count of their own
    flow_points: int = 0  # ac2g flow points given to the linker

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


def names_npu_row(name: Any, args: Any) -> bool:
    """Whether a metadata (``ph: M``) event may name an NPU device row: a process, thread or label named ``NPU...``, or
    a device row's sort index (5000000 + pid): what `may_hold_device_rows` finds in the text of such an event."""
    if type(args) is not dict:
        return False
    if name == "process_sort_index":
        index = args.get("sort_index")
        return type(index) is int and SORT_INDEX_BASE <= index < SORT_INDEX_BASE + 1_000_000  # (5\d{6} in text)
    value = args.get("labels") if name == "process_labels" else args.get("name")
    return type(value) is str and value.startswith("NPU")


def npu_lanes_at_start(path: str | Path, caps: SizeCaps = DEFAULT_CAPS) -> bool:
    """Whether the first chunk of a file (gunzipped) holds a word of an NPU device row: a guess made before converting
    (torch-rbln's launch ids recur from the first events on), for the process's memory settings; False when the file
    cannot be read (the conversion words why)."""
    try:
        with contextlib.closing(file_chunks(Path(path), caps)) as chunks:
            return may_hold_device_rows(next(chunks, b""))
    except (TraceFormatError, OSError):
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


Coded = tuple[list, np.ndarray]  # (distinct values, each row's index among them)


@dataclasses.dataclass(frozen=True)
class OperatorThreads:
    """The threads where operators run, and the one where most do (None: no operator)."""

    threads: frozenset
    main: tuple[Any, Any] | None

    @classmethod
    def of(cls, threads: list[tuple[Any, Any]], counts: np.ndarray) -> OperatorThreads:
        """From the operators' distinct threads and how many operators each holds."""
        return cls(frozenset(threads), threads[int(np.argmax(counts))] if len(counts) else None)

    def off(self, pid: Coded, tid: Coded) -> np.ndarray:
        """Per row: whether no operator runs on its thread (pid, tid)."""
        (pids, pid_codes), (tids, tid_codes) = pid, tid
        pairs = pid_codes.astype(np.int64) << 32 | tid_codes.astype(np.int64)
        distinct, inverse = np.unique(pairs, return_inverse=True)
        off = [_not_in((pids[p >> 32], tids[p & 0xFFFFFFFF]), self.threads) for p in distinct.tolist()]
        return np.array(off, dtype=bool)[inverse.reshape(-1)] if len(off) else np.zeros(0, dtype=bool)

    def place(self, pid: Coded, tid: Coded, rows: np.ndarray) -> tuple[Coded, Coded]:
        """(pid, tid) with those of `rows` (flags) where no operator runs placed on the main operator thread (all as
        they are where there is none)."""
        at = np.flatnonzero(rows)
        if self.main is None or not len(at):
            return pid, tid
        (pids, pid_codes), (tids, tid_codes) = pid, tid
        at = at[self.off((pids, pid_codes[at]), (tids, tid_codes[at]))]
        pid_codes, tid_codes = pid_codes.copy(), tid_codes.copy()
        pid_codes[at], tid_codes[at] = len(pids), len(tids)
        return ([*pids, self.main[0]], pid_codes), ([*tids, self.main[1]], tid_codes)


def runtime_calls(calls: dict[str, Any], layout: NpuLayout, operators: OperatorThreads, *, first: int = 0,
                  count: bool = True) -> tuple[dict, dict]:
    """(the runtime calls: a launch marker with a launch id of its own has it as correlation, one where no operator
    runs is on the main operator thread; the calls on an NPU process, markers aside, as device slices: category
    ``privateuse1_driver`` or ``privateuse1_runtime``, lane (pid, tid), the launch id as correlation, else their own),
    both as columns (`calls`: start_ns, dur_ns, correlation, bytes, copy_kind, and name, pid, tid as `Coded`).

    `calls` may be a slice of the trace's runtime calls, its first row `first`; count: add its markers and launch ids
    to the layout's counts (False for a slice read a second time)."""
    collected, n = layout.collected, len(calls["start_ns"])
    (names, name_codes), (pids, pid_codes) = calls["name"], calls["pid"]
    marker = _flags(names, lambda v: type(v) is str and v in LAUNCH_MARKERS)[name_codes]
    launch = collected.runtime_launch.read(first, first + n)
    on_device = _flags(pids, lambda v: _is_key(v, layout.processes))[pid_codes] & ~marker
    moved = np.flatnonzero(on_device)
    device = {"start_ns": calls["start_ns"][moved], "dur_ns": calls["dur_ns"][moved], "bytes": calls["bytes"][moved],
              "cat": (["privateuse1_runtime", "privateuse1_driver"],
                      (collected.runtime_driver.read(first, first + n)[moved] == 1).astype(np.int64)),
              "name": (names, name_codes[moved]), "dev": (pids, pid_codes[moved]),
              "stream": (calls["tid"][0], calls["tid"][1][moved]),
              "correlation": np.where(launch[moved] != NONE, launch[moved], calls["correlation"][moved])}  # fmt: skip
    if count:
        layout.markers += int(marker.sum())
        layout.by_launch_id += int(np.count_nonzero(launch[moved] != NONE))
    correlation = np.where(marker & (launch != NONE), launch, calls["correlation"])
    pid, tid = operators.place(calls["pid"], calls["tid"], marker)
    calls = {**calls, "correlation": correlation, "pid": pid, "tid": tid}
    if len(moved):
        stay = ~on_device
        calls = {k: (v[0], v[1][stay]) if type(v) is tuple else v[stay] for k, v in calls.items()}
    return calls, device


def device_ids(work: dict[str, Any], layout: NpuLayout, *, first: int = 0) -> np.ndarray:
    """The correlations of device slices (columns as `runtime_calls` gives them; a slice of the trace's device rows,
    its first row `first`): on an NPU process, the launch id where a slice has one; counts them, and the copies there
    without a byte count."""
    (devs, dev_codes), (cats, cat_codes) = work["dev"], work["cat"]
    on_npu = _flags(devs, lambda v: _is_key(v, layout.processes))[dev_codes]
    launch = layout.collected.device_launch.read(first, first + len(dev_codes))
    own = on_npu & (launch != NONE)
    layout.by_launch_id += int(own.sum())
    copies = on_npu & _flags(cats, lambda v: v == "gpu_memcpy")[cat_codes]
    layout.copies_without_bytes += int(np.count_nonzero(copies & (work["bytes"] == NONE)))
    return np.where(own, launch, work["correlation"])


def flow_events(out: EventColumns, layout: NpuLayout, t0: float, operators: OperatorThreads, *,
                slice_rows: int = 1 << 20) -> None:
    """The ``ac2g`` flow points as `flow` events, in file order, `slice_rows` at a time: time in ns from t0 (us),
    thread (a start where no operator runs: on the main operator thread), phase and Chrome's binding, the id as
    correlation (one that is no int64: 2^62 + its hash)."""
    collected = layout.collected
    codes = np.array([[flow_point(phase, binding) for binding in (FlowBinding.NEXT, FlowBinding.ENCLOSING)]
                      for phase in (FlowPhase.START, FlowPhase.END)], dtype=np.int64)  # fmt: skip
    layout.flow_points = 0
    step = max(1, slice_rows)
    for lo in range(0, collected.flows, step):
        hi = min(lo + step, collected.flows)
        side, pid, tid, ts, kind, ids, enclosing = (column.read(lo, hi) for column in collected.flow_columns())
        ns = (ts - t0) * 1000.0
        keep = np.flatnonzero(np.isfinite(ns) & (np.abs(ns) < 2**62))  # a time past any run's links nothing
        m = len(keep)
        layout.flow_points += m
        if not m:
            continue
        side, pid, tid, ns, kind, ids, enclosing = (c[keep] for c in (side, pid, tid, ns, kind, ids, enclosing))
        values = collected.values
        pids, tids = operators.place((values, pid.astype(np.int64)), (values, tid.astype(np.int64)), side == START)
        out.extend(EventKind.FLOW, m, start_ns=np.rint(ns).astype(np.int64), flow=codes[side.astype(np.int64),
                   enclosing.astype(np.int64)], correlation=np.where(kind == INT, ids, ids + 2**62 + 2**62),
                   texts={"name": (["ac2g"], np.zeros(m, dtype=np.int64))}, lanes={"pid": pids, "tid": tids})  # fmt: skip


def _flags(values: list, test: Any) -> np.ndarray:
    """Per distinct value, test(value) (one more False: an index of -1)."""
    return np.array([bool(test(v)) for v in values] + [False], dtype=bool)


def _is_key(value: Any, keys: dict) -> bool:
    try:
        return value in keys
    except TypeError:
        return False


def _not_in(thread: tuple, threads: frozenset) -> bool:
    try:
        return thread not in threads
    except TypeError:
        return True


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
                         "ac2g_flow_points": layout.flow_points}  # fmt: skip
    layout.collected.close()
    return trace


__all__ = ["Coded", "DeviceLane", "NpuLayout", "OperatorThreads", "device_ids", "finish", "flow_events", "may_hold_device_rows",
           "names_npu_row", "npu_lanes_at_start", "npu_layout_of", "runtime_calls"]

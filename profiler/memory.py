"""Memory of a measured region (`explain(..., memory=True)`): the tensor storages its operators created and released.

An operator's output allocates when its storage is new: not the storage of any of its inputs (a view, an in-place
or out= operator), not one already live. The storage is released when the last output tensor seen on it dies
(`weakref.finalize`). Storages made outside the operators (parameters, inputs made before the region) are not
counted; tensors kept alive only inside autograd's graph are released when their last Python tensor dies.

Each device's running total starts from the device's own counter where it has one (`torch.cuda` /
`torch.<backend>.memory_allocated()`: weights and inputs included), else from 0: on the CPU the total is the bytes
the region's operators allocated and still hold. The region's peak is the device counter's peak where it has one.
The events become the trace's memory lanes (ingest/FORMAT.md) in `tables.build_trace`.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import torch

_now = time.perf_counter_ns
_Tensor = torch.Tensor


def device_counter(device: torch.device) -> Any:
    """The backend module whose memory_allocated() counts this device's allocator (torch.cuda, torch.npu...), or
    None where the backend has none (the CPU, or a backend without memory stats)."""
    if device.type in ("cpu", "meta"):
        return None
    backend = getattr(torch, device.type, None)
    counter = getattr(backend, "memory_allocated", None)
    if counter is None:
        return None
    try:
        counter(device)
    except Exception:  # noqa: BLE001  (a backend without stats on this build: the clean fallback is no counter)
        return None
    return backend


class MemoryTracker:
    """Allocations and frees of tensor storages by the operators of the regions it watches.

    events: (time ns, region, operator index in that region's raw ops or -1, device, bytes (+ allocated,
    - released), the device's total after it)."""

    def __init__(self, session: Any) -> None:
        self.session = session  # its innermost open region: the one whose raw ops the hook's index points into
        self.events: list[tuple[int, Any, int, str, int, int]] = []
        self.totals: dict[str, int] = {}  # device -> running total
        self.live: dict[tuple[str, int], list[int]] = {}  # (device, storage pointer) -> [bytes, tensors seen on it]
        self.open = True

    def stop(self) -> None:
        self.open = False

    def on_op(self, func: Any, args: tuple, kwargs: dict, out: Any, index: int) -> None:
        """A session hook: the operator's new storages allocated, its outputs' lifetimes watched."""
        outs = [out] if isinstance(out, _Tensor) else [x for x in out if isinstance(x, _Tensor)] if isinstance(out, (list, tuple)) else []
        if not outs:
            return
        inputs = {p for p in (_pointer(a) for a in (*args, *kwargs.values()) if isinstance(a, _Tensor)) if p}
        for t in outs:
            ptr = _pointer(t)
            if not ptr:
                continue
            name = str(t.device)
            key = (name, ptr)
            entry = self.live.get(key)
            if entry is None:
                if ptr in inputs:
                    continue  # a view or an in-place result of a storage made elsewhere
                nbytes = t.untyped_storage().nbytes()
                entry = self.live[key] = [nbytes, 0]
                self._add(index, name, nbytes, t.device)
            entry[1] += 1
            weakref.finalize(t, self._release, key)

    def _add(self, index: int, name: str, nbytes: int, device: torch.device | None) -> None:
        if name not in self.totals:  # a device's total starts from its counter (which holds this first allocation), else 0
            backend = device_counter(device) if device is not None else None
            self.totals[name] = int(backend.memory_allocated(device)) - nbytes if backend is not None else 0
        self.totals[name] += nbytes
        regions = self.session.regions
        self.events.append((_now(), regions[-1] if regions else None, index, name, nbytes, self.totals[name]))

    def _release(self, key: tuple[str, int]) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del self.live[key]
        if self.open:  # a storage released after the region closed is not the region's
            self._add(-1, key[0], -entry[0], None)


def _pointer(t: torch.Tensor) -> int:
    """A tensor's storage address (0: none, e.g. a meta or sparse tensor)."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


def lane(device: str, starts: list[int], totals: list[int], before: int, op_ids: list[int | None],
         region_ids: list[int | None], end_ns: int) -> dict[str, list]:
    """One device's memory lane as engine-slice columns (ingest/FORMAT.md): a slice of no length holding the total
    `before` the first event, then a slice per event until the next (the last until `end_ns`), `bytes` the total
    after it. The leading slice takes the first event's operator and region."""
    from portscope.ingest.schema import MEMORY_ALLOCATED, MEMORY_ENGINE_PREFIX, EngineKind, SliceKind

    n = len(starts) + 1
    ends = [*starts[1:], max(end_ns, starts[-1])]
    return {"region_id": [region_ids[0], *region_ids], "engine": [f"{MEMORY_ENGINE_PREFIX}{device}"] * n,
            "engine_kind": [EngineKind.OTHER.value] * n, "kind": [SliceKind.ANNOTATION.value] * n,
            "name": [MEMORY_ALLOCATED] * n, "start": [starts[0], *starts],
            "dur": [0, *(max(e - t, 0) for t, e in zip(starts, ends, strict=True))], "op_id": [op_ids[0], *op_ids],
            "bytes": [before, *totals]}  # fmt: skip


def lane_columns(tracker: MemoryTracker, op_base: dict[int, int], region_ids: dict[int, int], t_base: int,
                 end_ns: int) -> list[dict[str, list]]:
    """The tracker's events as one memory lane per device (`lane`). op_base: id(region) -> the op_id of its first
    operator; region_ids: id(region) -> its region id."""
    out = []
    for device in sorted({e[3] for e in tracker.events}):
        mine = [e for e in tracker.events if e[3] == device]
        ops = [op_base[id(r)] + index if index >= 0 and id(r) in op_base else None for _, r, index, _, _, _ in mine]
        out.append(lane(device, [e[0] - t_base for e in mine], [e[5] for e in mine], mine[0][5] - mine[0][4], ops,
                        [region_ids.get(id(e[1])) for e in mine], end_ns))  # fmt: skip
    return out


def peak_in(tracker: MemoryTracker, start_ns: int, end_ns: int, device: str | None) -> int | None:
    """The greatest total (of `device`'s lane, or of any device when None or absent) among the events in [start, end]
    (absolute perf_counter ns)."""
    devices = {e[3] for e in tracker.events}
    wanted = device if device in devices else None
    found = [e[5] for e in tracker.events if start_ns <= e[0] <= end_ns and (wanted is None or e[3] == wanted)]
    return max(found) if found else None

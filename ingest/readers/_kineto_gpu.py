"""The tables of a Kineto trace with runtime calls, device work (kernels, copies, memsets) or Python frames, made
slice by slice.

The linker (``_kineto_link.build_trace``) builds every table whole; here the same tables come as
`TableSlices`, each record batch made as `write_trace` writes it, with bounded working state:

* nesting (which operator encloses each operator and each runtime call, which Python frames are open over
  each operator) and call sites: the linker's sweep by time buckets (``_kineto_sweep``).
* device work -> runtime call: correlation ids, as the linker joins them, joined in correlation-range buckets on
  disk (``_kineto_join``).
* the tables, a slice or chunk of rows at a time, with the dictionaries a whole table would hold
  (``_kineto_tables``).

Nothing per event is kept whole in memory: the link columns (per operator its parent, region, name code,
call-site key, launched flag and placement; per runtime call its operator and size; per device slice its runtime
call) are `DiskColumn`s (``_spill``) past HOLD_ROWS values, read back a block at a time in row order or by a
windowed gather, and written by the sweep and the joins through a windowed scatter; the events' own columns
(operators, frames, runtime calls, device work) spill to temporary files past 1M rows and are read back one slice
at a time. What stays grows with distinct values (names, threads, stacks) and with the regions (annotations).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..builder import TableBuilder, TraceBuilder
from ..catalog import NO_WORK_OPS
from ..trace import TableSlices
from . import _kineto_sweep as sweep
from ._kineto_events import KinetoEvents
from ._kineto_join import device_calls
from ._kineto_link import _Regions
from ._kineto_rows import RowColumns
from ._kineto_sweep import RUNTIME_PID, RUNTIME_TID, Link, column, filled
from ._kineto_tables import (
    DEVICE,
    FALLBACK,
    HOST,
    DeviceWork,
    HostLanes,
    Table,
    chain,
    fallback_batches,
    op_batches,
    runtime_batches,
    sync_signals,
    unified,
)
from ._spill import DiskColumn


def gpu_slices(b: TraceBuilder, ev: KinetoEvents, t0: float, regions: _Regions, root_device: str, devices: list, *,
               infer_fallback: bool = False, work: Callable[..., DeviceWork] = DeviceWork) -> dict[str, TableSlices] | None:  # fmt: skip
    """ops, engine_slices (host then device lanes), transfers, signals and runtime_calls of a trace with runtime
    calls, device work or Python frames, as slices equal to the linker's whole tables (stacks interned into b);
    None where this path does not apply (a value kept aside: an unhashable name, an id that is not an int64):
    the caller links the trace whole. infer_fallback: as the linker's (leaf operators of a GPU trace that launched
    no device work placed as fallbacks, a cpu_fallback signal each). work: what makes the device lanes, transfers and
    copy signals (a hook: NPU lanes, ``_npu_lanes``)."""
    runtime, device, ops = ev.runtime, ev.device, ev.ops
    if not all(isinstance(rows, RowColumns) for rows in (runtime, device, ev.python)):
        return None
    if runtime.kept_aside() or device.kept_aside() or ev.python.kept_aside():
        return None
    link = Link(ev, t0, regions, b)
    device_call, call_size = device_calls(runtime, device)  # no value aside: every id is an int64 or None
    launched = link.launched(device_call)
    placement, used = _placements(link, launched, infer_fallback and len(device) > 0)
    launched.close()
    fallbacks = int(used[FALLBACK])
    host = HostLanes(link, placement)
    signals = sync_signals(link) if len(device) else TableBuilder("signals").build()  # syncs: GPU traces only
    lanes = work(link, device_call, call_size, multi_device=len(devices) > 1)
    return {
        "ops": TableSlices(len(ops), lambda: op_batches(link, placement, used > 0, root_device)),
        "engine_slices": unified("engine_slices", host.rows + len(device),
                                  lambda: chain(host.batches(), lanes.batches(Table.LANES))),
        "transfers": unified("transfers", lanes.copies, lambda: lanes.batches(Table.TRANSFERS)),
        "signals": unified("signals", fallbacks + signals.num_rows + lanes.signal_rows,
                            lambda: chain(fallback_batches(link, placement), signals.to_batches(), lanes.batches(Table.SIGNALS))),
        "runtime_calls": unified("runtime_calls", len(runtime), lambda: runtime_batches(link)),
    }  # fmt: skip


def _placements(link: Link, launched: DiskColumn, infer_fallback: bool) -> tuple[DiskColumn, np.ndarray]:
    """(per operator its placement code into _PLACEMENTS, how many operators have each), a slice of operators at a
    time. infer_fallback: the linker's guess (launched nothing, holds no operator, is not an operator that does no
    device work by design, has a typed tensor input, and runs on a thread that launched device work)."""
    ev = link.ev
    ops = ev.ops
    placement, used = column("b"), np.zeros(3, dtype=np.int64)
    if infer_fallback:
        has_child = filled("b", len(ops), 0)
        for _, parents in link.op_parent.blocks(sweep.HOLD_ROWS):
            has_child.put(parents[parents >= 0], 1, sweep.WINDOW_ROWS)
        name_ok = np.array([n not in NO_WORK_OPS for n in ops.names] or [False], dtype=bool)
        sig_ok = np.array([bool(s[2]) and any(s[2].split(";")) for s in ops.signatures], dtype=bool)
        values, gpu_threads = ev.runtime.values, set()
        for lo, part in ev.runtime.chunks(sweep.CHUNK_ROWS):
            inside = link.runtime_op.read(lo, lo + len(part[0])) >= 0
            pairs = np.unique(part[RUNTIME_PID][inside].astype(np.int64) << 32 | part[RUNTIME_TID][inside].astype(np.int64))
            gpu_threads.update((values[p >> 32], values[p & 0xFFFFFFFF]) for p in pairs.tolist())
        thread_ok = np.array([t in gpu_threads for t in ops.threads] or [False], dtype=bool)
    first = 0
    for part in ops.slices():
        n = len(part["ts"])
        done = launched.read(first, first + n) > 0
        codes = np.where(done, DEVICE, HOST).astype(np.int8)
        if infer_fallback:
            guess = ~done & (has_child.read(first, first + n) == 0) & name_ok[part["name"]]
            codes[guess & sig_ok[part["signature"]] & thread_ok[part["thread"]]] = FALLBACK
        placement.extend(codes)
        used += np.bincount(codes, minlength=3)
        first += n
    if infer_fallback:
        has_child.close()
    return placement, used


__all__ = ["gpu_slices"]

"""The tables of a Kineto trace with runtime calls, device work (kernels, copies, memsets) or Python frames, made
slice by slice.

The linker (``_kineto_link.build_trace``) builds every table whole; here the same tables come as
`TableSlices`, each record batch made as `write_trace` writes it, with bounded working state:

* nesting (which operator encloses each operator and each runtime call, which Python frames are open over
  each operator) and call sites: the linker's sweep by time buckets (``_kineto_sweep``).
* device work -> runtime call: correlation ids, as the linker joins them (`CorrelationIndex`).
* the tables, a slice or chunk of rows at a time, with the dictionaries a whole table would hold
  (``_kineto_tables``).

Kept whole in memory, a few bytes an event (~25 MB per GB of a GPU trace): per operator its parent, region,
name code and call-site key (int32 each) and whether it launched device work; per runtime call its operator
(int32); the correlation index (12 bytes a call); per device slice its runtime call (a copy without bytes of
its own: its call's size too). The events' own columns (operators, frames, runtime calls, device work) spill
to temporary files past 1M rows and are read back one slice at a time.
"""

from __future__ import annotations

import numpy as np

from ..builder import TableBuilder, TraceBuilder
from ..catalog import NO_WORK_OPS
from ..trace import TableSlices
from . import _kineto_sweep as sweep
from ._kineto_events import KinetoEvents
from ._kineto_link import _Regions
from ._kineto_rows import CorrelationIndex, RowColumns
from ._kineto_sweep import DEV_CORR, RUNTIME_CORR, RUNTIME_PID, RUNTIME_TID, Link
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


def gpu_slices(b: TraceBuilder, ev: KinetoEvents, t0: float, regions: _Regions, root_device: str, devices: list, *,
               infer_fallback: bool = False) -> dict[str, TableSlices] | None:  # fmt: skip
    """ops, engine_slices (host then device lanes), transfers, signals and runtime_calls of a trace with runtime
    calls, device work or Python frames, as slices equal to the linker's whole tables (stacks interned into b);
    None where this path does not apply (a value kept aside: an unhashable name, an id that is not an int64):
    the caller links the trace whole. infer_fallback: as the linker's (leaf operators of a GPU trace that launched
    no device work placed as fallbacks, a cpu_fallback signal each)."""
    runtime, device, ops = ev.runtime, ev.device, ev.ops
    if not all(isinstance(rows, RowColumns) for rows in (runtime, device, ev.python)):
        return None
    if runtime.kept_aside() or device.kept_aside() or ev.python.kept_aside():
        return None
    link = Link(ev, t0, regions, b)
    index = CorrelationIndex(column_of(runtime, RUNTIME_CORR))  # no value aside: every id is an int64 or None
    device_call = np.concatenate([np.zeros(0, dtype=np.int32),
                                  *(index.find(part[DEV_CORR]) for _, part in device.chunks(sweep.CHUNK_ROWS))])  # fmt: skip
    del index
    launched = link.launched(device_call)
    placement = np.where(launched, DEVICE, HOST).astype(np.int8)  # codes into _PLACEMENTS
    if infer_fallback and len(device):
        placement[_fallback_guess(link, launched)] = FALLBACK
    fallbacks = int(np.count_nonzero(placement == FALLBACK))
    host = HostLanes(link, placement)
    signals = sync_signals(link, launched) if len(device) else TableBuilder("signals").build()  # syncs: GPU traces only
    work = DeviceWork(link, device_call, multi_device=len(devices) > 1)
    return {
        "ops": TableSlices(len(ops), lambda: op_batches(link, placement, root_device)),
        "engine_slices": unified("engine_slices", host.rows + len(device),
                                  lambda: chain(host.batches(), work.batches(Table.LANES))),
        "transfers": unified("transfers", work.copies, lambda: work.batches(Table.TRANSFERS)),
        "signals": unified("signals", fallbacks + signals.num_rows + work.copies,
                            lambda: chain(fallback_batches(link, placement), signals.to_batches(), work.batches(Table.SIGNALS))),
        "runtime_calls": unified("runtime_calls", len(runtime), lambda: runtime_batches(link)),
    }  # fmt: skip


def _fallback_guess(link: Link, launched: np.ndarray) -> np.ndarray:
    """The linker's --infer-fallback guess per operator: launched nothing, holds no operator, is not an operator that
    does no device work by design, has a typed tensor input, and runs on a thread that launched device work."""
    ev = link.ev
    ops = ev.ops
    has_child = np.zeros(len(launched), dtype=bool)
    has_child[link.op_parent[link.op_parent >= 0]] = True
    name_ok = np.array([n not in NO_WORK_OPS for n in ops.names] or [False], dtype=bool)
    sig_ok = np.array([bool(s[2]) and any(s[2].split(";")) for s in ops.signatures], dtype=bool)
    values, gpu_threads = ev.runtime.values, set()
    for lo, part in ev.runtime.chunks(sweep.CHUNK_ROWS):
        inside = link.runtime_op[lo : lo + len(part[0])] >= 0
        pairs = np.unique(part[RUNTIME_PID][inside].astype(np.int64) << 32 | part[RUNTIME_TID][inside].astype(np.int64))
        gpu_threads.update((values[p >> 32], values[p & 0xFFFFFFFF]) for p in pairs.tolist())
    thread_ok = np.array([t in gpu_threads for t in ops.threads] or [False], dtype=bool)
    guess = ~launched & ~has_child & name_ok[link.op_name]
    first = 0
    for part in ops.slices():
        n = len(part["ts"])
        guess[first : first + n] &= sig_ok[part["signature"]] & thread_ok[part["thread"]]
        first += n
    return guess


def column_of(rows: RowColumns, k: int) -> np.ndarray:
    """One field of every row, read chunk by chunk (a spilled column too)."""
    parts = [part[k] for _, part in rows.chunks(sweep.CHUNK_ROWS)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


__all__ = ["gpu_slices"]

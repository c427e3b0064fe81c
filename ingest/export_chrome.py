"""Write a Trace as Chrome trace JSON (Perfetto, chrome://tracing) that the Kineto reader converts back.

Host work is one process (pid `HOST_PID`): a track (tid) per host thread for the operators (and the compiler's
spans and markers open in one of its operators, as PyTorch records them on the compiler's thread), plus "regions",
"transfers <dir>" (transfers no DMA slice already shows), "signals", "runtime" and "compiles" tracks. Device work
is written as Kineto writes it: a process per device, its pid the device's index, a track per engine (stream, DMA
queue...), each slice of cat ``kernel`` or ``gpu_memcpy`` with ``args`` ``device``, ``stream`` (a ``stream N`` lane's
N), ``correlation`` and ``bytes``. Ops, transfers, regions and engine work are complete ("X") slices, signals
instant ("i") events carrying their reason, and each transfer caused by an operator gets a flow ("s" -> "f") from
that operator's slice.

A portscope trace keeps no runtime calls, only what the rules found in them; the calls the Kineto reader needs to
link device work and find syncs are written from what the trace holds (cat ``cuda_runtime``, zero-long, inside their
operator at a time where no operator nested in it is open, else on the "runtime" track):

* ``launch``: one per correlation of device work whose operator the trace knows, and one per copy without an
  operator (at the copy's start), holding that correlation and, for a copy, the cudaMemcpyKind of its DMA lane's
  direction: the device work joins its operator, and each copy keeps its direction. The name and time are not the
  original call's, which the trace does not keep.
* a sync signal's waiting call, named by its reason (``cudaStreamSynchronize``...). A synchronous copy call
  (``cudaMemcpy``) names the launch of its operator's d2h copy, or stands alone as a d2h copy call.

Converting an export so gives the trace's devices, device work and per-region sync, transfer and (inferred the same
way) fallback counts, as far as the format carries them. Not carried: syncs a sync operator's rule named (``item``)
without a d2h copy in the operator (the waiting call's name is not kept); device-side waits; transfers without a
device copy (their ``transfer`` slices are not a category the reader reads); runtime calls that neither launched nor
waited (where they alone made a thread one that launches, inferred fallback differs); memsets (written as kernels);
lane names other than ``stream N`` and device names other than ``cuda:N`` (the reader names a device
``cuda:<index>``); memory lanes (``memory`` slices), host-side engine slices of a schedule (a category named by their
engine kind) and compiles.

Events are written one per line (``\\n{...},``) so large exports stream back in through the Kineto reader in bounded
memory; ops keep cat ``cpu_op`` and regions ``user_annotation``, so converting an export loses no operator.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .kineto_vocabulary import SYNC_RUNTIME_CALLS, is_compiler_span
from .rules_transfers import COPY_KINDS, is_sync_copy_call
from .schema import Direction, EngineKind, SignalKind, SliceKind, memory_device
from .trace import Trace

HOST_PID = 1_000_000  # the host's process: a device's is its index, as Kineto writes it
LAUNCH = "launch"  # the name of a launch call written from a device slice's correlation
RUNTIME = "cuda_runtime"
_DMA_KINDS = {EngineKind.DMA_H2D.value, EngineKind.DMA_D2H.value, EngineKind.DMA_D2D.value}
_NAME = {"h2d": "Memcpy HtoD", "d2h": "Memcpy DtoH", "d2d": "Memcpy DtoD"}
_COPY_KIND = {f"dma_{d.value}": kind for kind, d in COPY_KINDS.items()}  # a DMA lane -> its cudaMemcpyKind
_D2H = next(kind for kind, d in COPY_KINDS.items() if d is Direction.D2H)
_DEFAULT_COPY_KIND = 4  # cudaMemcpyDefault: a copy of no known direction (the rules then keep it unknown)
# a device lane's name (engine_lanes: "stream 7", "cuda:1 DMA h2d"; a reader's: "NPU 17 Stream 101")
_LANE = re.compile(r"(?:(?P<device>.+?) )?(?:stream (?P<stream>-?\d+)|DMA \w+)", re.IGNORECASE)
_DEVICE_KINDS = {EngineKind.STREAM.value, EngineKind.MATRIX.value, EngineKind.VECTOR.value, EngineKind.COLLECTIVE.value,
                 *_DMA_KINDS}  # fmt: skip
_INDEX = re.compile(r":(\d+)$")


class _Tracks:
    """Track (tid) numbers by name, in order of first use, and the process (pid) of each."""

    def __init__(self) -> None:
        self.ids: dict[str, tuple[int, int]] = {}  # name -> (pid, tid)
        self.pid_of: dict[int, int] = {}  # tid -> pid

    def __call__(self, name: str, pid: int = HOST_PID) -> int:
        track = self.ids.get(name)
        if track is None:
            track = self.ids[name] = (pid, len(self.ids) + 1)
            self.pid_of[track[1]] = pid
        return track[1]


class _DeviceLanes:
    """(device index, stream or None) of a device engine, from its name (``stream 7``; ``cuda:1 DMA h2d`` where the
    run has several devices) and the run's devices; the name of each device index met."""

    def __init__(self, trace: Trace) -> None:
        accelerators = [d for d in trace.run_info.devices if d != "cpu"]
        self.known = set(accelerators)
        self.default = accelerators[0] if accelerators else "device 0"
        self.names: dict[int, str] = {}
        self._seen: dict[str, tuple[int, int | None]] = {}

    def __call__(self, engine: str) -> tuple[int, int | None]:
        got = self._seen.get(engine)
        if got is None:
            m = _LANE.fullmatch(engine)
            name = m["device"] if m and m["device"] in self.known else self.default
            index = _INDEX.search(name)
            got = self._seen[engine] = (int(index[1]) if index else 0, int(m["stream"]) if m and m["stream"] else None)
            self.names.setdefault(got[0], name)
        return got


def _rows(table: pa.Table, columns: list[str]) -> Iterator[tuple]:
    cols = []
    for name in columns:
        col = table.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        cols.append(col.to_pylist())
    return zip(*cols, strict=True)


def _host_lanes(trace: Trace) -> dict[int | None, str]:
    """thread -> the name of its host engine lane (from the host engine slices of its ops).

    Predicted schedules put host slices at predicted times: the measured ops keep tracks of their own.
    """
    if trace.predicted:
        return {}
    thread_of = dict(zip(trace["ops"].column("op_id").to_pylist(), trace["ops"].column("thread").to_pylist(), strict=True))
    lanes: dict[int | None, str] = {}
    for engine, kind, op_id in _rows(trace["engine_slices"], ["engine", "engine_kind", "op_id"]):
        if kind == EngineKind.HOST.value and op_id in thread_of:
            lanes.setdefault(thread_of[op_id], engine)
    return lanes


def _us(ns: int) -> float:
    return ns / 1000.0


def _free_points(spans: dict[int, list[tuple[int, int, int]]], wanted: set[int]) -> dict[int, int]:
    """op_id -> a time (ns) inside the operator when no operator nested in it on its track is open (its first such
    time), for the wanted operators; one with no such time: its start. spans: per track, (start_ns, dur_ns, op_id).

    A call there nests in that operator as the Kineto reader nests it: spans by (start, longest first), one
    enclosing another while it is open (end > start)."""
    points: dict[int, int] = {}

    def close(end: int, op_id: int, cursor: int | None, start: int) -> None:
        if cursor is not None and op_id in wanted:
            points[op_id] = cursor if cursor < end else start

    for rows in spans.values():
        rows.sort(key=lambda r: (r[0], -r[1]))  # stable: file order among equals
        stack: list[list] = []  # [end, op_id, first time no nested operator covers (None: found), start]
        for start, dur, op_id in rows:
            end = start + dur
            while stack and stack[-1][0] <= start:
                close(*stack.pop())
            if stack and stack[-1][2] is not None:
                parent = stack[-1]
                if start > parent[2]:  # a gap before this operator: its parent is the innermost one there
                    close(parent[0], parent[1], parent[2], parent[3])
                    parent[2] = None
                else:
                    parent[2] = max(parent[2], end)
            stack.append([end, op_id, start, start])
        while stack:
            close(*stack.pop())
    return points


class _OpenOps:
    """Which host track has an operator open at a time: the compiler's spans and markers are written on their
    operator's thread, as PyTorch records them (the rules tell the compiler's operators by a marker inside them on
    the same thread)."""

    def __init__(self, spans: dict[int, list[tuple[int, int, int]]]) -> None:
        self.tracks: list[tuple[int, np.ndarray, np.ndarray]] = []  # (tid, starts, greatest end so far)
        for tid, rows in spans.items():
            starts = np.asarray([r[0] for r in rows], dtype=np.int64)
            order = np.argsort(starts, kind="stable")
            ends = (starts + np.asarray([r[1] for r in rows], dtype=np.int64))[order]
            self.tracks.append((tid, starts[order], np.maximum.accumulate(ends) if len(ends) else ends))

    def track_at(self, time_ns: int) -> int | None:
        """The first host track with an operator open at `time_ns` (started at or before it, not ended), if any."""
        for tid, starts, ends in self.tracks:
            i = int(np.searchsorted(starts, time_ns, side="right")) - 1
            if i >= 0 and ends[i] > time_ns:
                return tid
        return None


@dataclasses.dataclass
class _Call:
    """A runtime call the export writes (see the module docstring)."""

    name: str
    op_id: int | None  # the operator it is written in (None: on the "runtime" track, at time_ns)
    time_ns: int | None
    correlation: int | None = None
    kind: int | None = None  # a copy's cudaMemcpyKind
    bytes: int | None = None


class _Calls:
    """The runtime calls an export writes: a launch per correlation of device work (the correlation a device slice
    without one is given, by row), then the waiting calls of the sync signals."""

    def __init__(self, trace: Trace) -> None:
        self.launches: dict[int, _Call] = {}  # by correlation
        self.syncs: list[_Call] = []
        self.given: dict[int, int] = {}  # engine slice row -> the correlation written for it (it had none)
        slices = trace["engine_slices"]
        fresh = (pc.max(slices.column("correlation")).as_py() or 0) + 1 if slices.num_rows else 1
        cols = ["engine_kind", "kind", "start", "op_id", "bytes", "correlation"]
        for row, (ekind, kind, start, op_id, nbytes, corr) in enumerate(_rows(slices, cols)):
            copy = _is_copy(ekind, kind)
            if not _is_device(ekind, kind) or (op_id is None and not copy):
                continue
            if corr is None:
                corr = self.given[row] = fresh
                fresh += 1
            if corr not in self.launches:
                self.launches[corr] = _Call(LAUNCH, op_id, start, corr, kind=_COPY_KIND.get(ekind, _DEFAULT_COPY_KIND)
                                            if copy else None, bytes=nbytes if copy else None)  # fmt: skip
        d2h: dict[int, list[_Call]] = {}  # op_id -> the launches of its d2h copies, in order
        for call in self.launches.values():
            if call.kind == _D2H and call.op_id is not None:
                d2h.setdefault(call.op_id, []).append(call)
        for op_id, kind, reason, time_ns in _rows(trace["signals"], ["op_id", "kind", "reason", "time_ns"]):
            if kind != SignalKind.SYNC.value or reason is None:
                continue
            if reason in SYNC_RUNTIME_CALLS:
                self.syncs.append(_Call(reason, op_id, time_ns))
            elif is_sync_copy_call(reason):  # the call that copied and waited: its copy's launch where it is shown
                mine = d2h.get(op_id)
                if mine:
                    mine.pop(0).name = reason
                else:
                    self.syncs.append(_Call(reason, op_id, time_ns, kind=_D2H))

    def operators(self) -> set[int]:
        """The operators some call is written in."""
        return {c.op_id for c in (*self.launches.values(), *self.syncs) if c.op_id is not None}

    def events(self, op_pos: dict[int, tuple[int, int]], points: dict[int, int], tracks: _Tracks) -> Iterator[dict]:
        """The calls as Chrome events: in their operator at its free point, else on the "runtime" track."""
        for call in (*self.launches.values(), *self.syncs):
            at = op_pos.get(call.op_id) if call.op_id is not None else None
            if at is not None:
                tid, ts = at[0], points.get(call.op_id, at[1])
            elif call.time_ns is not None:
                tid, ts = tracks("runtime"), call.time_ns
            else:
                continue
            args: dict[str, Any] = {} if call.op_id is None else {"External id": call.op_id}
            for key, value in (("correlation", call.correlation), ("kind", call.kind), ("bytes", call.bytes)):
                if value is not None:
                    args[key] = value
            yield {"ph": "X", "cat": RUNTIME, "name": call.name, "pid": HOST_PID, "tid": tid, "ts": _us(ts), "dur": 0.0,
                   "args": args}  # fmt: skip


def _is_device(ekind: str, kind: str) -> bool:
    """Device work: a stream's, a copy engine's or a compute unit's slice, or a copy of no known direction (a transfer
    slice on an engine of kind other); not the host side of a schedule, a memory lane or a span on a thread's lane."""
    return ekind in _DEVICE_KINDS or (ekind == EngineKind.OTHER.value and kind == SliceKind.TRANSFER.value)


def _is_copy(ekind: str, kind: str) -> bool:
    """A copy: a copy engine's slice, or one of no known direction."""
    return ekind in _DMA_KINDS or (ekind == EngineKind.OTHER.value and kind == SliceKind.TRANSFER.value)


def _category(engine: str, ekind: str, name: str) -> str:
    """The category of a slice that is not device work: a memory lane's ``memory``; a compiler phase ``user_annotation``
    (the Kineto reader reads it as a compiler phase again, as it read it); else its engine kind (a category the Kineto
    reader does not read, and names among the run's missing signals)."""
    if memory_device(engine) is not None:
        return "memory"
    return "user_annotation" if is_compiler_span(name) else ekind


def chrome_events(trace: Trace) -> Iterator[dict[str, Any]]:
    """Every Chrome trace event of a Trace, metadata (process and track names) last."""
    tracks = _Tracks()
    lanes = _DeviceLanes(trace)
    ops = trace["ops"]
    op_pos: dict[int, tuple[int, int]] = {}  # op_id -> (tid, start_ns)
    spans: dict[int, list[tuple[int, int, int]]] = {}  # tid -> (start_ns, dur_ns, op_id) of its operators
    op_cols = ["op_id", "name", "start_ns", "dur_ns", "placement", "device", "input_shapes", "input_strides",
               "input_dtypes", "call_site", "thread", "region_id"]  # fmt: skip
    regions = trace["regions"]
    region_tid = tracks("regions") if regions.num_rows else 0
    for rid, name, start, dur, device in _rows(regions, ["region_id", "name", "start_ns", "dur_ns", "device"]):
        yield {"ph": "X", "cat": "user_annotation", "name": name, "pid": HOST_PID, "tid": region_tid, "ts": _us(start),
               "dur": _us(dur), "args": {"region_id": rid, "device": device}}  # fmt: skip
    host_lanes = _host_lanes(trace)
    for op_id, name, start, dur, placement, device, shapes, strides, dtypes, site, thread, rid in _rows(ops, op_cols):
        if trace.predicted:
            name_of = "ops measured on the host" + ("" if thread is None else f" (thread {thread})")
        else:
            name_of = "host" if thread is None else f"host thread {thread}"
        tid = tracks(host_lanes.get(thread) or name_of)
        op_pos[op_id] = (tid, start)
        spans.setdefault(tid, []).append((start, dur, op_id))
        args: dict[str, Any] = {"External id": op_id, "placement": placement, "device": device, "region_id": rid}
        if shapes is not None:
            args["input_shapes"] = shapes
            args["input_dtypes"] = dtypes
            if strides is not None:
                args["input_strides"] = strides
        if site:
            args["call_site"] = site
        yield {"ph": "X", "cat": "cpu_op", "name": name, "pid": HOST_PID, "tid": tid, "ts": _us(start), "dur": _us(dur),
               "args": args}  # fmt: skip
    calls = _Calls(trace)
    yield from calls.events(op_pos, _free_points(spans, calls.operators()), tracks)
    kinds = trace["engine_slices"].column("engine_kind").unique().to_pylist()
    open_ops = _OpenOps(spans) if EngineKind.COMPILER.value in kinds else None  # the compiler's spans: on their thread
    del spans
    dma_slices: dict[tuple[str, int], int] = {}  # (direction, start) -> tid of a DMA slice
    slice_cols = ["engine", "engine_kind", "kind", "name", "start", "dur", "op_id", "bytes", "correlation"]
    for row, (engine, ekind, kind, name, start, dur, op_id, nbytes, corr) in enumerate(
            _rows(trace["engine_slices"], slice_cols)):
        corr = calls.given.get(row, corr)
        if ekind == EngineKind.HOST.value and op_id is not None and not trace.predicted:
            continue  # a measured host slice: the operator's own slice already shows it
        args = {"kind": kind, "engine_kind": ekind}
        for key, value in (("op_id", op_id), ("bytes", nbytes), ("correlation", corr)):
            if value is not None:
                args[key] = value
        if not _is_device(ekind, kind):
            cat, pid = _category(engine, ekind, name), HOST_PID
        else:
            pid, stream = lanes(engine)
            args["device"] = pid
            if stream is not None:
                args["stream"] = stream
            cat = "gpu_memcpy" if _is_copy(ekind, kind) else "kernel"
        on_thread = open_ops is not None and ekind == EngineKind.COMPILER.value and cat == "user_annotation"
        tid = open_ops.track_at(start) if on_thread else None  # (a compiler phase the reader reads back as one)
        if tid is None:
            tid = tracks(engine, pid)
        if ekind in _DMA_KINDS:
            dma_slices[(ekind[4:], start)] = tid
        yield {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": _us(start),
               "dur": _us(dur), "args": args}  # cycles are shown as ns  # fmt: skip
    del calls
    flow = 0
    t_cols = ["op_id", "direction", "bytes", "start_ns", "dur_ns", "cause", "call_site", "src_device", "dst_device"]
    for op_id, direction, nbytes, start, dur, cause, site, src, dst in _rows(trace["transfers"], t_cols):
        at = op_pos.get(op_id) if op_id is not None else None
        if start is None:
            if at is None:
                continue
            start, dur = at[1], 0
        tid = dma_slices.get((direction, start))
        if tid is None:
            tid = tracks(f"transfers {direction}")
            yield {"ph": "X", "cat": "transfer", "name": f"{_NAME.get(direction, direction)} ({src} -> {dst})",
                   "pid": HOST_PID, "tid": tid, "ts": _us(start), "dur": _us(dur or 0),
                   "args": {"bytes": nbytes, "cause": cause, "call_site": site, "op_id": op_id}}  # fmt: skip
        if at is not None:
            flow += 1
            yield {"ph": "s", "cat": "transfer_flow", "name": "caused", "id": flow, "pid": HOST_PID, "tid": at[0],
                   "ts": _us(at[1])}  # fmt: skip
            yield {"ph": "f", "bp": "e", "cat": "transfer_flow", "name": "caused", "id": flow, "pid": tracks.pid_of[tid],
                   "tid": tid, "ts": _us(start)}  # fmt: skip
    s_cols = ["op_id", "kind", "reason", "op_name", "count", "bytes", "call_site", "note", "time_ns", "region_id"]
    for op_id, kind, reason, op_name, count, nbytes, site, note, time_ns, rid in _rows(trace["signals"], s_cols):
        at = op_pos.get(op_id) if op_id is not None else None
        ts = time_ns if time_ns is not None else (at[1] if at else None)
        if ts is None:
            continue
        tid = at[0] if at else tracks("signals")
        yield {"ph": "i", "s": "t", "cat": "signal", "name": kind, "pid": HOST_PID, "tid": tid, "ts": _us(ts),
               "args": {"reason": reason, "operator": op_name, "count": count, "bytes": nbytes, "call_site": site,
                        "note": note, "region_id": rid}}  # fmt: skip
    c_cols = ["kind", "compile_id", "key", "frame", "compile_ns", "reason", "time_ns"]
    for kind, cid, key, frame, compile_ns, reason, time_ns in _rows(trace["compiles"], c_cols):
        if time_ns is None:
            continue
        tid = tracks("compiles")
        args = {"compile_id": cid, "frame": frame, "reason": reason}
        name = f"{kind} {key or ''}".strip()
        if compile_ns:  # the compile ended when it was logged
            yield {"ph": "X", "cat": "compile", "name": name, "pid": HOST_PID, "tid": tid,
                   "ts": _us(max(time_ns - compile_ns, 0)), "dur": _us(compile_ns), "args": args}  # fmt: skip
        else:
            yield {"ph": "i", "s": "t", "cat": "compile", "name": name, "pid": HOST_PID, "tid": tid, "ts": _us(time_ns),
                   "args": args}  # fmt: skip
    label = trace.run_info.source.value + (f" {trace.run_info.target}" if trace.run_info.target else "")
    yield {"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0, "args": {"name": f"portscope ({label})"}}
    for index, device in sorted(lanes.names.items()):
        yield {"ph": "M", "name": "process_name", "pid": index, "tid": 0, "args": {"name": device}}
    for name, (pid, tid) in tracks.ids.items():
        yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}


def write_chrome(trace: Trace, path: str | Path) -> Path:
    """Write the Chrome trace JSON of a Trace atomically (temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            _write(f, trace)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _write(f: BinaryIO, trace: Trace) -> None:
    f.write(b'{"schemaVersion": 1, "displayTimeUnit": "ns", "traceEvents": [')
    first = True
    for event in chrome_events(trace):
        f.write(b"\n" if first else b",\n")
        f.write(orjson.dumps(event))
        first = False
    meta = {"producer": "portscope export", "source": trace.run_info.source.value,
            "converted_from": trace.run_info.converted_from, "time_unit": trace.run_info.time_unit.value}  # fmt: skip
    f.write(b'\n],\n"otherData": ' + orjson.dumps(meta) + b"}\n")


__all__ = ["HOST_PID", "LAUNCH", "chrome_events", "write_chrome"]

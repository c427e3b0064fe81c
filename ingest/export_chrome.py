"""Write a Trace as Chrome trace JSON (Perfetto, chrome://tracing).

One process; one track (tid) per engine: a track per host thread for the
operators, one per device engine (stream, DMA queue...), plus "regions",
"transfers <dir>" (transfers no DMA slice already shows) and "compiles" tracks.
Ops, transfers, regions and engine work are complete ("X") slices, signals
instant ("i") events carrying their reason, and each transfer caused by an
operator gets a flow ("s" -> "f") from that operator's slice.

Events are written one per line (``\\n{...},``) so large exports stream back in
through the Kineto reader in bounded memory; ops keep cat ``cpu_op`` and regions
``user_annotation``, so converting an export loses no operator.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pyarrow as pa

from .schema import EngineKind
from .trace import Trace

PID = 1
_DMA_KINDS = {EngineKind.DMA_H2D.value, EngineKind.DMA_D2H.value, EngineKind.DMA_D2D.value}
_NAME = {"h2d": "Memcpy HtoD", "d2h": "Memcpy DtoH", "d2d": "Memcpy DtoD"}


class _Tracks:
    """Track (tid) numbers by name, in order of first use."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        tid = self.ids.get(name)
        if tid is None:
            tid = self.ids[name] = len(self.ids) + 1
        return tid


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


def chrome_events(trace: Trace) -> Iterator[dict[str, Any]]:
    """Every Chrome trace event of a Trace, metadata (track names) last."""
    tracks = _Tracks()
    ops = trace["ops"]
    op_pos: dict[int, tuple[int, int]] = {}  # op_id -> (tid, start_ns)
    op_cols = ["op_id", "name", "start_ns", "dur_ns", "placement", "device", "input_shapes", "input_strides",
               "input_dtypes", "call_site", "thread", "region_id"]  # fmt: skip
    regions = trace["regions"]
    region_tid = tracks("regions") if regions.num_rows else 0
    for rid, name, start, dur, device in _rows(regions, ["region_id", "name", "start_ns", "dur_ns", "device"]):
        yield {"ph": "X", "cat": "user_annotation", "name": name, "pid": PID, "tid": region_tid, "ts": _us(start),
               "dur": _us(dur), "args": {"region_id": rid, "device": device}}  # fmt: skip
    lanes = _host_lanes(trace)
    for op_id, name, start, dur, placement, device, shapes, strides, dtypes, site, thread, rid in _rows(ops, op_cols):
        if trace.predicted:
            name_of = "ops measured on the host" + ("" if thread is None else f" (thread {thread})")
        else:
            name_of = "host" if thread is None else f"host thread {thread}"
        tid = tracks(lanes.get(thread) or name_of)
        op_pos[op_id] = (tid, start)
        args: dict[str, Any] = {"External id": op_id, "placement": placement, "device": device, "region_id": rid}
        if shapes is not None:
            args["input_shapes"] = shapes
            args["input_dtypes"] = dtypes
            if strides is not None:
                args["input_strides"] = strides
        if site:
            args["call_site"] = site
        yield {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": tid, "ts": _us(start), "dur": _us(dur), "args": args}
    dma_slices: dict[tuple[str, int], int] = {}  # (direction, start) -> tid of a DMA slice
    slice_cols = ["engine", "engine_kind", "kind", "name", "start", "dur", "op_id", "bytes", "correlation"]
    for engine, ekind, kind, name, start, dur, op_id, nbytes, corr in _rows(trace["engine_slices"], slice_cols):
        if ekind == EngineKind.HOST.value and op_id is not None and not trace.predicted:
            continue  # a measured host slice: the operator's own slice already shows it
        tid = tracks(engine)
        if ekind in _DMA_KINDS:
            dma_slices[(ekind[4:], start)] = tid
        args = {"kind": kind, "engine_kind": ekind}
        for key, value in (("op_id", op_id), ("bytes", nbytes), ("correlation", corr)):
            if value is not None:
                args[key] = value
        cat = "gpu_memcpy" if ekind in _DMA_KINDS else "kernel"
        yield {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": _us(start),
               "dur": _us(dur), "args": args}  # cycles are shown as ns  # fmt: skip
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
            yield {"ph": "X", "cat": "transfer", "name": f"{_NAME.get(direction, direction)} ({src} -> {dst})", "pid": PID,
                   "tid": tid, "ts": _us(start), "dur": _us(dur or 0),
                   "args": {"bytes": nbytes, "cause": cause, "call_site": site, "op_id": op_id}}  # fmt: skip
        if at is not None:
            flow += 1
            yield {"ph": "s", "cat": "transfer_flow", "name": "caused", "id": flow, "pid": PID, "tid": at[0], "ts": _us(at[1])}
            yield {"ph": "f", "bp": "e", "cat": "transfer_flow", "name": "caused", "id": flow, "pid": PID, "tid": tid,
                   "ts": _us(start)}  # fmt: skip
    s_cols = ["op_id", "kind", "reason", "op_name", "count", "bytes", "call_site", "note", "time_ns", "region_id"]
    for op_id, kind, reason, op_name, count, nbytes, site, note, time_ns, rid in _rows(trace["signals"], s_cols):
        at = op_pos.get(op_id) if op_id is not None else None
        ts = time_ns if time_ns is not None else (at[1] if at else None)
        if ts is None:
            continue
        tid = at[0] if at else tracks("signals")
        yield {"ph": "i", "s": "t", "cat": "signal", "name": kind, "pid": PID, "tid": tid, "ts": _us(ts),
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
            yield {"ph": "X", "cat": "compile", "name": name, "pid": PID, "tid": tid, "ts": _us(max(time_ns - compile_ns, 0)),
                   "dur": _us(compile_ns), "args": args}  # fmt: skip
        else:
            yield {"ph": "i", "s": "t", "cat": "compile", "name": name, "pid": PID, "tid": tid, "ts": _us(time_ns), "args": args}
    label = trace.run_info.source.value + (f" {trace.run_info.target}" if trace.run_info.target else "")
    yield {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": f"portscope ({label})"}}
    for name, tid in tracks.ids.items():
        yield {"ph": "M", "name": "thread_name", "pid": PID, "tid": tid, "args": {"name": name}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid, "args": {"sort_index": tid}}


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


__all__ = ["chrome_events", "write_chrome"]

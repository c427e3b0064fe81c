"""Measured calls of `portscope targets calibrate` (profiler/calibrate.py), read from traces any reader loads: an
operator's FLOPs and bytes from its recorded shapes, its device (or host) time, copies per direction, launches,
syncs and compiles."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from portscope.ingest.catalog import MATMUL_OPS, VIEW_OPS
from portscope.ingest.op_categories import OpCategory, is_communication, operator_category
from portscope.ingest.schema import EngineKind, Placement

from .calibrate_fit import CalibrationError, Sample
from .targets import matches

GAP_CAP_NS = 1_000_000  # a longer gap between two host operators is a pause (between steps), not overhead
_ITEMSIZE = {"float": 4, "float32": 4, "double": 8, "float64": 8, "c10::Half": 2, "float16": 2, "half": 2,
             "c10::BFloat16": 2, "bfloat16": 2, "long int": 8, "int64": 8, "long": 8, "int": 4, "int32": 4,
             "short int": 2, "int16": 2, "signed char": 1, "int8": 1, "unsigned char": 1, "uint8": 1, "bool": 1}  # fmt: skip
_COMPUTE_CATEGORIES = {OpCategory.GEMM, OpCategory.ATTENTION, OpCategory.CONVOLUTION}
_LANE_KINDS = {EngineKind.HOST, EngineKind.DISPATCH, EngineKind.COMPILER, EngineKind.DMA_H2D, EngineKind.DMA_D2H,
               EngineKind.DMA_D2D}  # fmt: skip


def is_collective(name: str) -> bool:
    """A collective (its time is mostly waiting on peers): `op_categories.is_communication`."""
    return is_communication(name)


# ---- samples from traces --------------------------------------------------------------------------


def _shapes(text: Any) -> list[tuple[int, ...] | None]:
    """'256x64;1x16;;()' -> [(256, 64), (1, 16), None, ()]."""
    if not isinstance(text, str):
        return []
    out: list[tuple[int, ...] | None] = []
    for part in text.split(";"):
        part = part.strip()
        if part == "()":
            out.append(())
        elif part and re.fullmatch(r"\d+(x\d+)*", part):
            out.append(tuple(int(v) for v in part.split("x")))
        else:
            out.append(None)
    return out


def _dtypes(text: Any) -> list[str]:
    return [p.strip() for p in text.split(";")] if isinstance(text, str) else []


def op_flops_bytes(name: str, input_shapes: Any, input_dtypes: Any, bytes_in: int, bytes_out: int,
                   flops: float | None = None) -> tuple[float, float]:
    """(FLOPs, bytes moved) of one operator call from its recorded input shapes, as the schedule counts them:
    2*M*N*K for matrix products and linear, 2*B*Lq*Lk*(Dq+Dv) for attention, else the largest operand's elements;
    bytes are what it reads and writes (the output estimated from the inputs when the trace does not record it)."""
    shapes = _shapes(input_shapes)
    dtypes = _dtypes(input_dtypes)
    tensors = [(s, _ITEMSIZE.get(dtypes[k] if k < len(dtypes) else "", 4)) for k, s in enumerate(shapes) if s]
    packet = name.split(".", 1)[0]
    out_numel, out_size = 0, 4
    est = 0.0
    if packet in MATMUL_OPS and len(tensors) >= 2:
        (a, size), (b, _) = tensors[-2], tensors[-1]
        if len(a) >= 1 and len(b) >= 1:
            out_numel = math.prod(a[:-1]) * b[-1]
            est, out_size = 2.0 * out_numel * a[-1], size
    elif packet == "aten::linear" and len(tensors) >= 2:
        (x, size), (wt, _) = tensors[0], tensors[1]
        out_numel = math.prod(x[:-1]) * wt[0]
        est, out_size = 2.0 * math.prod(x) * wt[0], size
    elif "scaled_dot_product" in packet and len(tensors) >= 3 and len(tensors[0][0]) >= 2:
        (q, size), (k, _), (v, _) = tensors[0], tensors[1], tensors[2]
        out_numel = math.prod(q[:-1]) * v[-1]
        est, out_size = 2.0 * math.prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1]), size
    elif tensors:
        big, size = max(tensors, key=lambda t: math.prod(t[0]))
        out_numel, out_size = math.prod(big), size
        est = float(out_numel)
    if flops is not None and flops == flops and flops > 0:
        est = float(flops)
    nbytes = float(bytes_in + (bytes_out if bytes_out else out_numel * out_size))
    return est, nbytes


def engine_names(raw: dict[str, Any]) -> tuple[dict[str, tuple[str, ...]], str | None, str | None, dict[str, str]]:
    """(engine name -> its ops patterns, for compute engines with patterns; the default compute engine; the
    matrix engine; DMA direction -> engine name) of a raw target document."""
    patterned: dict[str, tuple[str, ...]] = {}
    default = matrix = None
    dma: dict[str, str] = {}
    for name, entry in (raw.get("engines") or {}).items():
        kind = EngineKind(entry.get("kind", "other"))
        if kind in (EngineKind.DMA_H2D, EngineKind.DMA_D2H, EngineKind.DMA_D2D):
            dma.setdefault(kind.value.removeprefix("dma_"), name)
        if kind in _LANE_KINDS:
            continue
        if kind is EngineKind.MATRIX and matrix is None:
            matrix = name
        if entry.get("ops"):
            patterned[name] = tuple(entry["ops"])
        elif default is None or (kind is EngineKind.VECTOR and raw["engines"][default].get("kind") != "vector"):
            default = name
    return patterned, default, matrix, dma


def engine_of(name: str, patterned: dict[str, tuple[str, ...]], default: str | None, matrix: str | None) -> str | None:
    """The engine an operator runs on: the first whose ops patterns match; else the matrix engine for GEMM,
    attention and convolution operators; else the default (vector) engine."""
    for engine, pats in patterned.items():
        if matches(name, pats):
            return engine
    if matrix is not None and operator_category(name) in _COMPUTE_CATEGORIES:
        return matrix
    return default


@dataclasses.dataclass
class TraceSamples:
    """What one trace gives: operator calls, copies per direction, launch, sync and compile times.

    host_ops: the operator calls that ran on the host (every call of a host-only trace; a measured run's
    fallbacks); syncs: each host wait's own time beyond the device work it waited for (`sync_costs`)."""

    ops: list[Sample] = dataclasses.field(default_factory=list)
    device_time: bool = True  # False: a host-only trace (outermost operators' inclusive time)
    copies: dict[str, list[Sample]] = dataclasses.field(default_factory=dict)
    launches: list[float] = dataclasses.field(default_factory=list)
    syncs: list[float] = dataclasses.field(default_factory=list)
    compiles: list[float] = dataclasses.field(default_factory=list)
    host_ops: list[Sample] = dataclasses.field(default_factory=list)


def samples_from_trace(trace: Any) -> TraceSamples:
    """The calls, copies, launches, syncs and compiles of a loaded trace (`ingest.trace.Trace`)."""
    from portscope.ingest.link import enclosing

    out = TraceSamples()
    ops = trace["ops"]
    if ops.num_rows:
        cols = ops.select(["name", "dur_ns", "input_shapes", "input_dtypes", "bytes_in", "bytes_out", "flops",
                           "thread", "start_ns", "placement"]).to_pydict()
        times = _compute_time(trace, ops.column("op_id").to_numpy(zero_copy_only=False))
        on_device = times > 0
        out.device_time = bool(on_device.any())
        if out.device_time:
            rows = np.flatnonzero(on_device)
        else:  # host-only: each outermost operator, its inclusive time
            n = ops.num_rows
            thread = np.asarray([t if t is not None else -1 for t in cols["thread"]], dtype=np.int64)
            start = np.asarray(cols["start_ns"], dtype=np.int64)
            dur = np.asarray(cols["dur_ns"], dtype=np.int64)
            everyone = np.ones(n, dtype=bool)
            parent = np.asarray(enclosing(thread, start, dur, np.zeros(n, np.int8), everyone, everyone))
            rows = np.flatnonzero(parent < 0)
            times = dur
        if out.device_time:
            for i in rows:
                _add_op(out, cols, int(i), float(times[i]))
            for i in np.flatnonzero(~on_device):  # fallbacks: operators a measured run ran on the host
                if cols["placement"][i] == Placement.FALLBACK.value and cols["name"][i].startswith("aten::"):
                    _add_op(out, cols, int(i), float(cols["dur_ns"][i]), out.host_ops)
        else:  # each call with the host gap before it (after the previous call that does work, views included)
            ends: dict[int, int] = {}
            for i in rows[np.lexsort((start[rows], thread[rows]))]:
                name = cols["name"][i]
                if name in VIEW_OPS or not name.startswith("aten::"):
                    continue
                gap = int(start[i]) - ends.get(int(thread[i]), int(start[i]))
                ends[int(thread[i])] = int(start[i] + dur[i])
                _add_op(out, cols, int(i), float(dur[i] + (gap if 0 < gap <= GAP_CAP_NS else 0)))
            out.host_ops = list(out.ops)  # the host is the device: every call ran there
    transfers = trace["transfers"]
    if transfers.num_rows:
        t = transfers.select(["direction", "bytes", "dur_ns"]).to_pydict()
        for direction, nbytes, dur in zip(t["direction"], t["bytes"], t["dur_ns"], strict=True):
            if dur is not None and dur > 0 and nbytes:
                out.copies.setdefault(str(direction), []).append(Sample(str(direction), 0.0, float(nbytes), float(dur)))
    runtime = trace["runtime_calls"]
    if runtime.num_rows:
        r = runtime.select(["name", "dur_ns"]).to_pydict()
        out.launches = [float(dur) for name, dur in zip(r["name"], r["dur_ns"], strict=True) if "Launch" in name]
        out.syncs = sync_costs(trace)
    compiles = trace["compiles"]
    if compiles.num_rows:
        out.compiles = [float(v) for v in compiles.column("compile_ns").to_pylist() if v is not None and v > 0]
    return out


def _compute_time(trace: Any, op_ids: np.ndarray) -> np.ndarray:
    """Per operator (rows of the ops table): the time of the compute work it launched itself (kernels on streams,
    matrix and vector engines; not its copies, which the DMA engines' fit takes, nor annotations)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from portscope.ingest.schema import DEVICE_ENGINES, SliceKind

    slices = trace["engine_slices"]
    out = np.zeros(len(op_ids), dtype=np.float64)
    if not slices.num_rows or not len(op_ids):
        return out
    compute = [k.value for k in DEVICE_ENGINES - {EngineKind.DMA_H2D, EngineKind.DMA_D2H, EngineKind.DMA_D2D}]
    kind = pc.cast(slices.column("engine_kind"), pa.string())
    what = pc.cast(slices.column("kind"), pa.string())
    keep = pc.and_(pc.and_(pc.is_in(kind, pa.array(compute)), pc.not_equal(what, SliceKind.ANNOTATION.value)),
                   pc.is_valid(slices.column("op_id")))
    work = slices.filter(keep)
    if not work.num_rows or trace.run_info.time_unit.value != "ns":
        return out
    item_op = work.column("op_id").to_numpy(zero_copy_only=False).astype(np.int64)
    dur = work.column("dur").to_numpy(zero_copy_only=False).astype(np.float64)
    order = np.argsort(op_ids, kind="stable")
    at = np.minimum(np.searchsorted(op_ids[order], item_op), len(order) - 1)
    found = op_ids[order[at]] == item_op
    np.add.at(out, order[at[found]], dur[found])
    return out


def sync_costs(trace: Any) -> list[float]:
    """Each host wait's own cost, ns: of every synchronizing runtime call (`SYNC_RUNTIME_CALLS`) and every blocking
    copy call whose copy goes device to host, the time from the later of its start and the end of the last device
    work that ended inside it, to its end. The time it spent waiting for the device's queued work (which a schedule
    already models) is not counted: what is left is the wake-up and return a target's `sync_ns` stands for."""
    import pyarrow.compute as pc

    from portscope.ingest.kineto_vocabulary import SYNC_RUNTIME_CALLS
    from portscope.ingest.rules import is_sync_copy_call
    from portscope.ingest.schema import DEVICE_ENGINES, SliceKind

    runtime = trace["runtime_calls"]
    if not runtime.num_rows or trace.run_info.time_unit.value != "ns":
        return []
    r = runtime.select(["name", "start_ns", "dur_ns", "correlation"]).to_pydict()
    slices = trace["engine_slices"]
    device = slices.filter(pc.and_(pc.is_in(pc.cast(slices.column("engine_kind"), "string"),
                                            value_set=_strings(k.value for k in DEVICE_ENGINES)),
                                   pc.not_equal(pc.cast(slices.column("kind"), "string"), SliceKind.ANNOTATION.value)))
    ends = np.sort((device.column("start").to_numpy(zero_copy_only=False)
                    + device.column("dur").to_numpy(zero_copy_only=False)).astype(np.int64))
    d2h = pc.equal(pc.cast(device.column("engine_kind"), "string"), EngineKind.DMA_D2H.value)
    d2h_calls = set(device.filter(d2h).column("correlation").drop_null().to_pylist())
    out = []
    for name, start, dur, corr in zip(r["name"], r["start_ns"], r["dur_ns"], r["correlation"], strict=True):
        if name in SYNC_RUNTIME_CALLS or (is_sync_copy_call(name) and corr in d2h_calls):
            end = start + dur
            k = int(np.searchsorted(ends, end, side="right")) - 1  # the last device work ending by the call's end
            waited_until = max(start, int(ends[k])) if k >= 0 else start
            out.append(float(end - waited_until))
    return out


def _strings(values: Iterable[str]) -> Any:
    import pyarrow as pa

    return pa.array(sorted(values), pa.string())


def _add_op(out: TraceSamples, cols: dict[str, list], i: int, dur_ns: float, into: list[Sample] | None = None) -> None:
    name = cols["name"][i]
    if name in VIEW_OPS:
        return
    flops, nbytes = op_flops_bytes(name, cols["input_shapes"][i], cols["input_dtypes"][i], cols["bytes_in"][i] or 0,
                                   cols["bytes_out"][i] or 0, cols["flops"][i])
    (out.ops if into is None else into).append(Sample(name, flops, nbytes, dur_ns))


def load_samples(paths: Iterable[str | Path]) -> list[tuple[str, TraceSamples]]:
    """(file name, samples) of each trace file (any format `portscope convert` reads, or a portscope .arrow run).

    Raises CalibrationError for a predicted run: its times are a target's figures, not measurements."""
    from portscope.ingest.convert import load_any
    from portscope.ingest.schema import Source

    out = []
    for p in paths:
        trace = load_any(p)
        if trace.run_info.source is Source.PREDICTED:
            raise CalibrationError(f"{Path(p).name} is a prediction (target {trace.run_info.target}): its times come "
                                   "from a target's figures, not from the device; calibrate from measured traces")
        out.append((Path(p).name, samples_from_trace(trace)))
    return out

"""Calibrate a target's cost figures from measured traces of the device (`portscope targets calibrate`).

Input: traces any reader loads (a PyTorch-profiler Kineto/Chrome JSON, torch_npu tables, portscope's own measured
runs). Output: the base target's TOML with the figures the traces give replaced, each with its source in the
`[sources]` table (``measured: <trace file>, n=..., fit error ...``); every other figure keeps the base's value and
source. Pure: numpy and the ingest readers, no torch.

What is measured, and how:

* **engines** (``engines.<name>.latency_ns / flops_per_ns / bytes_per_ns``): one sample per operator call: its own
  device compute time (the kernels it launched itself; its copies go to the DMA fit) when the trace has device work,
  else (a host-only trace: the CPU is the device, it issues and runs each operator in turn) the inclusive time of
  each outermost operator plus the host gap before it (Python and framework time since the previous operator that
  does work, views included, up to GAP_CAP_NS): the latency then carries the per-operator overhead of the host.
  FLOPs and bytes come from the recorded input shapes and dtypes. The calls go to the engine the target's ``ops``
  patterns give (GEMM and attention operators no pattern names go to the matrix engine), views do no work and are
  left out, and so are (`usable_calls`) operators that are not ATen's when some are, and calls without sizes when
  others have them. Calls of the same operator with the same FLOPs and bytes form a bucket; its median is the
  bucket's time, and a call more than 3x off its bucket's median is an outlier (counted and reported, not fitted).
  The schedule's model ``latency + max(flops / flops_per_ns, bytes / bytes_per_ns)`` is then fitted to the bucket
  medians by least squares weighted by the calls per bucket: a flops-only line, a bytes-only line, and the max of
  both (each bucket assigned to the term that dominates it, refitted until stable, from the two lines' slopes and
  from a fit of their sum); the one with the least squared error wins. Without shapes only the latency is fitted:
  the calls' mean of bucket medians.
* **transfers** (``engines.dma_h2d / dma_d2h``): ``latency + bytes / bytes_per_ns`` fitted the same way on the
  trace's copies per direction.
* **dispatch** (``cost.dispatch_ns``): the median of the runtime's launch calls (``*Launch*``).
* **compiles** (``cost.compile_ns``): the median compile time of the trace's compile rows.
* **sync**: the median of synchronizing runtime calls is reported; a target has no figure for it.

The fit error is the count-weighted median of ``|fitted - median| / median`` over the buckets.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from portscope.ingest.catalog import MATMUL_OPS, VIEW_OPS
from portscope.ingest.errors import TargetError
from portscope.ingest.op_categories import OpCategory, operator_category
from portscope.ingest.schema import EngineKind

from .targets import Target, builtin_targets, matches, parse_target

__all__ = ["CalibrationError", "Calibration", "Fit", "Sample", "calibrate", "fit_engine", "fit_transfer", "load_samples",
           "engine_names", "engine_of", "is_collective", "render_toml", "samples_from_trace", "usable_calls", "write_calibrated"]

GAP_CAP_NS = 1_000_000  # a longer gap between two host operators is a pause (between steps), not overhead
OUTLIER_FACTOR = 3.0  # a call more than 3x off (above or below) its bucket's median is an outlier
_ITEMSIZE = {"float": 4, "float32": 4, "double": 8, "float64": 8, "c10::Half": 2, "float16": 2, "half": 2,
             "c10::BFloat16": 2, "bfloat16": 2, "long int": 8, "int64": 8, "long": 8, "int": 4, "int32": 4,
             "short int": 2, "int16": 2, "signed char": 1, "int8": 1, "unsigned char": 1, "uint8": 1, "bool": 1}  # fmt: skip
_COMPUTE_CATEGORIES = {OpCategory.GEMM, OpCategory.ATTENTION, OpCategory.CONVOLUTION}
_LANE_KINDS = {EngineKind.HOST, EngineKind.DISPATCH, EngineKind.COMPILER, EngineKind.DMA_H2D, EngineKind.DMA_D2H,
               EngineKind.DMA_D2D}  # fmt: skip


_COLLECTIVE = re.compile(r"hcom|hccl|nccl|gloo|c10d|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all", re.IGNORECASE)


def is_collective(name: str) -> bool:
    """A collective (its time is mostly waiting on peers): its category says so, or its name (hcom_allReduce_)."""
    return operator_category(name) is OpCategory.COMMUNICATION or bool(_COLLECTIVE.search(name))


class CalibrationError(ValueError):
    """The traces give nothing to calibrate from (no operator calls with a time, no copies, no launches)."""


@dataclasses.dataclass(frozen=True)
class Sample:
    """One measured call: which operator (or copy direction), its FLOPs and bytes, its time in ns."""

    name: str
    flops: float
    nbytes: float
    dur_ns: float


@dataclasses.dataclass(frozen=True)
class Fit:
    """A fitted ``latency + max(flops / flops_per_ns, bytes / bytes_per_ns)``; a 0 rate drops its term.

    n: calls fitted; buckets: distinct (operator, flops, bytes); error: count-weighted median relative error of
    the fit over the buckets; outliers: calls left out (more than OUTLIER_FACTOR off their bucket's median);
    fitted: the figures this fit gives (the others keep the base's)."""

    latency_ns: float
    flops_per_ns: float
    bytes_per_ns: float
    n: int
    buckets: int
    error: float
    outliers: int
    fitted: tuple[str, ...]
    worst_outliers: tuple[str, ...] = ()

    def predict(self, flops: float, nbytes: float) -> float:
        f = flops / self.flops_per_ns if self.flops_per_ns else 0.0
        b = nbytes / self.bytes_per_ns if self.bytes_per_ns else 0.0
        return self.latency_ns + max(f, b)


@dataclasses.dataclass
class Calibration:
    """What the traces gave: per figure path its value and source; per engine its fit; what was reported only."""

    base: str
    figures: dict[str, float] = dataclasses.field(default_factory=dict)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    fits: dict[str, Fit] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        lines = [f"calibrated from base {self.base}:"]
        for figure in sorted(self.figures):
            lines.append(f"  {figure} = {_number(self.figures[figure])}  ({self.sources[figure]})")
        for engine, fit in sorted(self.fits.items()):
            if fit.outliers:
                lines.append(f"  {engine}: {fit.outliers} outlier call(s) left out, e.g. {'; '.join(fit.worst_outliers)}")
        lines.extend(f"  {note}" for note in self.notes)
        return "\n".join(lines)


# ---- fitting --------------------------------------------------------------------------------------


def _buckets(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, list[str]]:
    """(flops, bytes, median ns, calls) per bucket of equal (name, flops, bytes), outliers left out; the outlier
    count and the worst few, described."""
    groups: dict[tuple[str, float, float], list[float]] = {}
    for s in samples:
        groups.setdefault((s.name, s.flops, s.nbytes), []).append(s.dur_ns)
    f, b, y, w = [], [], [], []
    outliers: list[tuple[float, str]] = []
    for (name, flops, nbytes), durs in groups.items():
        d = np.asarray(durs, dtype=np.float64)
        med = float(np.median(d))
        if med > 0:
            off = (d > OUTLIER_FACTOR * med) | (d < med / OUTLIER_FACTOR)
            outliers.extend((float(x / med), f"{name} {x / 1000:.1f} us vs median {med / 1000:.1f} us") for x in d[off])
            d = d[~off]
            med = float(np.median(d))
        f.append(flops)
        b.append(nbytes)
        y.append(med)
        w.append(len(d))
    worst = [text for _, text in sorted(outliers, key=lambda o: -max(o[0], 1 / o[0]) if o[0] else 0)[:3]]
    return (np.asarray(f, np.float64), np.asarray(b, np.float64), np.asarray(y, np.float64), np.asarray(w, np.float64),
            len(outliers), worst)


def _lstsq(columns: list[np.ndarray], y: np.ndarray, w: np.ndarray) -> list[float]:
    """Weighted least squares with every coefficient >= 0 (a negative one's column is dropped and the rest refit)."""
    active = list(range(len(columns)))
    sw = np.sqrt(w)
    while True:
        coef = np.zeros(len(columns))
        if active:
            a = np.stack([columns[k] * sw for k in active], axis=1)
            sol = np.linalg.lstsq(a, y * sw, rcond=None)[0]
            coef[active] = sol
        negative = [k for k in active if coef[k] < 0]
        if not negative:
            return [float(c) for c in coef]
        active.remove(min(negative, key=lambda k: coef[k]))


def _max_model(f: np.ndarray, b: np.ndarray, y: np.ndarray, w: np.ndarray, a: float, c: float) -> tuple[float, float, float]:
    """Refine (latency, ns per flop, ns per byte) of ``latency + max(a f, c b)`` by alternating: each bucket goes to
    the term that dominates it, then one weighted least-squares fit of the three."""
    lat = 0.0
    for _ in range(20):
        on_f = a * f >= c * b
        lat, a2, c2 = _lstsq([np.ones_like(y), np.where(on_f, f, 0.0), np.where(on_f, 0.0, b)], y, w)
        if abs(a2 - a) <= 1e-12 * max(a, 1e-30) and abs(c2 - c) <= 1e-12 * max(c, 1e-30):
            break
        a, c = a2, c2
    return lat, a, c


def _error(pred: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Count-weighted median of |pred - y| / y."""
    ok = y > 0
    if not ok.any():
        return 0.0
    rel = np.abs(pred[ok] - y[ok]) / y[ok]
    order = np.argsort(rel)
    cum = np.cumsum(w[ok][order])
    return float(rel[order][np.searchsorted(cum, cum[-1] / 2)])


def _predict(f: np.ndarray, b: np.ndarray, lat: float, a: float, c: float) -> np.ndarray:
    return lat + np.maximum(a * f, c * b)


def fit_engine(samples: Sequence[Sample], *, use_flops: bool = True) -> Fit:
    """Fit ``latency + max(flops / flops_per_ns, bytes / bytes_per_ns)`` to measured calls (see the module doc)."""
    if not samples:
        raise CalibrationError("no calls to fit")
    f, b, y, w, n_out, worst = _buckets(samples)
    if not use_flops:
        f = np.zeros_like(f)
    has_f, has_b = len(np.unique(f)) > 1, len(np.unique(b)) > 1
    candidates: list[tuple[float, float, float]] = []
    if has_f:
        lat, a = _lstsq([np.ones_like(y), f], y, w)
        candidates.append((lat, a, 0.0))
    if has_b:
        lat, c = _lstsq([np.ones_like(y), b], y, w)
        candidates.append((lat, 0.0, c))
    if has_f and has_b:  # the max model, from the two single-term slopes and from a fit of their sum
        _, a_sum, c_sum = _lstsq([np.ones_like(y), f, b], y, w)
        starts = [(candidates[0][1], candidates[1][2]), (a_sum, c_sum)]
        candidates.extend(_max_model(f, b, y, w, a0, c0) for a0, c0 in starts if a0 > 0 and c0 > 0)
    if not candidates:  # no sizes to tell calls apart: a latency only
        candidates.append((float(np.average(y, weights=w)), 0.0, 0.0))
    lat, a, c = min(candidates, key=lambda m: float(np.sum(w * (_predict(f, b, *m) - y) ** 2)))
    fitted = ["latency_ns"] + (["flops_per_ns"] if has_f else []) + (["bytes_per_ns"] if has_b else [])
    return Fit(latency_ns=lat, flops_per_ns=1.0 / a if a > 0 else 0.0, bytes_per_ns=1.0 / c if c > 0 else 0.0,
               n=int(w.sum()), buckets=len(y), error=_error(_predict(f, b, lat, a, c), y, w), outliers=n_out,
               fitted=tuple(fitted), worst_outliers=tuple(worst))


def fit_transfer(samples: Sequence[Sample]) -> Fit:
    """Fit ``latency + bytes / bytes_per_ns`` to measured copies of one direction."""
    return fit_engine(samples, use_flops=False)


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
    """What one trace gives: operator calls, copies per direction, launch, sync and compile times."""

    ops: list[Sample] = dataclasses.field(default_factory=list)
    device_time: bool = True  # False: a host-only trace (outermost operators' inclusive time)
    copies: dict[str, list[Sample]] = dataclasses.field(default_factory=dict)
    launches: list[float] = dataclasses.field(default_factory=list)
    syncs: list[float] = dataclasses.field(default_factory=list)
    compiles: list[float] = dataclasses.field(default_factory=list)


def samples_from_trace(trace: Any) -> TraceSamples:
    """The calls, copies, launches, syncs and compiles of a loaded trace (`ingest.trace.Trace`)."""
    from portscope.ingest.link import enclosing

    out = TraceSamples()
    ops = trace["ops"]
    if ops.num_rows:
        cols = ops.select(["name", "dur_ns", "input_shapes", "input_dtypes", "bytes_in", "bytes_out", "flops",
                           "thread", "start_ns"]).to_pydict()
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
        else:  # each call with the host gap before it (after the previous call that does work, views included)
            ends: dict[int, int] = {}
            for i in rows[np.lexsort((start[rows], thread[rows]))]:
                name = cols["name"][i]
                if name in VIEW_OPS or not name.startswith("aten::"):
                    continue
                gap = int(start[i]) - ends.get(int(thread[i]), int(start[i]))
                ends[int(thread[i])] = int(start[i] + dur[i])
                _add_op(out, cols, int(i), float(dur[i] + (gap if 0 < gap <= GAP_CAP_NS else 0)))
    transfers = trace["transfers"]
    if transfers.num_rows:
        t = transfers.select(["direction", "bytes", "dur_ns"]).to_pydict()
        for direction, nbytes, dur in zip(t["direction"], t["bytes"], t["dur_ns"], strict=True):
            if dur is not None and dur > 0 and nbytes:
                out.copies.setdefault(str(direction), []).append(Sample(str(direction), 0.0, float(nbytes), float(dur)))
    runtime = trace["runtime_calls"]
    if runtime.num_rows:
        r = runtime.select(["name", "dur_ns"]).to_pydict()
        for name, dur in zip(r["name"], r["dur_ns"], strict=True):
            if "Launch" in name:
                out.launches.append(float(dur))
            elif "Synchronize" in name:
                out.syncs.append(float(dur))
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


def _add_op(out: TraceSamples, cols: dict[str, list], i: int, dur_ns: float) -> None:
    name = cols["name"][i]
    if name in VIEW_OPS:
        return
    flops, nbytes = op_flops_bytes(name, cols["input_shapes"][i], cols["input_dtypes"][i], cols["bytes_in"][i] or 0,
                                   cols["bytes_out"][i] or 0, cols["flops"][i])
    out.ops.append(Sample(name, flops, nbytes, dur_ns))


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


# ---- the target file ------------------------------------------------------------------------------


def base_document(base: str | Path) -> tuple[dict[str, Any], str]:
    """The raw TOML document of a built-in target (by name) or a target file, and how to name it."""
    text_name = str(base)
    if text_name in builtin_targets():
        text = (resources.files("portscope.profiler.targets") / f"{text_name}.toml").read_text(encoding="utf-8")
        shown = text_name
    else:
        path = Path(text_name)
        if not path.exists():
            raise TargetError(text_name, f"no such target file, and not a built-in target ({', '.join(builtin_targets())})")
        text, shown = path.read_text(encoding="utf-8"), path.name
    try:
        return tomllib.loads(text), shown
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(text_name, f"not valid TOML: {exc}") from None


def _number(v: float) -> int | float:
    """A figure as the file writes it: whole ns as integers, rates to 4 significant digits."""
    if abs(v) >= 100 or v == 0:
        return int(round(v))
    return float(f"{v:.4g}")


def _source(files: Sequence[str], n: int, extra: str = "") -> str:
    return f"measured: {', '.join(files)}, n={n}" + (f", {extra}" if extra else "")


def usable_calls(samples: Sequence[Sample]) -> list[Sample]:
    """The calls an engine's fit uses: ATen operators when there are any (a vendor or autograd-node operator's
    sizes from its inputs say little about its work: an embedding table it indexes counts whole), and, when some
    calls have sizes, only those (a call whose sizes the trace does not record, such as a list of tensors, would
    pull the latency)."""
    aten = [s for s in samples if s.name.startswith("aten::")]
    chosen = aten or list(samples)
    sized = [s for s in chosen if s.flops > 0 or s.nbytes > 0]
    return sized or chosen


def calibrate(paths: Sequence[str | Path], base: str | Path, *, name: str | None = None,
              samples: list[tuple[str, TraceSamples]] | None = None) -> tuple[dict[str, Any], Calibration]:
    """The base target's document with the figures the traces give, and what was fitted (see the module doc).

    Raises CalibrationError when the traces hold nothing usable."""
    raw, shown = base_document(base)
    loaded = samples if samples is not None else load_samples(paths)
    files = [f for f, _ in loaded]
    cal = Calibration(base=shown)
    patterned, default, matrix, dma = engine_names(raw)
    engines = raw.setdefault("engines", {})
    by_engine: dict[str, list[Sample]] = {}
    host_only = False
    collectives = 0
    for _, s in loaded:
        host_only = host_only or not s.device_time
        for sample in s.ops:
            if is_collective(sample.name):
                collectives += 1
                continue
            engine = engine_of(sample.name, patterned, default, matrix)
            if engine is not None:
                by_engine.setdefault(engine, []).append(sample)
    if collectives:
        cal.notes.append(f"{collectives} collective calls left out of the engine fits (their time is waiting on peers)")
    for engine, every in sorted(by_engine.items()):
        samples_ = usable_calls(every)
        if len(samples_) < len(every):
            cal.notes.append(f"{engine}: {len(every) - len(samples_)} of {len(every)} calls left out (not ATen "
                             "operators, or sizes the trace does not record)")
        fit = fit_engine(samples_)
        cal.fits[engine] = fit
        what = "host-only trace: outermost operators' time + the host gap before each" if host_only else "operators' own device time"
        src = _source(files, fit.n, f"{fit.buckets} shapes, fit error {fit.error:.0%}, "
                                    f"{fit.outliers} outliers left out ({what})")
        for figure in fit.fitted:
            value = getattr(fit, figure)
            engines[engine][figure] = _number(value)
            cal.figures[f"engines.{engine}.{figure}"] = value
            cal.sources[f"engines.{engine}.{figure}"] = src
        if "flops_per_ns" in fit.fitted and not fit.flops_per_ns or "bytes_per_ns" in fit.fitted and not fit.bytes_per_ns:
            cal.notes.append(f"{engine}: a rate fitted as 0 drops its term (the calls' time did not grow with it)")
    copies: dict[str, list[Sample]] = {}
    for _, s in loaded:
        for direction, samples_ in s.copies.items():
            copies.setdefault(direction, []).extend(samples_)
    for direction, samples_ in sorted(copies.items()):
        engine = dma.get(direction)
        if engine is None:
            cal.notes.append(f"{len(samples_)} {direction} copies: the base has no dma_{direction} engine to calibrate")
            continue
        fit = fit_transfer(samples_)
        cal.fits[engine] = fit
        src = _source(files, fit.n, f"{fit.buckets} sizes, fit error {fit.error:.0%}, {fit.outliers} outliers left out")
        for figure in fit.fitted:
            engines[engine][figure] = _number(getattr(fit, figure))
            cal.figures[f"engines.{engine}.{figure}"] = getattr(fit, figure)
            cal.sources[f"engines.{engine}.{figure}"] = src
    cost = raw.setdefault("cost", {})
    for figure, values, what in (("dispatch_ns", [v for _, s in loaded for v in s.launches], "launch calls"),
                                 ("compile_ns", [v for _, s in loaded for v in s.compiles], "compiles")):
        if values:
            med = float(np.median(values))
            cost[figure] = _number(med)
            cal.figures[f"cost.{figure}"] = med
            cal.sources[f"cost.{figure}"] = _source(files, len(values), f"median of the {what}")
    syncs = [v for _, s in loaded for v in s.syncs]
    if syncs:
        cal.notes.append(f"sync: median {np.median(syncs) / 1000:.1f} us over {len(syncs)} synchronizing calls "
                         "(reported only: a target has no sync figure)")
    if not cal.figures:
        raise CalibrationError(f"no usable events in {', '.join(files) or 'no traces'}: no operator calls with a "
                               "time, no copies, no launch calls and no compiles to calibrate from")
    sources = raw.setdefault("sources", {})
    sources.update(cal.sources)
    target = raw.setdefault("target", {})
    target["name"] = name or f"{target.get('name', 'target')}-calibrated"
    target["description"] = f"{target.get('description', '')} -- calibrated from {', '.join(files)} (base {shown})".strip(" -")
    return raw, cal


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_value(k)


def render_toml(doc: dict[str, Any], header: str = "") -> str:
    """A target document as TOML text (tables, arrays of tables, one level of nested tables as [a.b])."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]

    def table(path: str, body: dict[str, Any]) -> None:
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict)
                   and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))}
        if scalars or not any(isinstance(v, dict) for v in body.values()):
            if lines:
                lines.append("")
            lines.append(f"[{path}]")
            lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items())
        for k, v in body.items():
            if isinstance(v, dict):
                table(f"{path}.{_toml_key(k)}", v)

    for key, value in doc.items():
        if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            for entry in value:
                lines.append("")
                lines.append(f"[[{_toml_key(key)}]]")
                lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items())
        elif isinstance(value, dict):
            table(_toml_key(key), value)
        else:
            raise TypeError(f"top-level key {key!r} must be a table")
    return "\n".join(lines) + "\n"


def write_calibrated(paths: Sequence[str | Path], base: str | Path, output: str | Path, *,
                     name: str | None = None) -> tuple[Target, Calibration]:
    """Calibrate, write the target file, and load it back (the file validates as any target file does)."""
    doc, cal = calibrate(paths, base, name=name or Path(output).stem)
    header = (f"Calibrated by `portscope targets calibrate` from {', '.join(Path(p).name for p in paths)} "
              f"(base {cal.base}).\nFigures the traces gave say `measured:` in [sources]; the rest are the base's.")
    text = render_toml(doc, header)
    target = parse_target(tomllib.loads(text), str(output))
    Path(output).write_text(text, encoding="utf-8")
    return target, cal

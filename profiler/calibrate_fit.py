"""The fits of `portscope targets calibrate` (profiler/calibrate.py): measured calls grouped in buckets, and
``latency + max(flops / flops_per_ns, bytes / bytes_per_ns)`` fitted to the buckets' medians by least squares."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

OUTLIER_FACTOR = 3.0  # a call more than 3x off (above or below) its bucket's median is an outlier


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


def error_of(fit: Fit, samples: Sequence[Sample]) -> float:
    """A fit's error (count-weighted median relative error over the buckets) on other calls than its own."""
    f, b, y, w, _, _ = _buckets(samples)
    pred = np.array([fit.predict(x, z) for x, z in zip(f.tolist(), b.tolist(), strict=True)])
    return _error(pred, y, w)


def fit_transfer(samples: Sequence[Sample]) -> Fit:
    """Fit ``latency + bytes / bytes_per_ns`` to measured copies of one direction."""
    return fit_engine(samples, use_flops=False)


def usable_calls(samples: Sequence[Sample]) -> list[Sample]:
    """The calls an engine's fit uses: ATen operators when there are any (a vendor or autograd-node operator's
    sizes from its inputs say little about its work: an embedding table it indexes counts whole), and, when some
    calls have sizes, only those (a call whose sizes the trace does not record, such as a list of tensors, would
    pull the latency)."""
    aten = [s for s in samples if s.name.startswith("aten::")]
    chosen = aten or list(samples)
    sized = [s for s in chosen if s.flops > 0 or s.nbytes > 0]
    return sized or chosen

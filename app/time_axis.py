"""Human time axes: tick positions and labels in ns/µs/ms/s (or cycles) chosen by the zoom.

Plotly only knows SI suffixes ("1B" for a second of nanoseconds), so the server
places the ticks: a 1-2-5 step giving about `TARGET_TICKS` ticks over the
viewport, labelled in the largest unit that keeps them short. Ticks cover the
viewport and one viewport-width either side, so a pan shows ticks before the
server answers. A cycle axis with a clock rate is labelled in time.
"""

from __future__ import annotations

import dataclasses
import math

from portscope.ingest.schema import TimeUnit

TARGET_TICKS = 8
_TIME_UNITS = ((1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s"))
_CYCLE_UNITS = ((1.0, ""), (1e3, "k"), (1e6, "M"), (1e9, "G"))


@dataclasses.dataclass(frozen=True)
class TimeTicks:
    """Tick positions (in the axis's own unit), their labels, and the axis title."""

    values: list[float]
    labels: list[str]
    title: str

    def axis(self) -> dict[str, object]:
        """The Plotly axis properties that show these ticks."""
        return {"tickmode": "array", "tickvals": self.values, "ticktext": self.labels,
                "title": {"text": self.title} if self.title else None}


def nice_step(span: float, target: int = TARGET_TICKS) -> float:
    """The 1-2-5 step nearest (in ratio) to span/target (span > 0)."""
    raw = span / max(target, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    return min((m * power for m in (1.0, 2.0, 5.0, 10.0)), key=lambda step: abs(math.log(step / raw)))


def _unit_for(step: float, units: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """Time: the largest unit no more than ten steps long (a 200 ns step reads 0.2 µs, 50 ns stays ns).
    Cycles: the largest unit no longer than a step (100 cycles read 100, not 0.1k)."""
    reach = step * 10 if units is _TIME_UNITS else step
    chosen = units[0]
    for size, name in units:
        if size <= reach:
            chosen = (size, name)
    return chosen


def _label(value: float, size: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step / size) + 1e-9))
    text = f"{value / size:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("0", "-0") else text


def time_ticks(x0: float, x1: float, *, unit: TimeUnit = TimeUnit.NS, clock_hz: float | None = None,
               target: int = TARGET_TICKS) -> TimeTicks:
    """Ticks for the viewport [x0, x1] of an axis in `unit` (ns, or cycles converted by `clock_hz` when given).

    Far from zero (a step below 1/10,000 of the position) the labels are offsets from a round origin
    named in the title ("+2 µs" after "from 7.2 s"), so they stay short at any zoom.
    """
    scale = 1e9 / clock_hz if unit is TimeUnit.CYCLES and clock_hz else 1.0  # axis unit -> label unit
    as_time = unit is TimeUnit.NS or bool(clock_hz)
    lo, hi = x0 * scale, x1 * scale
    if not hi > lo:
        hi = lo + 1.0
    step = nice_step(hi - lo, target)
    span = hi - lo
    first = math.ceil((lo - span) / step)
    last = math.floor((hi + span) / step)
    units = _TIME_UNITS if as_time else _CYCLE_UNITS
    size, name = _unit_for(step, units)
    origin = 0.0
    if max(abs(lo), abs(hi)) > step * 1e4:  # deep zoom far from zero: offsets from a round origin
        coarse = step * 100
        origin = math.floor(lo / coarse) * coarse
        osize, oname = next(((z, n) for z, n in reversed(units) if z <= abs(origin)), units[0])
        origin_text = f"{_label(origin, osize, coarse)}{' ' if as_time else ''}{oname}".rstrip()
    values, labels = [], []
    for k in range(first, last + 1):
        v = k * step
        values.append(v / scale)
        text = _label(v - origin, size, step)
        if origin and not text.startswith("-"):
            text = "+" + text
        sep = " " if as_time else ""
        labels.append(f"{text}{sep}{name}".rstrip() if text != "0" or origin else "0")
    if as_time:
        title = "time" if unit is TimeUnit.NS else f"time (cycles at {clock_hz / 1e9:g} GHz)"
    else:
        title = "cycles"
    if origin:
        title += f" from {origin_text}" + ("" if as_time else " cycles")
    return TimeTicks(values, labels, title)


def parse_clock(text: str | None) -> float | None:
    """A clock rate typed by a person ("1.2 GHz", "800MHz", "1e9") in Hz; None when empty or not a positive rate."""
    if not text or not str(text).strip():
        return None
    raw = str(text).strip().lower().replace(" ", "")
    factor = 1.0
    for suffix, mult in (("ghz", 1e9), ("mhz", 1e6), ("khz", 1e3), ("hz", 1.0)):
        if raw.endswith(suffix):
            raw, factor = raw[: -len(suffix)], mult
            break
    else:
        factor = 1e9 if _is_number(raw) and float(raw) < 1e3 else 1.0  # a bare small number is GHz
    if not _is_number(raw) or float(raw) <= 0:
        return None
    return float(raw) * factor


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def fmt_duration(value: float | None, unit: TimeUnit = TimeUnit.NS) -> str:
    """A duration for a table cell: 3 significant digits in ns/µs/ms/s ("73.2 µs"), or cycles ("1.2M cycles")."""
    if value is None or value != value:
        return ""
    units = _TIME_UNITS if unit is TimeUnit.NS else _CYCLE_UNITS
    size, name = next(((z, n) for z, n in reversed(units) if z <= abs(value)), units[0])
    text = f"{value / size:.3g}" if size > 1 or unit is TimeUnit.CYCLES else f"{value:.0f}"
    return f"{text} {name}".rstrip() if unit is TimeUnit.NS else f"{text}{name} cycles"


def fmt_span(x0: float, x1: float, unit: TimeUnit = TimeUnit.NS) -> str:
    """A range for a heading, its ends precise enough to tell its length: "484.00 ms to 485.70 ms (1.7 ms)"."""
    span = max(x1 - x0, 1e-9)
    units = _TIME_UNITS if unit is TimeUnit.NS else _CYCLE_UNITS
    size, name = _unit_for(span / 10, units) if unit is TimeUnit.NS else next(
        ((z, n) for z, n in reversed(units) if z <= span), units[0])
    decimals = max(0, 2 - math.floor(math.log10(span / size)))
    suffix = f" {name}" if unit is TimeUnit.NS else f"{name} cycles"
    return f"{x0 / size:,.{decimals}f}{suffix} to {x1 / size:,.{decimals}f}{suffix} ({fmt_duration(span, unit)})"

"""Budgets for `portscope check`: named metrics of a region and limits on them."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from .catalog import Status
from .errors import UsageError
from .schema import Direction, SignalKind
from .summary import RegionSummary, format_bytes

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    description: str
    measure: Callable[[RegionSummary], float]
    is_bytes: bool = False


def _metrics() -> dict[str, Metric]:
    out: dict[str, Metric] = {}

    def add(metric: Metric) -> None:
        if metric.name in out:
            raise ValueError(f"duplicate metric {metric.name}")
        out[metric.name] = metric

    for kind in SignalKind:
        add(Metric(kind.short, f"count of {kind.value}", lambda s, k=kind: s.count(k)))
        if kind.is_bounce:
            add(Metric(kind.short + "_bytes", f"bytes of {kind.value}", lambda s, k=kind: s.bytes(k), True))
    for direction in Direction:
        add(
            Metric(
                f"{direction.value}_bytes",
                f"physical {direction.value} volume",
                lambda s, d=direction: s.transfer_bytes[d],
                True,
            )
        )
    bounces = [k for k in SignalKind if k.is_bounce]
    add(Metric("host_bounce", "count of all host bounces", lambda s: sum(s.count(k) for k in bounces)))
    add(Metric("host_bounce_bytes", "bytes of all host bounces", lambda s: sum(s.bytes(k) for k in bounces), True))
    add(Metric("wall_ms", "region wall time in milliseconds", lambda s: s.wall_ns / 1e6))
    add(Metric("ops", "operators dispatched", lambda s: s.op_count))
    return out


METRICS = _metrics()


@dataclasses.dataclass(frozen=True)
class Budget:
    metric: Metric
    limit: float


@dataclasses.dataclass(frozen=True)
class Violation:
    metric: str
    limit: float
    measured: float
    region: str
    is_bytes: bool
    error: str | None = None  # a region that raised: its figures are partial, whatever the budgets

    def line(self) -> str:
        if self.error is not None:
            return f"error: region {self.region} raised {self.error}"
        shown = format_bytes if self.is_bytes else (lambda v: f"{v:g}")
        return f"{self.metric}: limit {shown(self.limit)}, measured {shown(self.measured)}, region {self.region}"


def parse_size(text: str) -> float:
    """'1MB' -> 1e6, '2MiB' -> 2097152, '12' -> 12."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"{text!r} is not a number (sizes: 512, 64KB, 1MB, 2MiB, 1GB)")
    value, unit = float(m.group(1)), (m.group(2) or "").lower()
    base = 1024 if "i" in unit else 1000
    letter = unit[:1] if unit not in ("b", "") else ""
    scale = {"": 1, "k": base, "m": base**2, "g": base**3, "t": base**4}[letter]
    return value * scale


def parse_budgets(specs: list[str]) -> list[Budget]:
    """Parse NAME=LIMIT specs; unknown names list the valid ones."""
    budgets, problems = [], []
    for spec in specs:
        name, sep, value = spec.partition("=")
        name = name.strip()
        if not sep:
            problems.append(f"{spec!r} is not NAME=LIMIT")
            continue
        if name not in METRICS:
            problems.append(f"unknown signal {name!r}")
            continue
        try:
            budgets.append(Budget(METRICS[name], parse_size(value)))
        except UsageError as exc:
            problems.append(f"{name}: {exc}")
    if problems:
        valid = ", ".join(sorted(METRICS))
        raise UsageError("; ".join(problems) + f". Valid names: {valid}")
    return budgets


def check(summaries: list[RegionSummary], budgets: list[Budget]) -> list[Violation]:
    """Every budget exceeded by any region, and every region that raised (its verdict's status is error)."""
    out = []
    for summary in summaries:
        if summary.verdict_of().status is Status.ERROR:
            out.append(Violation("error", 0, 1, summary.name, False, error=summary.error))
        for budget in budgets:
            measured = budget.metric.measure(summary)
            if measured > budget.limit:
                out.append(Violation(budget.metric.name, budget.limit, measured, summary.name, budget.metric.is_bytes))
    return out

"""Numerics: the verdict rule for a port against a trusted reference, and tolerances for `check --numerics`."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from .builder import TableBuilder
from .errors import TraceFormatError, UsageError
from .trace import Trace

CLEARLY = 2.0  # a top-2 gap "clearly" exceeds max |diff| when it is at least this many times larger


class Verdict(enum.Enum):
    MATCH = "match"  # tokens agree
    NOISE = "mismatch within noise"  # tokens differ where the reference was nearly tied
    DEFECT = "defect"  # tokens differ although the reference was decisive


@dataclasses.dataclass(frozen=True)
class Comparison:
    """A port's logits against a reference's."""

    name: str  # e.g. "float16-vs-float32-reference", "eager-vs-compiled"
    greedy_match: bool
    argmax_match: bool  # first step
    max_abs_diff: float
    top2_gap: float  # the reference's, at the first step where tokens differ (else the first step)
    steps: int

    @property
    def verdict(self) -> Verdict:
        return verdict(self.greedy_match and self.argmax_match, self.top2_gap, self.max_abs_diff)

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"comparison": self.name, "metric": "greedy_match", "value": float(self.greedy_match), "text": None},
            {"comparison": self.name, "metric": "argmax_match", "value": float(self.argmax_match), "text": None},
            {"comparison": self.name, "metric": "max_abs_diff", "value": self.max_abs_diff, "text": None},
            {"comparison": self.name, "metric": "top2_gap", "value": self.top2_gap, "text": None},
            {"comparison": self.name, "metric": "steps", "value": float(self.steps), "text": None},
            {"comparison": self.name, "metric": "verdict", "value": None, "text": self.verdict.value},
        ]


def verdict(tokens_match: bool, top2_gap: float, max_abs_diff: float, *, clearly: float = CLEARLY) -> Verdict:
    """A token mismatch is a defect only when the reference's top-2 gap clearly exceeds max |diff|."""
    if tokens_match:
        return Verdict.MATCH
    return Verdict.DEFECT if top2_gap > clearly * max_abs_diff else Verdict.NOISE


def numerics_table(comparisons: list[Comparison]) -> pa.Table:
    b = TableBuilder("numerics")
    for c in comparisons:
        for row in c.rows():
            b.append(**row)
    return b.build()


def read_numerics(trace: Trace) -> dict[str, dict[str, float | str]]:
    """{comparison: {metric: value or text}} of a trace."""
    out: dict[str, dict[str, float | str]] = {}
    for row in trace["numerics"].to_pylist():
        value = row["value"] if row["value"] is not None else row["text"]
        out.setdefault(row["comparison"], {})[row["metric"]] = value
    return out


def tolerances_from(trace: Trace, *, margin: float = 1.5) -> dict[str, dict[str, float]]:
    """Limits recorded from a trusted run: matches must hold, differences may grow by `margin`."""
    limits: dict[str, dict[str, float]] = {}
    for name, metrics in read_numerics(trace).items():
        entry = {}
        if isinstance(metrics.get("max_abs_diff"), float):
            entry["max_abs_diff"] = float(metrics["max_abs_diff"]) * margin
        for key in ("greedy_match", "argmax_match"):
            if metrics.get(key) == 1.0:
                entry[f"min_{key}"] = 1.0
        limits[name] = entry
    if not limits:
        raise UsageError(f"{trace.path}: the trace has no numerics to record tolerances from (run `portscope validate`)")
    return limits


def check_numerics(trace: Trace, tolerances_path: str | Path) -> list[str]:
    """One line per numerics tolerance the trace violates."""
    try:
        limits = json.loads(Path(tolerances_path).read_text())
    except (OSError, ValueError) as exc:
        raise TraceFormatError(tolerances_path, f"cannot read tolerances: {exc}") from None
    if not isinstance(limits, dict):
        raise TraceFormatError(tolerances_path, "tolerances must be a JSON object {comparison: {limit: value}}")
    got = read_numerics(trace)
    problems = []
    for name, entry in limits.items():
        if name not in got:
            problems.append(f"numerics {name}: missing from the trace")
            continue
        for key, limit in (entry or {}).items():
            if key.startswith("min_"):
                measured = got[name].get(key.removeprefix("min_"))
                if not isinstance(measured, float) or measured < limit:
                    problems.append(f"numerics {name}.{key.removeprefix('min_')}: limit >= {limit:g}, measured {measured}")
            else:
                measured = got[name].get(key)
                if not isinstance(measured, float) or measured > limit:
                    problems.append(f"numerics {name}.{key}: limit {limit:g}, measured {measured}")
    return problems

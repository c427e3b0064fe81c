"""What a run or a region shows of its signals: what keeps it from clean, named and counted, and which of the
viewer's count columns its source could not record (then a 0 there would be a claim the trace cannot make)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from portscope.ingest.catalog import VERDICT_RULES, RegionFigures
from portscope.ingest.schema import Phase, SignalKind

__all__ = ["AI_CPU", "NOT_RECORDED", "report_seen", "seen_signals", "seen_text", "unrecorded_columns"]

NOT_RECORDED = "not recorded"
AI_CPU = "ai-cpu"  # the reason of a fallback an Ascend device ran on its AI CPU (ingest/rules_fallbacks.py)

_BY_SHORT = {k.short: k for k in SignalKind}
_NAMES: dict[SignalKind, tuple[str, str]] = {  # (one, several), in the words of the runs table's columns
    SignalKind.CPU_FALLBACK: ("fallback", "fallbacks"),
    SignalKind.RECOMPILE: ("warm recompile", "warm recompiles"),
    SignalKind.WARM_MISS: ("warm-cache miss", "warm-cache misses"),
    SignalKind.BOUNCE_DTYPE: ("host bounce", "host bounces"),
    SignalKind.BOUNCE_STRIDED: ("host bounce", "host bounces"),
    SignalKind.BOUNCE_OTHER: ("host bounce", "host bounces"),
    SignalKind.TRANSFER_D2H: ("d2h copy", "d2h copies"),
    SignalKind.SYNC: ("sync", "syncs"),
    SignalKind.COMPILE_GRAPH_BREAK: ("graph break", "graph breaks"),
    SignalKind.COMPILE_RECOMPILE: ("recompile", "recompiles"),
    SignalKind.STATIC_OVER_LENGTH: ("over-length input", "over-length inputs"),
}
# a count column of the runs and run tables -> words of a missing-signals entry's head that say it is not recorded
_COLUMN_WORDS = {"fallbacks": ("fallback",), "bounces": ("bounce",), "compiles": ("compile",), "d2h_bytes": ("transfer",)}


def seen_signals(figures: Iterable[RegionFigures]) -> dict[SignalKind, int]:
    """Counts of the signals that make regions not clean (the catalogue's verdict rules that match), summed over
    `figures`, in the rules' order."""
    seen: dict[SignalKind, int] = {}
    figures = list(figures)
    for rule in VERDICT_RULES:
        kind = _BY_SHORT.get(rule.name)
        for f in figures if kind is not None else ():
            if rule.match(f) is not None:
                seen[kind] = seen.get(kind, 0) + f.count(kind)
    return seen


def seen_text(seen: Mapping[SignalKind, int], *, ai_cpu_fallbacks: int = 0) -> str:
    """"7 AI-CPU fallbacks", "60 d2h copies · 67 syncs": what a not-clean verdict saw, instead of a label that reads
    as a fault. ai_cpu_fallbacks: how many of the fallbacks the device ran on its AI CPU."""
    counts: dict[tuple[str, str], int] = {}
    for kind, n in seen.items():
        names = _NAMES.get(kind, (kind.short, kind.short))
        if kind is SignalKind.CPU_FALLBACK and ai_cpu_fallbacks >= n:
            names = ("AI-CPU fallback", "AI-CPU fallbacks")
        counts[names] = counts.get(names, 0) + n
    parts = []
    for (one, several), n in counts.items():
        text = f"{n:,} {one if n == 1 else several}"
        if several == "fallbacks" and 0 < ai_cpu_fallbacks < n:
            text += f" ({ai_cpu_fallbacks:,} on the AI CPU)"
        parts.append(text)
    return " · ".join(parts)


def report_seen(report: Mapping[str, Any]) -> str:
    """`seen_text` of one region's report (`portscope report --json` data, as the store caches it)."""
    kinds = {s["signal"]: SignalKind(s["signal"]) for s in report["signals"]}
    phase = report.get("phase")
    figures = RegionFigures({kinds[s["signal"]]: int(s["count"]) for s in report["signals"]},
                            {kinds[s["signal"]]: int(s["bytes"]) for s in report["signals"]},
                            Phase(phase) if phase in {p.value for p in Phase} else Phase.NONE, report.get("error"))
    ai_cpu = sum(int(op["reasons"].get(AI_CPU, 0)) for op in report["operators"]
                 if op["signal"] == SignalKind.CPU_FALLBACK.value)
    return seen_text(seen_signals([figures]), ai_cpu_fallbacks=ai_cpu)


def unrecorded_columns(missing_signals: Iterable[str]) -> dict[str, str]:
    """{column: the missing-signals entry that says so} for the count columns (fallbacks, bounces, compiles,
    d2h_bytes) a run's source could not record. An entry names what is missing before its parenthesis
    ("host_bounce/* (Kineto records no tensor devices)"); fallbacks a reader inferred are recorded, as a guess."""
    out: dict[str, str] = {}
    for entry in missing_signals:
        head = entry.split("(", 1)[0].lower()
        if head.startswith("events of categories") or "inferred" in head:
            continue
        for column, words in _COLUMN_WORDS.items():
            if column not in out and any(w in head for w in words):
                out[column] = entry
    return out

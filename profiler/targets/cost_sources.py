"""Where a target's cost figures come from: a datasheet, a measurement on a named device, or an assumption.

A target file names its figures' sources in a ``[sources]`` table keyed by the figure's path::

    [sources]
    "cost.dispatch_ns" = "measured: RBLN-CA12, torch-rbln 0.9 (bench/dispatch_bench.py)"
    "engines.dma_h2d.bytes_per_ns" = "datasheet: PCIe 4.0 x16"
    "cost.compile_ns" = "assumed"

A figure the table does not name is assumed; an assumed figure may say why (``"assumed: the traces hold no
synchronize call"``). An engine's per-kind figures are named ``engines.<name>.kinds.<kind>.<figure>``. A predicted time whose critical path uses an assumed
figure says so (profiler/schedule.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from portscope.ingest.catalog import SourceKind

COST_KEYS = ("dispatch_ns", "compile_ns", "host_flops_per_ns", "sync_ns")
ENGINE_COST_KEYS = ("flops_per_ns", "bytes_per_ns", "latency_ns")


@dataclasses.dataclass(frozen=True)
class CostSource:
    """One figure's source: its kind and, for a datasheet or a measurement, which document or device."""

    kind: SourceKind
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.detail}" if self.detail else self.kind.value


ASSUMED = CostSource(SourceKind.ASSUMED)


def figure_names(engines: Iterable[str] | Mapping[str, Iterable[str]]) -> list[str]:
    """Every cost figure a target with these engines has: cost.*, engines.<name>.* and, for engines given with
    their operator kinds (name -> kinds), engines.<name>.kinds.<kind>.*."""
    kinds = engines if isinstance(engines, Mapping) else {e: () for e in engines}
    out = [f"cost.{k}" for k in COST_KEYS]
    for e, its_kinds in kinds.items():
        out += [f"engines.{e}.{k}" for k in ENGINE_COST_KEYS]
        out += [f"engines.{e}.kinds.{kind}.{k}" for kind in its_kinds for k in ENGINE_COST_KEYS]
    return out


def used_sources(target: Any) -> dict[str, str]:
    """figure path -> source text of every cost figure the target sets (non-zero): what a predicted run records."""
    figures = {f"cost.{k}": getattr(target, k) for k in COST_KEYS}
    for e in target.engines:
        figures.update({f"engines.{e.name}.{k}": getattr(e, k) for k in ENGINE_COST_KEYS})
        figures.update({f"engines.{e.name}.kinds.{kind}.{k}": getattr(f, k) for kind, f in e.kinds for k in ENGINE_COST_KEYS})
    return {f: str(target.source_of(f)) for f, value in figures.items() if value}


def parse_sources(raw: Any, engines: Iterable[str] | Mapping[str, Iterable[str]],
                  problems: list[str]) -> tuple[tuple[str, CostSource], ...]:
    """The [sources] table: figure path -> "datasheet: <document>", "measured: <device>" or "assumed"."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        problems.append("[sources] must be a table of figure = \"datasheet: ...\" / \"measured: ...\" / \"assumed\"")
        return ()
    known = figure_names(engines)
    out = []
    for figure, text in raw.items():
        if figure not in known:
            problems.append(f"sources: unknown cost figure {figure!r} (known: {', '.join(known)})")
            continue
        if not isinstance(text, str):
            problems.append(f"sources.{figure!r} must be a string, got {type(text).__name__}")
            continue
        head, _, detail = text.partition(":")
        try:
            kind = SourceKind(head.strip())
        except ValueError:
            problems.append(f"sources.{figure!r}: {text!r} must start with datasheet:, measured: or assumed")
            continue
        detail = detail.strip()
        if kind is not SourceKind.ASSUMED and not detail:
            what = "the document" if kind is SourceKind.DATASHEET else "the device it was measured on"
            problems.append(f"sources.{figure!r}: {kind.value} must name {what} ({kind.value}: ...)")
            continue
        out.append((figure, CostSource(kind, detail)))
    return tuple(sorted(out))

"""Schedule summaries: per region, what each engine did (busy, utilisation), the critical path, idle gaps by cause.

A pure query on a trace's `engine_slices` (measured or predicted); returns
dataclasses and Arrow tables, draws nothing.

* busy: the union of an engine's slices (overlaps count once).
* idle gap: the time an engine waited before a slice (from the end of its
  previous slice, or from the region's first slice), attributed to the slice's
  `waited_on` ("unknown" when the slice does not say).
* critical path: walking back from the slice that ends last, each step goes to
  the slice whose end released it: on another engine when the slice says what
  it waited on, else the same engine's previous slice. Its length is the span
  it covers; `critical_by_engine` says where that time went (the gaps it could
  not attribute are "idle").
"""

from __future__ import annotations

import bisect
import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .catalog import SourceKind
from .columns import memory_slices
from .trace import Trace

UNKNOWN = "unknown"
# what a slice waited on -> the engine kinds that release it
RELEASED_BY = {
    "dispatch": ("dispatch", "host"),
    "compile": ("compiler",),
    "fallback": ("host",),
    "transfer": ("dma_h2d", "dma_d2h", "dma_d2d"),
    "dependency": ("matrix", "vector", "stream", "dma_d2h", "dma_h2d", "other", "collective"),
}


@dataclasses.dataclass
class EngineUse:
    engine: str
    engine_kind: str
    slices: int
    busy: int
    utilisation: float  # busy / the region's schedule span
    idle_by_cause: dict[str, int]


@dataclasses.dataclass
class ScheduleSummary:
    """One region's schedule, in the trace's time unit."""

    region_id: int | None
    name: str
    start: int
    end: int
    engines: list[EngineUse]
    critical_path: int
    critical_by_engine: dict[str, int]
    # predicted schedules: the cost figures on the critical path that the target only assumed
    assumed: list[str] = dataclasses.field(default_factory=list)
    # predicted schedules: a measured figure times the critical path and no assumed one (a calibrated target)
    measured: bool = False
    # rows of the summarized slices on the critical path, from the slice that ends last back to the first
    critical_rows: list[int] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        """Schedule span: from the first slice's start (or the origin) to the last slice's end."""
        return self.end - self.start

    def idle_by_cause(self) -> dict[str, int]:
        """Idle time of every engine but the host thread's lanes, summed by cause."""
        out: dict[str, int] = {}
        for e in self.engines:
            if e.engine_kind in ("host", "dispatch", "compiler"):
                continue
            for cause, ns in e.idle_by_cause.items():
                out[cause] = out.get(cause, 0) + ns
        return out

    def engines_table(self) -> pa.Table:
        """One row per engine: engine, engine_kind, slices, busy, utilisation, idle_<cause>..."""
        causes = sorted({c for e in self.engines for c in e.idle_by_cause})
        cols: dict[str, list] = {"engine": [], "engine_kind": [], "slices": [], "busy": [], "utilisation": []}
        cols.update({f"idle_{c}": [] for c in causes})
        for e in self.engines:
            for key in ("engine", "engine_kind", "slices", "busy", "utilisation"):
                cols[key].append(getattr(e, key))
            for c in causes:
                cols[f"idle_{c}"].append(e.idle_by_cause.get(c, 0))
        return pa.table(cols)


def string_values(table: pa.Table, name: str) -> list:
    col = table.column(name)
    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    return col.to_pylist()


def _codes(table: pa.Table, name: str) -> tuple[np.ndarray, list]:
    """Codes of a string column (dictionary-encoded or plain) into its distinct values; a null is -1."""
    col = table.column(name)
    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    encoded = pc.dictionary_encode(col.combine_chunks())
    return pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64), encoded.dictionary.to_pylist()


def summarize_slices(table: pa.Table, *, origin: int | None = None, name: str = "",
                     region_id: int | None = None) -> ScheduleSummary:
    """Summary of engine slices (columns engine, engine_kind, start, dur, waited_on)."""
    if table.num_rows == 0:
        t0 = origin or 0
        return ScheduleSummary(region_id, name, t0, t0, [], 0, {})
    start = table.column("start").to_numpy().astype(np.int64)
    dur = table.column("dur").to_numpy().astype(np.int64)
    stop = start + dur
    engine_code, engine_names = _codes(table, "engine")
    kinds = string_values(table, "engine_kind")
    has_waited = "waited_on" in table.column_names
    waited = string_values(table, "waited_on") if has_waited else [None] * table.num_rows
    waited_code, waited_names = _codes(table, "waited_on") if has_waited else (np.full(table.num_rows, -1, np.int64), [])
    t0 = int(start.min()) if origin is None else min(int(origin), int(start.min()))
    t1 = int(stop.max())
    span = max(t1 - t0, 1)
    used, first_row, lane = np.unique(engine_code, return_index=True, return_inverse=True)  # integers: fast
    names = [engine_names[c] for c in used.tolist()]
    order = np.lexsort((start, lane))
    engines: list[EngineUse] = []
    bounds = np.searchsorted(lane[order], np.arange(len(names) + 1))
    for k, eng in enumerate(names):
        idx = order[bounds[k]:bounds[k + 1]]
        s, e = start[idx], stop[idx]
        prev_end = np.concatenate(([t0], np.maximum.accumulate(e)[:-1]))
        busy = int(np.sum(np.maximum(e - np.maximum(s, prev_end), 0)))
        gaps = np.maximum(s - prev_end, 0)
        idle = _idle_by_cause(gaps, waited_code[idx], waited_names)
        engines.append(EngineUse(eng, kinds[int(first_row[k])], len(idx), busy, busy / span, idle))
    engines.sort(key=lambda u: (ENGINE_KIND_ORDER.get(u.engine_kind, 99), u.engine))
    engine = np.asarray(names, dtype=object)[lane].tolist()
    length, by_engine, path = _critical_path(start, stop, engine, kinds, waited, t0)
    return ScheduleSummary(region_id, name, t0, t1, engines, length, by_engine, critical_rows=path)


def _idle_by_cause(gaps: np.ndarray, cause_code: np.ndarray, cause_names: list) -> dict[str, int]:
    """Gap time summed by what the slice after each gap waited on (null or empty: unknown), causes in order of first gap."""
    hit = np.flatnonzero(gaps)
    idle: dict[str, int] = {}
    if not len(hit):
        return idle
    code = cause_code[hit] + 1  # 0: null
    sums = np.zeros(len(cause_names) + 1, np.int64)
    np.add.at(sums, code, gaps[hit])
    present, first = np.unique(code, return_index=True)
    for c in present[np.argsort(first, kind="stable")].tolist():
        cause = (cause_names[c - 1] if c else None) or UNKNOWN
        idle[cause] = idle.get(cause, 0) + int(sums[c])
    return idle


ENGINE_KIND_ORDER = {k: i for i, k in enumerate(
    ["host", "dispatch", "compiler", "dma_h2d", "dma_d2h", "dma_d2d", "matrix", "vector", "stream", "collective", "other"])}


def _critical_path(start_ns: np.ndarray, stop_ns: np.ndarray, engine: list[str], kinds: list[str], waited: list,
                   t0: int) -> tuple[int, dict[str, int], list[int]]:
    by_end = np.argsort(stop_ns, kind="stable")
    order, ends = by_end.tolist(), stop_ns[by_end].tolist()
    last = np.flatnonzero(stop_ns == stop_ns.max())
    cur = int(last[np.argmin(start_ns[last])])  # the slice that ends last (the earliest-starting of a tie)
    start, stop = start_ns.tolist(), stop_ns.tolist()
    by_engine: dict[str, int] = {}
    t_end = stop[cur]
    seen = 0
    path: list[int] = []
    while True:
        path.append(cur)
        by_engine[engine[cur]] = by_engine.get(engine[cur], 0) + stop[cur] - start[cur]
        t = start[cur]
        seen += 1
        if t <= t0 or seen > len(start):
            break
        hi = bisect.bisect_right(ends, t)
        if hi == 0:
            by_engine["idle"] = by_engine.get("idle", 0) + t - t0
            break
        lo = bisect.bisect_left(ends, ends[hi - 1])
        candidates = [order[p] for p in range(lo, hi) if order[p] != cur]
        if not candidates:
            break
        if ends[hi - 1] < t:
            by_engine["idle"] = by_engine.get("idle", 0) + t - ends[hi - 1]
        cur = _pick(candidates, engine[cur], kinds, waited[cur], engine)
    return t_end - t0, by_engine, path


def _pick(candidates: list[int], eng: str, kinds: list[str], cause: str | None, engine: list[str]) -> int:
    if cause is None:
        same = [c for c in candidates if engine[c] == eng]
        if same:
            return same[-1]
    wanted = RELEASED_BY.get(cause or "", ())
    for c in reversed(candidates):
        if kinds[c] in wanted and engine[c] != eng:
            return c
    others = [c for c in candidates if engine[c] != eng]
    return (others or candidates)[-1]


# engine kind -> the target's cost figures that time a slice on it (other engines: engines.<name>.*)
_KIND_FIGURES = {
    "dispatch": ("cost.dispatch_ns",),
    "compiler": ("cost.compile_ns",),
    "host": ("cost.dispatch_ns", "cost.host_flops_per_ns", "cost.sync_ns"),
}


def assumed_on_critical_path(summary: ScheduleSummary, sources: dict[str, str]) -> list[str]:
    """The cost figures timing the critical path's engines whose source is "assumed".

    sources: figure path -> source text, as a predicted run records them (run_info.extra["cost_sources"],
    only the figures the target sets); a figure missing from it is not used.
    """
    return [f for f in critical_path_figures(summary, sources) if SourceKind.of_text(sources[f]) is SourceKind.ASSUMED]


def critical_path_figures(summary: ScheduleSummary, sources: dict[str, str]) -> list[str]:
    """The cost figures (of those `sources` names) that time the critical path's engines, sorted."""
    kinds = {e.engine: e.engine_kind for e in summary.engines}
    out: list[str] = []
    for engine, ns in summary.critical_by_engine.items():
        if not ns or engine not in kinds:
            continue
        figures = _KIND_FIGURES.get(kinds[engine]) or tuple(f for f in sources if f.startswith(f"engines.{engine}."))
        out += [f for f in figures if f in sources and f not in out]
    return sorted(out)


def measured_critical_path(summary: ScheduleSummary, sources: dict[str, str]) -> bool:
    """Whether a calibrated target timed the critical path: a measured figure on it and no assumed one."""
    kinds = {SourceKind.of_text(sources[f]) for f in critical_path_figures(summary, sources)}
    return SourceKind.MEASURED in kinds and SourceKind.ASSUMED not in kinds


def assumed_by_region(trace: Trace) -> dict[int, list[str]]:
    """region id -> the assumed cost figures on its schedule's critical path (regions of a predicted run that
    recorded its figures' sources; empty lists left out)."""
    return critical_path_sources(trace)[0]


def measured_by_region(trace: Trace) -> set[int]:
    """Regions of a predicted run whose schedule's critical path a measured figure times, and no assumed one
    (a calibrated target: `portscope targets calibrate`)."""
    return critical_path_sources(trace)[1]


def critical_path_sources(trace: Trace) -> tuple[dict[int, list[str]], set[int]]:
    """(`assumed_by_region`, `measured_by_region`) from one pass over the regions' schedules."""
    if not isinstance(trace.run_info.extra.get("cost_sources"), dict):
        return {}, set()
    summaries = [s for s in schedule_summaries(trace) if s.region_id is not None]
    return ({s.region_id: s.assumed for s in summaries if s.assumed},
            {s.region_id for s in summaries if s.measured})


def cost_sources_text(extra: dict) -> str | None:
    """How a predicted run's cost figures are sourced, e.g. "2 measured, 1 datasheet, 10 assumed" (None: not recorded)."""
    sources = extra.get("cost_sources")
    if not isinstance(sources, dict) or not sources:
        return None
    kinds = [SourceKind.of_text(v) for v in sources.values()]
    order = (SourceKind.MEASURED, SourceKind.DATASHEET, SourceKind.ASSUMED)
    return ", ".join(f"{kinds.count(k)} {k.value}" for k in order if k in kinds)


def region_slices(trace: Trace, region_id: int) -> pa.Table:
    """The engine slices of one region (its own; nested regions have their own), memory lanes left out: they are
    levels of memory, not work an engine did."""
    slices = trace["engine_slices"]
    mask = pc.fill_null(pc.equal(slices.column("region_id"), pa.scalar(region_id, pa.int32())), False)
    return slices.filter(pc.and_(mask, pa.array(~memory_slices(slices.column("engine")))))


def schedule_summary(trace: Trace, region_id: int, table: pa.Table | None = None) -> ScheduleSummary:
    """The schedule summary of one region (its own engine slices; nested regions have their own).

    table: the region's slices when the caller already has them (`region_slices`).
    """
    table = region_slices(trace, region_id) if table is None else table
    regions = trace["regions"]
    ids = regions.column("region_id").to_pylist()
    name = regions.column("name").to_pylist()[ids.index(region_id)] if region_id in ids else ""
    summary = summarize_slices(table, name=name, region_id=region_id)
    sources = trace.run_info.extra.get("cost_sources")
    if isinstance(sources, dict):
        named = {str(k): str(v) for k, v in sources.items()}
        summary.assumed = assumed_on_critical_path(summary, named)
        summary.measured = measured_critical_path(summary, named)
    return summary


def schedule_summaries(trace: Trace, region: str | None = None) -> list[ScheduleSummary]:
    """Summaries of every region that has engine slices (optionally only regions with this name)."""
    slices = trace["engine_slices"]
    present = set(slices.column("region_id").drop_null().to_pylist()) if slices.num_rows else set()
    regions = trace["regions"]
    out = []
    for rid, name in zip(regions.column("region_id").to_pylist(), regions.column("name").to_pylist(), strict=True):
        if rid in present and (region is None or name == region):
            out.append(schedule_summary(trace, rid))
    return out


def format_time(value: float, unit: str) -> str:
    if unit != "ns":
        return f"{value:,.0f} {unit}"
    for scale, suffix in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {suffix}"
    return f"{value:.0f} ns"


def format_schedule(summaries: list[ScheduleSummary], *, unit: str = "ns", modes: dict[int, tuple[str, str]] | None = None) -> str:
    """Text: per region the total, the critical path by engine, and one line per engine.

    modes: region_id -> (mode, phase); regions compiled vs eager in the same phase get a ratio line.
    """
    lines: list[str] = []
    for s in summaries:
        lines.append(f"region {s.name!r}: schedule {format_time(s.total, unit)}, critical path {format_time(s.critical_path, unit)}"
                     + (" (assumed)" if s.assumed else " (measured)" if s.measured else ""))
        if s.assumed:
            lines.append("  assumed, not measured nor from a datasheet, on the critical path: " + ", ".join(s.assumed))
        if s.critical_path:
            parts = sorted(s.critical_by_engine.items(), key=lambda kv: -kv[1])
            lines.append("  critical path: " + ", ".join(f"{e} {100 * ns / s.critical_path:.1f}%" for e, ns in parts if ns))
        lines.append(f"  {'engine':<16} {'kind':<10} {'slices':>8} {'busy':>10} {'util':>7}  idle waiting on")
        for e in s.engines:
            idle = ", ".join(f"{c} {format_time(ns, unit)}" for c, ns in sorted(e.idle_by_cause.items(), key=lambda kv: -kv[1]))
            lines.append(f"  {e.engine:<16} {e.engine_kind:<10} {e.slices:>8} {format_time(e.busy, unit):>10} "
                         f"{100 * e.utilisation:>6.1f}%  {idle or '-'}")
        lines.append("")
    if modes:
        by_phase: dict[str, dict[str, ScheduleSummary]] = {}
        for s in summaries:
            mode, phase = modes.get(s.region_id, ("unknown", "none"))
            by_phase.setdefault(phase, {}).setdefault(mode, s)
        for phase, pair in by_phase.items():
            if "eager" in pair and "compiled" in pair and pair["compiled"].total:
                e, c = pair["eager"], pair["compiled"]
                lines.append(f"eager/compiled ({phase}): {e.total / c.total:.2f}x "
                             f"({e.name!r} {format_time(e.total, unit)} vs {c.name!r} {format_time(c.total, unit)})")
    return "\n".join(lines) + "\n"


__all__ = ["ENGINE_KIND_ORDER", "RELEASED_BY", "EngineUse", "ScheduleSummary", "assumed_by_region", "assumed_on_critical_path",
           "cost_sources_text", "critical_path_figures", "critical_path_sources", "measured_by_region", "measured_critical_path", "format_schedule", "format_time", "region_slices", "schedule_summaries", "schedule_summary",
           "string_values", "summarize_slices"]

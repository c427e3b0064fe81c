"""Two schedules compared: a baseline region A and a changed region B, engine by engine.

The tuning loop users follow (BRIEF.md, "Engine schedules"): record a baseline,
change one thing, record again, compare the same artifact. This compares the
schedule summaries of two regions (`schedule_summary.py`: busy = the union of an
engine's slices, idle = the gaps before its slices by what they waited on,
critical path = the walk back from the slice that ends last) and says where B
got shorter or longer:

* engines: busy time A, B, Δ and % per engine (matched by name; an engine on one
  side only counts 0 on the other), its idle time and its time on the critical path;
* critical path: its length A and B, and the (engine, slice name) pairs on it with
  their time on the path in A and B, largest change first -- what makes the difference;
* idle: the engines' waiting gaps summed by cause (`waited_on`), A and B.

Both schedules must be in one time unit. A pure query: returns dataclasses and
Arrow tables, draws nothing.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import UsageError
from .schedule_summary import (
    ENGINE_KIND_ORDER,
    ScheduleSummary,
    format_time,
    region_slices,
    schedule_summary,
    string_values,
)
from .trace import Trace

IDLE = "idle"  # the critical path's time not on any slice (what schedule_summary calls it)


class Change(enum.Enum):
    """How a row of B compares with A."""

    ADDED = "added"  # only in B
    REMOVED = "removed"  # only in A
    LONGER = "longer"
    SHORTER = "shorter"
    SAME = "same"


def change_of(a: int, b: int) -> Change:
    if a == b:
        return Change.SAME
    if not a:
        return Change.ADDED
    if not b:
        return Change.REMOVED
    return Change.LONGER if b > a else Change.SHORTER


def percent(a: int, b: int) -> float | None:
    """(B − A) / A in percent; None when A is 0 (nothing to compare with)."""
    return 100.0 * (b - a) / a if a else None


@dataclasses.dataclass(frozen=True)
class EngineDelta:
    """One engine in A and B (times in the schedules' unit)."""

    engine: str
    engine_kind: str
    busy_a: int
    busy_b: int
    idle_a: int
    idle_b: int
    critical_a: int  # time of its slices on the critical path
    critical_b: int
    slices_a: int
    slices_b: int
    engine_b: str | None = None  # B's name for it when paired with another name (see `pair_engines`)

    @property
    def delta(self) -> int:
        return self.busy_b - self.busy_a

    @property
    def percent(self) -> float | None:
        return percent(self.busy_a, self.busy_b)


@dataclasses.dataclass(frozen=True)
class PathDelta:
    """Time one (engine, slice name) spends on the critical path in A and in B (`engine` "idle": the path's gaps)."""

    engine: str
    name: str
    time_a: int
    time_b: int
    count_a: int  # its slices on the path
    count_b: int

    @property
    def delta(self) -> int:
        return self.time_b - self.time_a

    @property
    def change(self) -> Change:
        return change_of(self.time_a, self.time_b)


@dataclasses.dataclass(frozen=True)
class CauseDelta:
    """Idle time of the device engines waiting on one cause (host lanes left out, as `idle_by_cause`)."""

    cause: str
    idle_a: int
    idle_b: int

    @property
    def delta(self) -> int:
        return self.idle_b - self.idle_a


@dataclasses.dataclass(frozen=True)
class ScheduleDiff:
    """Region A's schedule against region B's, in `unit` (ns or cycles)."""

    a: ScheduleSummary
    b: ScheduleSummary
    unit: str
    engines: list[EngineDelta]
    critical_path: list[PathDelta]  # largest |Δ| first
    idle: list[CauseDelta]  # largest |Δ| first

    def engines_table(self) -> pa.Table:
        """engine, engine_kind, busy_a, busy_b, delta, percent (null: A is 0), idle_a, idle_b, critical_a, critical_b,
        slices_a, slices_b, engine_b (B's name when paired with another, else null); one row per engine, in
        engine-kind order."""
        names = ["engine", "engine_kind", "busy_a", "busy_b", "delta", "percent", "idle_a", "idle_b",
                 "critical_a", "critical_b", "slices_a", "slices_b", "engine_b"]
        return pa.table({n: [getattr(e, n) for e in self.engines] for n in names},
                        schema=_schema(names, float_columns={"percent"}))

    def critical_table(self) -> pa.Table:
        """change, engine, name, time_a, time_b, delta, count_a, count_b: the critical path's parts, largest |Δ| first."""
        names = ["change", "engine", "name", "time_a", "time_b", "delta", "count_a", "count_b"]
        cols = {n: [getattr(p, n) for p in self.critical_path] for n in names}
        cols["change"] = [c.value for c in cols["change"]]
        return pa.table(cols, schema=_schema(names))

    def idle_table(self) -> pa.Table:
        """cause, idle_a, idle_b, delta: the device engines' waiting gaps by cause, largest |Δ| first."""
        names = ["cause", "idle_a", "idle_b", "delta"]
        return pa.table({n: [getattr(c, n) for c in self.idle] for n in names}, schema=_schema(names))

    def headline(self) -> dict[str, tuple[int, int]]:
        """The two lengths that matter, (A, B): the schedule span and the critical path."""
        return {"schedule": (self.a.total, self.b.total), "critical path": (self.a.critical_path, self.b.critical_path)}


_TEXT_COLUMNS = {"engine", "engine_kind", "name", "change", "cause", "engine_b"}


def _schema(names: list[str], *, float_columns: frozenset[str] | set[str] = frozenset()) -> pa.Schema:
    return pa.schema([pa.field(n, pa.string() if n in _TEXT_COLUMNS else pa.float64() if n in float_columns else pa.int64())
                      for n in names])


def pair_engines(a: ScheduleSummary, b: ScheduleSummary) -> dict[str, str]:
    """B's engine name -> A's for engines named differently on each side but surely the same: of one engine kind, the
    only one of that kind found in A alone and the only one found in B alone (a measured run's host thread is named by
    its thread id, which changes from run to run). Anything less certain stays unpaired."""
    names_a, names_b = {e.engine for e in a.engines}, {e.engine for e in b.engines}
    only_a: dict[str, list[str]] = {}
    only_b: dict[str, list[str]] = {}
    for e in a.engines:
        if e.engine not in names_b:
            only_a.setdefault(e.engine_kind, []).append(e.engine)
    for e in b.engines:
        if e.engine not in names_a:
            only_b.setdefault(e.engine_kind, []).append(e.engine)
    return {only_b[k][0]: only_a[k][0] for k in only_a if len(only_a[k]) == 1 and len(only_b.get(k, [])) == 1}


def _path_parts(summary: ScheduleSummary, slices: pa.Table, rename: dict[str, str] | None = None,
                ) -> dict[tuple[str, str], tuple[int, int]]:
    """(engine, name) -> (time on the critical path, slices) of one schedule; its gaps as ("idle", "")."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    if not summary.critical_rows:
        return out
    rows = pa.array(summary.critical_rows, pa.int64())
    taken = slices.select(["engine", "name", "dur"]).take(rows)
    for engine, name, dur in zip(string_values(taken, "engine"), string_values(taken, "name"), taken.column("dur").to_pylist(),
                                 strict=True):
        engine = (rename or {}).get(engine, engine)
        time, count = out.get((engine, name), (0, 0))
        out[(engine, name)] = (time + int(dur), count + 1)
    gaps = summary.critical_by_engine.get(IDLE, 0)
    if gaps:
        out[(IDLE, "")] = (gaps, 0)
    return out


def diff_summaries(a: ScheduleSummary, b: ScheduleSummary, slices_a: pa.Table, slices_b: pa.Table, *,
                   unit: str = "ns") -> ScheduleDiff:
    """Compare two schedule summaries (slices_*: the tables they summarize, for the names on the critical path).

    Engines match by name, and an engine that `pair_engines` pairs goes by A's name (B's in `engine_b`)."""
    rename = pair_engines(a, b)
    as_a = {v: k for k, v in rename.items()}  # A's name -> B's name of a paired engine
    use_a = {e.engine: e for e in a.engines}
    use_b = {rename.get(e.engine, e.engine): e for e in b.engines}
    critical_b = {rename.get(k, k): v for k, v in b.critical_by_engine.items()}
    kinds = {e.engine: e.engine_kind for e in a.engines} | {rename.get(e.engine, e.engine): e.engine_kind for e in b.engines}
    order = sorted(kinds, key=lambda name: (ENGINE_KIND_ORDER.get(kinds[name], 99), name))  # as each summary orders them
    engines = []
    for name in order:
        ea, eb = use_a.get(name), use_b.get(name)
        engines.append(EngineDelta(
            engine=name, engine_kind=kinds[name],
            busy_a=ea.busy if ea else 0, busy_b=eb.busy if eb else 0,
            idle_a=sum(ea.idle_by_cause.values()) if ea else 0, idle_b=sum(eb.idle_by_cause.values()) if eb else 0,
            critical_a=a.critical_by_engine.get(name, 0), critical_b=critical_b.get(name, 0),
            slices_a=ea.slices if ea else 0, slices_b=eb.slices if eb else 0, engine_b=as_a.get(name),
        ))  # fmt: skip
    parts_a, parts_b = _path_parts(a, slices_a), _path_parts(b, slices_b, rename)
    path = [PathDelta(engine, name, *_pair(parts_a.get(key), parts_b.get(key)))
            for key in dict.fromkeys([*parts_a, *parts_b]) for engine, name in [key]]
    path.sort(key=lambda p: (-abs(p.delta), -max(p.time_a, p.time_b), p.engine, p.name))
    idle_a, idle_b = a.idle_by_cause(), b.idle_by_cause()
    idle = [CauseDelta(c, idle_a.get(c, 0), idle_b.get(c, 0)) for c in dict.fromkeys([*idle_a, *idle_b])]
    idle.sort(key=lambda c: (-abs(c.delta), c.cause))
    return ScheduleDiff(a, b, unit, engines, path, idle)


def _pair(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int, int, int]:
    ta, ca = a or (0, 0)
    tb, cb = b or (0, 0)
    return ta, tb, ca, cb


def has_schedule(trace: Trace, region_id: int) -> bool:
    """Whether a region has engine slices of its own."""
    slices = trace["engine_slices"]
    if not slices.num_rows:
        return False
    return bool(pc.any(pc.equal(slices.column("region_id"), pa.scalar(region_id, pa.int32()))).as_py())


def diff_schedules(trace_a: Trace, region_a: int, trace_b: Trace, region_b: int) -> ScheduleDiff:
    """Region A of trace A against region B of trace B (may be the same trace). Raises UsageError when the two
    schedules are in different time units (ns against cycles) or a region has no schedule."""
    unit_a, unit_b = trace_a.run_info.time_unit.value, trace_b.run_info.time_unit.value
    problems = [f"{side}: region {rid} has no engine slices (no schedule to compare)"
                for side, trace, rid in (("A", trace_a, region_a), ("B", trace_b, region_b)) if not has_schedule(trace, rid)]
    if unit_a != unit_b:
        problems.append(f"A's schedule is in {unit_a}, B's in {unit_b}: compare schedules of one time unit")
    if problems:
        raise UsageError("; ".join(problems))
    slices_a, slices_b = region_slices(trace_a, region_a), region_slices(trace_b, region_b)
    return diff_summaries(schedule_summary(trace_a, region_a, slices_a), schedule_summary(trace_b, region_b, slices_b),
                          slices_a, slices_b, unit=unit_a)


def aligned_slices(trace: Trace, region_id: int) -> pa.Table:
    """A region's engine slices with `start` counted from its schedule's first slice (the region starts at 0), so two
    regions' timelines share one relative axis."""
    table = region_slices(trace, region_id)
    if not table.num_rows:
        return table
    start = table.column("start")
    shifted = pc.subtract(start, pa.scalar(int(np.min(start.to_numpy())), pa.int64()))
    return table.set_column(table.column_names.index("start"), "start", shifted)


def region_slice_rows(trace: Trace, region_id: int) -> np.ndarray:
    """Rows of the trace's engine_slices that `region_slices` / `aligned_slices` hold, in their order (row k of those
    tables is engine_slices row result[k])."""
    slices = trace["engine_slices"]
    mask = pc.fill_null(pc.equal(slices.column("region_id"), pa.scalar(region_id, pa.int32())), False)
    return np.flatnonzero(mask.to_numpy(zero_copy_only=False))


def _signed(value: float, unit: str) -> str:
    return ("+" if value > 0 else "-" if value < 0 else "") + format_time(abs(value), unit)


def _pct(value: float | None) -> str:
    return "new" if value is None else f"{value:+.1f}%"


def verdict(diff: ScheduleDiff) -> str:
    """One sentence: how B's schedule and critical path compare with A's, and the engines that make the difference."""
    u = diff.unit
    parts = []
    for what, (a, b) in diff.headline().items():
        parts.append(f"{what} {format_time(a, u)} -> {format_time(b, u)} ({_signed(b - a, u)}, {_pct(percent(a, b))})")
    by_engine: dict[str, int] = {}
    for p in diff.critical_path:
        by_engine[p.engine] = by_engine.get(p.engine, 0) + p.delta
    moved = sorted(((e, d) for e, d in by_engine.items() if d), key=lambda kv: (-abs(kv[1]), kv[0]))[:3]
    text = "B: " + "; ".join(parts)
    if moved:
        text += "; on the critical path: " + ", ".join(f"{e} {_signed(d, u)}" for e, d in moved)
    return text


def format_schedule_diff(diff: ScheduleDiff, *, top: int = 10) -> str:
    """The comparison as text: the verdict, one line per engine, the critical path's parts that changed, idle by cause."""
    u = diff.unit
    lines = ["schedules: " + verdict(diff), ""]
    lines.append(f"  {'engine':<16} {'kind':<10} {'busy A':>10} {'busy B':>10} {'Δ':>11} {'%':>8} "
                 f"{'idle A':>10} {'idle B':>10} {'crit A':>10} {'crit B':>10}")
    for e in diff.engines:
        if e.engine_b:
            lines.append(f"  {e.engine} is {e.engine_b} in B (the only {e.engine_kind} engine on each side that the other lacks)")
        lines.append(f"  {e.engine:<16} {e.engine_kind:<10} {format_time(e.busy_a, u):>10} {format_time(e.busy_b, u):>10} "
                     f"{_signed(e.delta, u):>11} {_pct(e.percent):>8} {format_time(e.idle_a, u):>10} {format_time(e.idle_b, u):>10} "
                     f"{format_time(e.critical_a, u):>10} {format_time(e.critical_b, u):>10}")
    changed = [p for p in diff.critical_path if p.change is not Change.SAME]
    lines += ["", f"critical path: what changed on it ({len(changed)}, top {top}):"]
    lines += [f"  {p.change.value:<8} {p.engine:<16} {p.name[:40]:<40} {format_time(p.time_a, u):>10} -> {format_time(p.time_b, u):<10} "
              f"{_signed(p.delta, u)}" for p in changed[:top]]
    lines += ["", "idle (device engines waiting), by cause:"]
    lines += [f"  {c.cause:<16} {format_time(c.idle_a, u):>10} -> {format_time(c.idle_b, u):<10} {_signed(c.delta, u)}" for c in diff.idle]
    return "\n".join(lines) + "\n"


def diff_record(diff: ScheduleDiff) -> dict[str, object]:
    """The comparison as plain JSON-ready data (the three tables as row lists)."""
    return {"unit": diff.unit,
            "a": {"region": diff.a.name, "schedule": diff.a.total, "critical_path": diff.a.critical_path},
            "b": {"region": diff.b.name, "schedule": diff.b.total, "critical_path": diff.b.critical_path},
            "engines": diff.engines_table().to_pylist(), "critical_path": diff.critical_table().to_pylist(),
            "idle": diff.idle_table().to_pylist()}  # fmt: skip


HINT = "\nboth regions carry engine schedules: --schedule compares them (busy time per engine, critical path, idle)\n"


def schedule_section(trace_a: Trace, region_a: int, trace_b: Trace, region_b: int, *, wanted: bool, as_json: bool,
                     top: int = 10) -> dict[str, object]:
    """What `portscope diff` adds about schedules: with --schedule the comparison ({"schedule": record} for JSON,
    {"text": ...} else); without it a one-line hint in the text when both regions carry schedules (cheap: the
    comparison itself walks every slice of both regions). Raises UsageError when --schedule cannot compare them."""
    if wanted:
        diff = diff_schedules(trace_a, region_a, trace_b, region_b)
        return {"schedule": diff_record(diff)} if as_json else {"text": "\n" + format_schedule_diff(diff, top=top)}
    if not as_json and has_schedule(trace_a, region_a) and has_schedule(trace_b, region_b):
        return {"text": HINT}
    return {}


__all__ = ["CauseDelta", "Change", "EngineDelta", "PathDelta", "ScheduleDiff", "aligned_slices", "diff_record",
           "diff_schedules", "diff_summaries", "format_schedule_diff", "has_schedule", "pair_engines", "region_slice_rows",
           "schedule_section", "verdict"]

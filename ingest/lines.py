"""Signals by source line: which model line made which signals, with exact counts and its source text.

A signal's line is its call site without the caller (`portscope.ingest.callsites.site_line`); the
source text comes from the `frames` table's optional `source` column, stored at record time.
Plain Python values, no pandas (see summary.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from . import arrow_compute as pc
from .callsites import CALLER_SEPARATOR, format_frame, module_summary, site_line
from .columns import memory_slices
from .region_tree import descendants
from .schema import FRAME_SOURCE, TimeUnit
from .trace import Trace

__all__ = ["LineDetail", "LineTotal", "line_detail", "line_table", "operator_lines", "source_index", "stack_lines"]


@dataclasses.dataclass(frozen=True)
class LineTotal:
    """What one source line made: signal count, bytes, the time of its operators, where in the model."""

    line: str  # `file:line (function)`
    source: str | None  # the line's text, when the trace has it
    count: int
    bytes: int
    modules: dict[str, int]  # module paths folded by layer index -> count, most first
    callers: dict[str, int]  # the model lines that called it -> count, most first
    time_ns: int = 0  # engine time of its operators (predicted schedule), else their host time
    signals: dict[str, int] = dataclasses.field(default_factory=dict)  # signal kind -> count
    operators: dict[str, int] = dataclasses.field(default_factory=dict)  # operator -> count

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class LineDetail:
    """One line of a region: its operators (signal, operator, count, bytes) and its distinct full stacks."""

    line: LineTotal
    operators: list[dict[str, Any]]
    stacks: list[tuple[int, list[str]]]  # (signals with this stack, frames innermost first with their text)


def source_index(trace: Trace) -> dict[str, str]:
    """`file:line (function)` -> the line's source text, from the frames table."""
    frames = trace["frames"]
    if FRAME_SOURCE not in frames.column_names or not frames.num_rows:
        return {}
    out = {}
    for file, line, function, text in zip(*(frames.column(c).to_pylist() for c in ("file", "line", "function", FRAME_SOURCE)),
                                          strict=True):
        if text:
            out.setdefault(format_frame(file, line, function), text)
    return out


class _Accumulator:
    def __init__(self) -> None:
        self.count = self.bytes = 0
        self.modules: dict[str, int] = {}
        self.callers: dict[str, int] = {}
        self.signals: dict[str, int] = {}
        self.operators: dict[str, int] = {}
        self.op_ids: set[int] = set()

    def add(self, site: str, module: str | None, n: int, b: int) -> None:
        self.count += n
        self.bytes += b
        if module:
            self.modules[module] = self.modules.get(module, 0) + n
        if CALLER_SEPARATOR in site:
            caller = site.split(CALLER_SEPARATOR, 1)[1]
            self.callers[caller] = self.callers.get(caller, 0) + n

    def total(self, line: str, sources: dict[str, str], time_ns: int = 0) -> LineTotal:
        return LineTotal(line, sources.get(line), self.count, self.bytes, module_summary(self.modules.items()),
                         _by_count(self.callers), time_ns, _by_count(self.signals), _by_count(self.operators))


def _by_count(values: dict[str, int]) -> dict[str, int]:
    return dict(sorted(values.items(), key=lambda kv: -kv[1]))


def operator_lines(kinds: list[str], op_names: list[str | None], sites: list[str | None], modules: list[str | None],
                   counts: list[int], nbytes: list[int], sources: dict[str, str]) -> dict[tuple[str, str], list[LineTotal]]:
    """Per (signal, operator): its lines, largest count first (rows without a call site are left out)."""
    found: dict[tuple[str, str], dict[str, _Accumulator]] = {}
    for kind, op, site, module, n, b in zip(kinds, op_names, sites, modules, counts, nbytes, strict=True):
        if not site:
            continue
        lines = found.setdefault((kind, op or "(unknown)"), {})
        line = site_line(site)
        acc = lines.get(line) or lines.setdefault(line, _Accumulator())
        acc.add(site, module, int(n or 0), int(b or 0))
    return {key: sorted((acc.total(line, sources) for line, acc in lines.items()), key=lambda t: -t.count)
            for key, lines in found.items()}


def _region_signals(trace: Trace, region_id: int) -> pa.Table:
    ids = descendants(trace, region_id)
    table = trace["signals"]
    return pc.call("filter", table, pc.is_in(table.column("region_id"), pc.int32_array(ids)))


def _op_times(trace: Trace, op_ids: set[int]) -> dict[int, int]:
    """op_id -> its engine time (predicted or measured engine slices in ns), else its host time."""
    if not op_ids:
        return {}
    wanted = pa.array(sorted(op_ids), pa.int64())
    slices = trace["engine_slices"]
    times: dict[int, int] = {}
    if trace.run_info.time_unit is TimeUnit.NS and slices.num_rows:
        work = pa.array(~memory_slices(slices.column("engine")))  # an allocation's memory level is no time of its operator
        hit = pc.call("filter", slices, pc.call("and", pc.is_in(slices.column("op_id"), wanted), work))
        for op_id, dur in zip(hit.column("op_id").to_pylist(), hit.column("dur").to_pylist(), strict=True):
            times[op_id] = times.get(op_id, 0) + int(dur or 0)
    if len(times) < len(op_ids):
        ops = trace["ops"]
        hit = pc.call("filter", ops, pc.is_in(ops.column("op_id"), wanted))
        for op_id, dur in zip(hit.column("op_id").to_pylist(), hit.column("dur_ns").to_pylist(), strict=True):
            times.setdefault(op_id, int(dur or 0))
    return times


def line_table(trace: Trace, region_id: int) -> list[LineTotal]:
    """Every source line of a region (nested regions included), costliest first: count, bytes, time."""
    signals = _region_signals(trace, region_id)
    columns = ["kind", "op_name", "call_site", "module", "count", "bytes", "op_id"]
    lines: dict[str, _Accumulator] = {}
    for kind, op, site, module, n, b, op_id in zip(*(signals.column(c).to_pylist() for c in columns), strict=True):
        if not site:
            continue
        line = site_line(site)
        acc = lines.get(line) or lines.setdefault(line, _Accumulator())
        acc.add(site, module, int(n or 0), int(b or 0))
        acc.signals[kind] = acc.signals.get(kind, 0) + int(n or 0)
        name = op or "(unknown)"
        acc.operators[name] = acc.operators.get(name, 0) + int(n or 0)
        if op_id is not None:
            acc.op_ids.add(op_id)
    times = _op_times(trace, set().union(*(acc.op_ids for acc in lines.values())) if lines else set())
    sources = source_index(trace)
    rows = [acc.total(line, sources, sum(times.get(i, 0) for i in acc.op_ids)) for line, acc in lines.items()]
    rows.sort(key=lambda t: (-t.count, -t.bytes, -t.time_ns))
    return rows


def line_detail(trace: Trace, region_id: int, line: str, *, max_stacks: int = 3) -> LineDetail | None:
    """One line of a region: its (signal, operator) rows and up to `max_stacks` distinct stacks, most used first."""
    row = next((t for t in line_table(trace, region_id) if t.line == line), None)
    if row is None:
        return None
    signals = _region_signals(trace, region_id)
    columns = ["kind", "op_name", "call_site", "count", "bytes", "stack_id"]
    pairs: dict[tuple[str, str], list[int]] = {}
    stacks: dict[int, int] = {}
    for kind, op, site, n, b, stack_id in zip(*(signals.column(c).to_pylist() for c in columns), strict=True):
        if not site or site_line(site) != line:
            continue
        total = pairs.setdefault((kind, op or "(unknown)"), [0, 0])
        total[0] += int(n or 0)
        total[1] += int(b or 0)
        if stack_id is not None:
            stacks[stack_id] = stacks.get(stack_id, 0) + int(n or 0)
    operators = [{"signal": k, "operator": o, "count": n, "bytes": b}
                 for (k, o), (n, b) in sorted(pairs.items(), key=lambda kv: -kv[1][0])]
    top = sorted(stacks.items(), key=lambda kv: -kv[1])[:max_stacks]
    return LineDetail(row, operators, [(n, stack_lines(trace, sid)) for sid, n in top])


def stack_lines(trace: Trace, stack_id: int) -> list[str]:
    """A stack as `file:line (function)` lines, innermost first, each followed by its source text when known."""
    stacks = trace["stacks"]
    rows = pc.call("filter", stacks, pc.call("equal", stacks.column("stack_id"), pa.scalar(stack_id, pa.int32())))
    if not rows.num_rows:
        return []
    frames = trace["frames"]
    names = ["file", "line", "function"] + ([FRAME_SOURCE] if FRAME_SOURCE in frames.column_names else [])
    by_id = dict(zip(frames.column("frame_id").to_pylist(), zip(*(frames.column(c).to_pylist() for c in names), strict=True),
                     strict=True))
    out = []
    for fid in rows.column("frame_ids")[0].as_py():
        if fid in by_id:
            file, number, function, *text = by_id[fid]
            out.append(format_frame(file, number, function) + (f"    {text[0]}" if text and text[0] else ""))
    return out

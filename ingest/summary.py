"""Region summaries: the tables behind the report, the CLI gate and the viewer.

Every function here takes a Trace and returns small dataclasses (rows of plain values); nothing here
prints or draws. A region's operators are the program's: those the compiler ran while it traced or compiled
(placement ``compiler``) are counted apart (`RegionSummary.compiler_op_count`), and the operator tables leave them
out (`op_device.op_calls`). No pandas: `portscope report` answers in a fraction of a second, and pandas alone takes
longer than that to import (only `regions_frame`, for the viewer and `diff`, builds a DataFrame).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import TYPE_CHECKING

import pyarrow as pa

from . import arrow_compute as pc
from .arrow_values import strings
from .catalog import SIGNALS, RegionFigures, Status, Verdict, format_bytes, verdict, worst_status
from .lines import LineTotal, operator_lines, source_index
from .region_tree import descendants, region_depths, region_ids, top_level_ids
from .schema import Direction, Phase, Placement, SignalKind
from .trace import Trace

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_NOTES", "RegionSummary", "compiler_op_count", "descendants", "format_bytes", "region_depths", "region_ids",
           "top_level_ids", "regions_frame", "run_totals", "RunTotals", "summarize"]

DEFAULT_NOTES: dict[SignalKind, str] = {kind: spec.hint for kind, spec in SIGNALS.items()}


@dataclasses.dataclass(frozen=True)
class SignalTotal:
    """One signal kind's totals in a region."""

    signal: str
    count: int
    bytes: int
    note: str


@dataclasses.dataclass(frozen=True)
class OperatorTotal:
    """One (signal, operator) pair's totals, with why and where (most frequent first)."""

    signal: str
    operator: str
    count: int
    bytes: int
    reasons: dict[str, int]
    call_sites: dict[str, int]
    lines: list[LineTotal] = dataclasses.field(default_factory=list)  # by source line (call site without caller)


@dataclasses.dataclass
class RegionSummary:
    """One region's figures (including its nested regions)."""

    region_id: int
    name: str
    parent_id: int | None  # the region this one is nested in (None: top level)
    depth: int  # 0 for a top-level region
    wall_ns: int
    peak_memory_bytes: int | None
    mode: str
    phase: str
    device: str | None
    error: str | None
    tags: dict[str, str]
    op_count: int  # the program's operators (not those the compiler ran)
    signals: list[SignalTotal]  # one row per kind present, in SignalKind order
    operators: list[OperatorTotal]  # in SignalKind order, then by count (largest first)
    transfer_bytes: dict[Direction, int]
    transfer_counts: dict[Direction, int]
    compiler_op_count: int = 0  # operators the compiler ran while it traced or compiled (placement compiler)

    def count(self, kind: SignalKind) -> int:
        return sum(r.count for r in self.signals if r.signal == kind.value)

    def bytes(self, kind: SignalKind) -> int:
        return sum(r.bytes for r in self.signals if r.signal == kind.value)

    def operators_of(self, signal: str) -> list[OperatorTotal]:
        """The operator rows of one signal kind (its value)."""
        return [r for r in self.operators if r.signal == signal]

    def figures(self) -> RegionFigures:
        """What the catalogue's verdict reads."""
        counts = {SignalKind(r.signal): r.count for r in self.signals}
        sizes = {SignalKind(r.signal): r.bytes for r in self.signals}
        phase = Phase(self.phase) if self.phase in {p.value for p in Phase} else Phase.NONE
        return RegionFigures(counts, sizes, phase, self.error)

    def verdict_of(self) -> Verdict:
        """The region's one verdict (portscope.ingest.catalog.verdict)."""
        return verdict(self.figures())

    def verdict(self) -> dict[str, object]:
        """{"clean": bool, "status": str, "reasons": [...]}: what keeps the region from running entirely on the device."""
        return self.verdict_of().to_json()


def regions_frame(trace: Trace) -> pd.DataFrame:
    """The regions table as a DataFrame (region_id, parent_id, name, mode, phase, start_ns, dur_ns...)."""
    import pandas as pd

    regions = trace["regions"]  # to_pylist: dictionary-encoded columns become plain strings, not categoricals
    return pd.DataFrame({name: regions.column(name).to_pylist() for name in regions.column_names},
                        columns=regions.column_names)


def _rows_in(table: pa.Table, ids: list[int]) -> pa.Table:
    return pc.call("filter", table, pc.is_in(table.column("region_id"), pc.int32_array(ids)))


def grouped_signals(table: pa.Table, columns: list[str]) -> tuple[list[list], list[int], list[int], list[int]]:
    """Signal rows grouped by their values in `columns`, groups in the order first seen: each group's values
    (one list per column), summed `count`, summed `bytes`, and rows. Summing a group first gives the same
    totals as summing its rows one by one; a whole-run region of a large trace has 10^5..10^7 rows but
    a few thousand distinct (kind, operator, line...) groups, so the per-group Python work stays small."""
    import numpy as np

    n = table.num_rows
    if not n:
        return [[] for _ in columns], [], [], []
    codes, values = [], []
    for name in columns:
        column = table.column(name).unify_dictionaries().combine_chunks()
        if not pa.types.is_dictionary(column.type):
            column = pc.call("dictionary_encode", column)
        codes.append(pc.int_values(column.indices, fill=-1))  # -1: null
        values.append(column.dictionary.to_pylist())
    radix = [len(v) + 1 for v in values]  # codes run -1..len-1
    if float(np.prod(radix, dtype=np.float64)) < 2**62:  # one int64 key per row: a 1-D sort
        key = np.zeros(n, np.int64)
        for code, base in zip(codes, radix, strict=True):
            key = key * base + (code + 1)
    else:
        key = np.stack(codes, axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))  # group -> its place in first-seen order
    group = rank[inverse]
    size = len(first)
    sums = []
    for name in ("count", "bytes"):
        total = np.zeros(size, np.int64)
        np.add.at(total, group, pc.int_values(table.column(name).combine_chunks(), fill=0))
        sums.append(total.tolist())
    rows = np.bincount(group, minlength=size).tolist()
    firsts = np.sort(first)
    decoded = [[vals[c] if c >= 0 else None for c in col[firsts].tolist()] for col, vals in zip(codes, values, strict=True)]
    return decoded, sums[0], sums[1], rows


def _columns(table: pa.Table, columns: list[str]) -> list[list]:
    """Plain Python values of `columns` (dictionary-encoded strings decoded)."""
    return [table.column(c).to_pylist() for c in columns]


def summarize(trace: Trace, region_id: int, *, lines: bool = True) -> RegionSummary:
    """The summary of one region and its nested regions (`lines=False`: without each operator's source
    lines, which only the report and the region page show)."""
    regions = trace["regions"]
    index = regions.column("region_id").to_pylist().index(region_id)
    row = {name: regions.column(name)[index].as_py() for name in regions.column_names}
    ids = descendants(trace, region_id)
    (kinds, reasons, op_names, sites, notes, modules), counts, nbytes, rows = grouped_signals(
        _rows_in(trace["signals"], ids), ["kind", "reason", "op_name", "call_site", "note", "module"])
    order = {k.value: i for i, k in enumerate(SignalKind)}
    totals: dict[str, list[int]] = {}
    kind_notes: dict[str, Counter[str]] = {}
    for kind, n, b, note, k in zip(kinds, counts, nbytes, notes, rows, strict=True):
        total = totals.setdefault(kind, [0, 0])
        total[0] += n
        total[1] += b
        if note:
            kind_notes.setdefault(kind, Counter())[note] += k
    by_kind = [
        SignalTotal(kind, n, b, _most_common(kind_notes.get(kind)) or DEFAULT_NOTES[SignalKind(kind)])
        for kind, (n, b) in sorted(totals.items(), key=lambda kv: order[kv[0]])
    ]
    operators = _operator_table(kinds, op_names, reasons, sites, counts, nbytes, order)
    if lines and any(sites):
        by_line = operator_lines(kinds, op_names, sites, modules, counts, nbytes, source_index(trace))
        operators = [dataclasses.replace(r, lines=by_line.get((r.signal, r.operator), [])) for r in operators]
    transfers = _rows_in(trace["transfers"], ids)
    tbytes = {d: 0 for d in Direction}
    tcounts = {d: 0 for d in Direction}
    for direction, b in zip(*_columns(transfers, ["direction", "bytes"]), strict=True):
        tbytes[Direction(direction)] += int(b or 0)
        tcounts[Direction(direction)] += 1
    op_count, compiler_ops = _op_counts(trace["ops"], ids)
    tags = json.loads(row["tags"]) if row.get("tags") else {}
    return RegionSummary(
        region_id=region_id,
        name=row["name"],
        parent_id=row["parent_id"],
        depth=region_depths(trace)[region_id],
        wall_ns=row["dur_ns"],
        peak_memory_bytes=row["peak_memory_bytes"],
        mode=row["mode"],
        phase=row["phase"],
        device=row["device"],
        error=row["error"],
        tags=tags if isinstance(tags, dict) else {},
        op_count=op_count,
        signals=by_kind,
        operators=operators,
        transfer_bytes=tbytes,
        transfer_counts=tcounts,
        compiler_op_count=compiler_ops,
    )


def _op_counts(ops: pa.Table, ids: list[int] | None) -> tuple[int, int]:
    """(the program's operators, the compiler's) in the regions `ids` (None: every operator)."""
    if not ops.num_rows:
        return 0, 0
    compiler = _by_compiler(ops)
    if ids is None:
        return ops.num_rows - pc.total(compiler), pc.total(compiler)
    inside = pc.is_in(ops.column("region_id"), pc.int32_array(ids))
    return pc.total(pc.call("and", inside, pc.call("invert", compiler))), pc.total(pc.call("and", inside, compiler))


def _by_compiler(ops: pa.Table) -> pa.ChunkedArray:
    """A flag per operator: the compiler ran it (placement compiler)."""
    return pc.is_in(ops.column("placement"), strings([Placement.COMPILER.value]))


def compiler_op_count(trace: Trace, ids: list[int] | None = None) -> int:
    """Operators the compiler ran while it traced or compiled (placement compiler) in the regions `ids` and the regions
    nested in them (None: the whole run)."""
    wanted = sorted({r for rid in ids for r in descendants(trace, rid)}) if ids is not None else None
    return _op_counts(trace["ops"], wanted)[1]


@dataclasses.dataclass(frozen=True)
class RunTotals:
    """A run's figures: sums over its top-level regions only (nested regions are inside them), and the
    worst of their verdicts."""

    regions: int  # top-level regions summed
    counts: dict[SignalKind, int]
    bytes: dict[SignalKind, int]
    transfer_bytes: dict[Direction, int]
    status: Status

    def to_json(self) -> dict[str, object]:
        return {"regions": self.regions, "status": self.status.value,
                "signals": {k.value: {"count": n, "bytes": self.bytes.get(k, 0)} for k, n in self.counts.items()},
                "transfer_bytes": {d.value: n for d, n in self.transfer_bytes.items()}}


def run_totals(trace: Trace, summaries: dict[int, RegionSummary] | None = None) -> RunTotals:
    """The run's totals (summaries: already computed region summaries, by id, to reuse)."""
    counts: dict[SignalKind, int] = {}
    sizes: dict[SignalKind, int] = {}
    transfer = {d: 0 for d in Direction}
    statuses = []
    top = top_level_ids(trace)
    for rid in top:
        summary = (summaries or {}).get(rid) or summarize(trace, rid, lines=False)
        figures = summary.figures()
        for kind, n in figures.counts.items():
            counts[kind] = counts.get(kind, 0) + n
            sizes[kind] = sizes.get(kind, 0) + figures.bytes(kind)
        for d in Direction:
            transfer[d] += summary.transfer_bytes[d]
        statuses.append(verdict(figures).status)
    ordered = [k for k in SignalKind if k in counts]
    return RunTotals(len(top), {k: counts[k] for k in ordered}, {k: sizes[k] for k in ordered}, transfer,
                     worst_status(statuses))


def _most_common(values: Counter[str] | None) -> str | None:
    """The most frequent value (the first seen among equals), None when there is none."""
    return values.most_common(1)[0][0] if values else None


def _by_count(values: dict[str, int]) -> dict[str, int]:
    """Largest count first; equal counts keep the order they were first seen in."""
    return dict(sorted(values.items(), key=lambda kv: -kv[1]))


def _operator_table(kinds: list[str], op_names: list[str | None], reasons: list[str | None], sites: list[str | None],
                    counts: list[int], nbytes: list[int], order: dict[str, int]) -> list[OperatorTotal]:
    """Per (signal, operator): count, bytes, and the why / call-site breakdowns (most frequent first)."""
    totals: dict[tuple[str, str], list[int]] = {}
    why: dict[tuple[str, str], dict[str, int]] = {}
    where: dict[tuple[str, str], dict[str, int]] = {}
    for kind, op, reason, site, n, b in zip(kinds, op_names, reasons, sites, counts, nbytes, strict=True):
        key = (kind, op or "(unknown)")
        total = totals.setdefault(key, [0, 0])
        total[0] += int(n or 0)
        total[1] += int(b or 0)
        if reason:
            why.setdefault(key, {})[reason] = why.get(key, {}).get(reason, 0) + int(n or 0)
        if site:
            where.setdefault(key, {})[site] = where.get(key, {}).get(site, 0) + int(n or 0)
    rows = [OperatorTotal(kind, op, n, b, _by_count(why.get((kind, op), {})), _by_count(where.get((kind, op), {})))
            for (kind, op), (n, b) in totals.items()]
    rows.sort(key=lambda r: (order[r.signal], -r.count))  # stable: first seen first among equals
    return rows

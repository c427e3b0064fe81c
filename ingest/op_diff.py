"""Every operator, runtime call, kernel and annotation of two regions by name: counts, total times, change.

The sets are those of Holistic Trace Analysis' ``TraceDiff.ops_diff`` on the same pair (one of its
iterations against another): every event inside the region's time window (operators and runtime calls by
their start, nested regions, the region itself when it is an annotation inside the run), and the device
work the region's runtime calls launched (joined by correlation). Device work whose launch is not in the
trace (in flight when profiling began) counts in no region, as in HTA. Traces without runtime calls
(portscope recordings, predicted runs, files converted before runtime calls were kept) count device work
in the region the trace gives it. Not rows here, unlike in HTA: Python frames (a Kineto trace recorded with
``with_stack=True`` has them as events; here they are the call sites) and the time of a schedule in cycles
(its slices count, with no time).

Beside HTA's sets, the call-site alignment: per name, the model lines (call sites without their caller)
whose count changed, read from the operators' call sites (runtime calls and device work take the call site
of the operator that made them).
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
import pandas as pd
import pyarrow as pa

from . import arrow_compute as pc
from .arrow_values import strings
from .callsites import site_line
from .region_tree import descendants, top_level_ids
from .schema import EngineKind, Placement, SliceKind, TimeUnit
from .trace import Trace

__all__ = ["OP_COLUMNS", "SITE_COLUMNS", "OpChange", "OpDiff", "OpKind", "change_sets", "op_diff", "op_totals", "set_sizes"]


class OpKind(enum.Enum):
    """What a row of the operator diff counts."""

    OPERATOR = "operator"  # a framework operator (aten::mm, CompiledFunction...)
    COMPILER = "compiler"  # an operator the compiler ran while it traced or compiled (placement compiler)
    RUNTIME = "runtime"  # a host call into the device runtime or driver (cudaLaunchKernel...)
    KERNEL = "kernel"  # device work: a kernel, a copy, a memset, a predicted engine slice
    ANNOTATION = "annotation"  # a region inside the compared one (ProfilerStep#N, record_function)


class OpChange(enum.Enum):
    """How a name's count changed from A to B (HTA's five sets)."""

    ADDED = "added"  # only in B
    DELETED = "deleted"  # only in A
    INCREASED = "increased"
    DECREASED = "decreased"
    UNCHANGED = "unchanged"


_CHANGE_ORDER = {c.value: i for i, c in enumerate(OpChange)}
_KIND_ORDER = {k.value: i for i, k in enumerate(OpKind)}
_HOST_SIDE = [EngineKind.HOST.value, EngineKind.DISPATCH.value, EngineKind.COMPILER.value]  # not device work
OP_COLUMNS = ["change", "kind", "name", "a_count", "b_count", "delta", "a_ns", "b_ns", "delta_ns"]
SITE_COLUMNS = ["kind", "name", "call_site", "a_count", "b_count", "delta"]
_TOTAL_COLUMNS = ["kind", "name", "call_site", "count", "total_ns"]


@dataclasses.dataclass(frozen=True)
class OpDiff:
    """The operator diff of a region pair.

    ops: one row per (kind, name) in A or B (OP_COLUMNS; change holds OpChange values), added first, then
    deleted, increased, decreased, unchanged, each by |Δ count| then |Δ time|. sites: per (kind, name), the
    call-site lines whose count changed (SITE_COLUMNS), by |Δ|. unlaunched: device work counted in neither
    region of A / of B because its launch is not in the trace."""

    ops: pd.DataFrame
    sites: pd.DataFrame
    unlaunched: tuple[int, int]


def op_totals(trace: Trace, region_id: int) -> tuple[pd.DataFrame, int]:
    """(one row per (kind, name, call-site line) inside the region: count and total_ns; the device work left
    out because no runtime call of the trace launched it)."""
    subtree = descendants(trace, region_id)
    ids = pc.int32_array(subtree)
    ops = trace["ops"]
    sites = _site_lines(ops)
    compiler = pc.is_in(ops.column("placement"), strings([Placement.COMPILER.value]))
    parts = [_rows(kind, *_in_regions(pc.call("filter", ops, flags), ids, ["name", "dur_ns", "op_id"]), sites)
             for kind, flags in ((OpKind.OPERATOR, pc.call("invert", compiler)), (OpKind.COMPILER, compiler))]
    calls = _in_regions(trace["runtime_calls"], ids, ["name", "dur_ns", "op_id"])
    parts.append(_rows(OpKind.RUNTIME, *calls, sites))
    device, unlaunched = _device_work(trace, ids)
    parts.append(_rows(OpKind.KERNEL, *device, sites))
    regions = trace["regions"]
    inside = [r for r in subtree if r != region_id or region_id not in top_level_ids(trace)]  # a top-level region is the run itself
    nested = pc.call("filter", regions, pc.is_in(regions.column("region_id"), pc.int32_array(inside)))
    parts.append(_rows(OpKind.ANNOTATION, nested.column("name"), nested.column("dur_ns"), None, None))
    found = [p for p in parts if len(p)]
    return (pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=_TOTAL_COLUMNS)), unlaunched


def op_diff(trace_a: Trace, region_a: int, trace_b: Trace, region_b: int) -> OpDiff:
    """The operator diff of region_a of trace_a (A) against region_b of trace_b (B)."""
    totals_a, unlaunched_a = op_totals(trace_a, region_a)
    totals_b, unlaunched_b = op_totals(trace_b, region_b)
    ops = _merge(totals_a, totals_b, ["kind", "name"])
    ops["delta_ns"] = ops["b_ns"] - ops["a_ns"]
    ops["change"] = _changes(ops["a_count"].to_numpy(), ops["b_count"].to_numpy())
    ops = ops.assign(_c=ops["change"].map(_CHANGE_ORDER), _d=-ops["delta"].abs(), _t=-ops["delta_ns"].abs(),
                     _k=ops["kind"].map(_KIND_ORDER))  # fmt: skip
    ops = ops.sort_values(["_c", "_d", "_t", "_k", "name"], kind="stable")[OP_COLUMNS].reset_index(drop=True)
    sited = [t[t["call_site"].notna()] for t in (totals_a, totals_b)]
    sites = _merge(*sited, ["kind", "name", "call_site"])
    sites = sites[sites["delta"] != 0]
    sites = sites.assign(_d=-sites["delta"].abs()).sort_values(["_d", "kind", "name", "call_site"], kind="stable")
    return OpDiff(ops=ops, sites=sites[SITE_COLUMNS].reset_index(drop=True), unlaunched=(unlaunched_a, unlaunched_b))


def change_sets(ops: pd.DataFrame) -> dict[OpChange, list[str]]:
    """HTA's ``ops_diff`` dictionary from an operator diff: names (all kinds together, as HTA groups by name
    alone) in each change set, sorted."""
    by_name = ops.groupby("name", sort=True)[["a_count", "b_count"]].sum()
    changes = _changes(by_name["a_count"].to_numpy(), by_name["b_count"].to_numpy())
    return {c: [n for n, v in zip(by_name.index, changes, strict=True) if v == c.value] for c in OpChange}


def set_sizes(ops: pd.DataFrame) -> tuple[dict[OpChange, int], dict[OpChange, int]]:
    """(names in each set by name alone, as HTA counts; rows in each set by kind and name): the two differ
    when a name is of several kinds (an operator and the predicted kernel of the same name)."""
    by_name = {c: len(names) for c, names in change_sets(ops).items()}
    return by_name, {c: int((ops["change"] == c.value).sum()) for c in OpChange}


def _changes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """OpChange values by HTA's rules (a row is in A or B: a count is positive on one side at least)."""
    return np.select([a == 0, b == 0, b > a, b < a],
                     [OpChange.ADDED.value, OpChange.DELETED.value, OpChange.INCREASED.value, OpChange.DECREASED.value],
                     OpChange.UNCHANGED.value).astype(object)  # fmt: skip


def _merge(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """A and B totals side by side on `keys` (counts and times summed per key; absent: 0), with Δ count."""
    sides = [t[keys].assign(a_count=t["count"] * (i == 0), b_count=t["count"] * (i == 1), a_ns=t["total_ns"] * (i == 0),
                            b_ns=t["total_ns"] * (i == 1)) for i, t in enumerate((a, b))]  # fmt: skip
    merged = (pd.concat(sides, ignore_index=True).groupby(keys, sort=False, dropna=False)
              [["a_count", "b_count", "a_ns", "b_ns"]].sum().astype("int64").reset_index())  # fmt: skip
    merged["delta"] = merged["b_count"] - merged["a_count"]
    return merged


def _in_regions(table: pa.Table, ids: pa.Array, columns: list[str]) -> list[pa.ChunkedArray | None]:
    """`columns` of the rows of `table` whose region is among `ids`."""
    picked = pc.call("filter", table.select(["region_id", *columns]), pc.is_in(table.column("region_id"), ids))
    return [picked.column(c) for c in columns]


def _device_work(trace: Trace, ids: pa.Array) -> tuple[list, int]:
    """([name, dur, op_id] of the device work the regions' runtime calls launched, how many device slices
    no runtime call launched) — or, in a trace without runtime calls, the device work in the regions."""
    slices = trace["engine_slices"]
    work = pc.call("and", pc.call("invert", pc.is_in(slices.column("engine_kind"), pa.array(_HOST_SIDE))),
                   pc.call("not_equal", slices.column("kind"), pa.scalar(SliceKind.ANNOTATION.value)))  # not memory levels, nor marks
    device = pc.call("filter", slices, work)
    if trace.run_info.time_unit is TimeUnit.CYCLES:  # a schedule in cycles: counts only, no time
        device = device.set_column(device.schema.get_field_index("dur"), "dur", pa.array(np.zeros(device.num_rows, np.int64)))
    calls = trace["runtime_calls"]
    if not calls.num_rows:
        return _in_regions(device, ids, ["name", "dur", "op_id"]), 0
    launched = pc.call("filter", calls.column("correlation"), pc.is_in(calls.column("region_id"), ids))
    known = pc.is_in(device.column("correlation"), pc.call("drop_null", calls.column("correlation")))
    unlaunched = device.num_rows - pc.total(known)
    picked = pc.call("filter", device, pc.is_in(device.column("correlation"), pc.call("drop_null", launched)))
    return [picked.column(c) for c in ("name", "dur", "op_id")], unlaunched


@dataclasses.dataclass(frozen=True)
class _Sites:
    """Every operator's call-site line: op ids (sorted), a code per operator into `lines` (-1: none)."""

    op_ids: np.ndarray
    codes: np.ndarray
    lines: list[str]

    def of(self, op_ids: np.ndarray) -> np.ndarray:
        """Line codes of operators given by id (-1 for a null id, -1, or an id no operator has)."""
        n = len(self.op_ids)
        if self.op_ids[0] == 0 and self.op_ids[-1] == n - 1:  # ids 0..n-1 (sorted and unique): index by id
            found = (op_ids >= 0) & (op_ids < n)
            return np.where(found, self.codes[np.where(found, op_ids, 0)], -1)
        at = np.minimum(np.searchsorted(self.op_ids, op_ids), n - 1)
        return np.where(self.op_ids[at] == op_ids, self.codes[at], -1)


def _site_lines(ops: pa.Table) -> _Sites | None:
    """The call-site line of every operator, None when no operator has a call site."""
    column = ops.column("call_site")
    if column.null_count == len(column):
        return None
    codes, sites = _codes(column)
    lines: dict[str, int] = {}
    remap = np.array([lines.setdefault(site_line(site), len(lines)) for site in sites] + [-1], dtype=np.int64)
    ids = pc.int_values(ops.column("op_id").combine_chunks())
    order = np.argsort(ids, kind="stable")
    return _Sites(ids[order], remap[codes][order], list(lines))  # code -1 (null) -> remap's trailing -1


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """(a code per row into the distinct values, -1 for null; the distinct values) of a string column."""
    if not pa.types.is_dictionary(column.type):  # plain strings: coded by Arrow, not one Python string a row
        column = pc.call("dictionary_encode", column)
    values = pd.Categorical(column.to_pandas())
    return values.codes.astype(np.int64), list(values.categories)


def _rows(kind: OpKind, names: pa.ChunkedArray, durs: pa.ChunkedArray, op_ids: pa.ChunkedArray | None,
          sites: _Sites | None) -> pd.DataFrame:
    """(kind, name, call_site, count, total_ns) of some rows, one per (name, call-site line), summed in numpy;
    a row's call site is that of the operator it belongs to."""
    if not len(names):
        return pd.DataFrame(columns=_TOTAL_COLUMNS)
    name_codes, words = _codes(names)  # names are never null (schema)
    with_sites = sites is not None and op_ids is not None
    line_codes = sites.of(pc.int_values(op_ids.combine_chunks())) if with_sites else np.full(len(names), -1)  # type: ignore[union-attr]
    lines = [*sites.lines, None] if with_sites else [None]  # type: ignore[union-attr]  # code -1 -> the trailing None
    keys, inverse = np.unique(name_codes * len(lines) + line_codes + 1, return_inverse=True)
    durations = pc.int_values(durs.combine_chunks()).astype(np.float64)  # integer sums stay exact below 2**53 ns
    return pd.DataFrame({
        "kind": kind.value, "name": np.array(words, dtype=object)[keys // len(lines)],
        "call_site": np.array(lines, dtype=object)[keys % len(lines) - 1], "count": np.bincount(inverse),
        "total_ns": np.rint(np.bincount(inverse, weights=durations)).astype(np.int64)})  # fmt: skip

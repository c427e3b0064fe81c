"""Device time per operator: what `prof.key_averages()` calls "Self CUDA" and "CUDA total", from a trace.

An operator's *self* device time is the time of the device work (kernels, copies, memsets, a prediction's engine
slices) whose launch lies inside it and inside no deeper operator on the same thread: the engine slice's
``op_id``, set by the linker from the launching runtime call (`link.py`). Its *total* device time adds that of
every operator nested in it (nesting by time per thread, the linker's `enclosing`). Its *device calls* are the
calls of it with device work in them, its own or its children's.

Each operator and each piece of device work has a category (`op_categories`): device work by its kernel's name
when the name says, else by its operator; an operator by its name, else by the device work it launched itself.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa

from . import arrow_compute as pc
from .arrow_values import strings
from .callsites import site_line
from .link_nesting import enclosing
from .op_categories import OpCategory, kernel_category, operator_category
from .region_tree import descendants
from .schema import DEVICE_ENGINES, Placement, SliceKind, TimeUnit
from .trace import Trace
from .viewport import dictionary_codes

__all__ = ["CATEGORIES", "CATEGORY_COLUMNS", "OPS_COLUMNS", "OpCalls", "category_totals", "categories_by_spend",
           "device_by_operator", "device_rows", "op_calls"]

OPS_COLUMNS = ["operator", "calls", "device_calls", "device_self_ns", "device_total_ns", "cpu_ns", "category", "share"]
CATEGORY_COLUMNS = ["category", "device_ns", "share"]
CATEGORIES = list(OpCategory)
_OTHER = CATEGORIES.index(OpCategory.OTHER)


@dataclasses.dataclass(frozen=True)
class OpCalls:
    """Every operator call of some regions, and the device work they (or nobody) launched there.

    Per call (rows in the operators table's order): `name` (code into `names`), `op_id`, `line` (its call site's
    model line, code into `lines`, -1: none), `parent` (the call around it on
    its thread, -1: none), `cpu_ns`, `self_ns` / `self_n` (its own device work's time and count), `total_ns` /
    `total_n` (with its children's). Per piece of device work: `item_call` (-1: launched outside any operator),
    `item_ns`, `item_category` (code into `CATEGORIES`)."""

    names: list[str]
    name: np.ndarray
    op_id: np.ndarray
    lines: list[str]
    line: np.ndarray
    parent: np.ndarray
    cpu_ns: np.ndarray
    self_ns: np.ndarray
    self_n: np.ndarray
    total_ns: np.ndarray
    total_n: np.ndarray
    item_call: np.ndarray
    item_ns: np.ndarray
    item_category: np.ndarray

    @property
    def device_ns(self) -> int:
        """All device work in the regions, launched by an operator or not."""
        return int(self.item_ns.sum())

    @property
    def unattributed_ns(self) -> int:
        """Device work in the regions that no operator launched (its launch is outside any operator)."""
        return int(self.item_ns[self.item_call < 0].sum())

    def name_categories(self) -> np.ndarray:
        """A category code per distinct name: the name's, else (OTHER) the one its calls' own device work
        spent most time in."""
        launched = self.item_call >= 0
        return categories_by_spend(self.names, self.name[self.item_call[launched]], self.item_ns[launched],
                                   self.item_category[launched])  # fmt: skip


def categories_by_spend(names: list[str], item_group: np.ndarray, item_ns: np.ndarray, item_category: np.ndarray) -> np.ndarray:
    """A category code per name: the name's own (`operator_category`), else, for OTHER, the category in which the
    device work of that name's group (`item_group`: a code into `names` per piece of work) spent most time."""
    by_name = np.array([CATEGORIES.index(operator_category(n)) for n in names], dtype=np.int64)
    if not len(item_group):
        return by_name
    k = len(CATEGORIES)
    spent = np.bincount(item_group * k + item_category, weights=item_ns, minlength=len(names) * k).reshape(len(names), k)
    return np.where((by_name == _OTHER) & (spent.max(axis=1) > 0), spent.argmax(axis=1), by_name)


def op_calls(trace: Trace, region_ids: list[int] | None = None) -> OpCalls:
    """The program's operator calls of the regions `region_ids` and of every region nested in them (None: the whole
    run), with their device work; those the compiler ran while it traced or compiled (placement compiler) are not
    the program's calls and are left out."""
    ops = trace["ops"]
    wanted = sorted({r for rid in region_ids for r in descendants(trace, rid)}) if region_ids is not None else None
    keep = pc.call("invert", pc.is_in(ops.column("placement"), strings([Placement.COMPILER.value])))
    if wanted is not None:
        keep = pc.call("and", keep, pc.is_in(ops.column("region_id"), pc.int32_array(wanted)))
    ops = pc.call("filter", ops, keep)
    n = ops.num_rows
    op_ids = _ints(ops.column("op_id"))
    if n:
        name, names = dictionary_codes(ops.column("name"))
    else:
        name, names = np.zeros(0, np.int64), []
    start, cpu = _ints(ops.column("start_ns")), _ints(ops.column("dur_ns"))
    thread = _ints(ops.column("thread")) if n else np.zeros(0, np.int64)
    everyone = np.ones(n, dtype=bool)
    parent = np.asarray(enclosing(thread, start, cpu, np.zeros(n, np.int8), everyone, everyone), dtype=np.int64)
    item_call, item_ns, item_category = _device_work(trace, op_ids, names, name, wanted)
    launched = item_call >= 0
    self_ns = np.bincount(item_call[launched], weights=item_ns[launched], minlength=n)
    self_n = np.bincount(item_call[launched], minlength=n).astype(np.float64)
    total_ns, total_n = _subtree_sums(parent, self_ns, self_n)
    line, lines = _lines(ops.column("call_site")) if n else (np.zeros(0, np.int64), [])
    return OpCalls(names=names, name=name, op_id=op_ids, lines=lines, line=line, parent=parent, cpu_ns=cpu, self_ns=_exact(self_ns), self_n=_exact(self_n),
                   total_ns=_exact(total_ns), total_n=_exact(total_n), item_call=item_call, item_ns=item_ns,
                   item_category=item_category)  # fmt: skip


def _lines(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """(a code per operator into the model lines of their call sites (-1: none), the lines)."""
    if column.null_count == len(column):
        return np.full(len(column), -1, np.int64), []
    codes, sites = dictionary_codes(column)
    found: dict[str, int] = {}
    remap = np.array([found.setdefault(site_line(s), len(found)) if s is not None else -1 for s in sites] + [-1], dtype=np.int64)
    return remap[np.where(codes >= 0, codes, len(sites))], list(found)


def device_rows(trace: Trace, op_ids: np.ndarray) -> np.ndarray:
    """Rows of the engine slices table that are device work launched by the operators `op_ids`."""
    slices = trace["engine_slices"]
    if not len(op_ids) or not slices.num_rows:
        return np.zeros(0, np.int64)
    codes, kinds = dictionary_codes(slices.column("engine_kind"))
    device = np.array([k in {e.value for e in DEVICE_ENGINES} for k in kinds], dtype=bool)
    return np.flatnonzero(device[codes] & np.isin(_ints(slices.column("op_id")), op_ids)).astype(np.int64)


def _ints(column: pa.ChunkedArray) -> np.ndarray:
    return pc.int_values(column.combine_chunks()) if len(column) else np.zeros(0, np.int64)


def _exact(values: np.ndarray) -> np.ndarray:
    """Float sums of integers (exact below 2**53) as int64."""
    return np.rint(values).astype(np.int64)


def _subtree_sums(parent: np.ndarray, *values: np.ndarray) -> list[np.ndarray]:
    """Each value summed over every call's subtree (itself and the calls nested in it), deepest first."""
    depth = np.zeros(len(parent), dtype=np.int64)
    up = parent.copy()
    while (live := up >= 0).any():
        depth[live] += 1
        up[live] = parent[up[live]]
    sums = [v.astype(np.float64, copy=True) for v in values]
    for d in range(int(depth.max(initial=0)), 0, -1):
        rows = np.flatnonzero(depth == d)
        for s in sums:
            s += np.bincount(parent[rows], weights=s[rows], minlength=len(parent))
    return sums


def _device_work(trace: Trace, op_ids: np.ndarray, names: list[str], name: np.ndarray,
                 wanted: list[int] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the call row that launched each piece of device work of the regions `wanted` (None: all) (-1: none), its
    time in ns, its category code). Work with an operator belongs to that operator's region; work without one, to
    the region of its launch."""
    slices = trace["engine_slices"]
    device = pc.is_in(slices.column("engine_kind"), pa.array([e.value for e in DEVICE_ENGINES]))
    device = pc.call("and", device, pc.call("not_equal", slices.column("kind"), pa.scalar(SliceKind.ANNOTATION.value)))
    work = pc.call("filter", slices.select(["region_id", "name", "dur", "op_id", "correlation"]), device)
    if not work.num_rows:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    dur = _ints(work.column("dur"))
    if trace.run_info.time_unit is TimeUnit.CYCLES:  # a schedule in cycles: its work counts, with no time in ns
        dur = np.zeros_like(dur)
    item_op = _ints(work.column("op_id"))
    order = np.argsort(op_ids, kind="stable")
    at = np.minimum(np.searchsorted(op_ids[order], item_op), max(len(order) - 1, 0))
    found = (item_op >= 0) & (len(order) > 0)
    found[found] = op_ids[order[at[found]]] == item_op[found]
    call = np.where(found, order[at] if len(order) else -1, -1)
    keep = found | (item_op < 0)  # an operator of these regions, or none (then the region of its launch decides)
    if wanted is not None:
        keep = found | ((item_op < 0) & np.isin(_launch_regions(trace, work), np.asarray(wanted, dtype=np.int64)))
    codes, slice_names = dictionary_codes(work.column("name"))
    said = np.array([CATEGORIES.index(c) if (c := kernel_category(s)) is not None else -1 for s in slice_names] + [-1],
                    dtype=np.int64)[codes]  # fmt: skip
    op_category = np.array([CATEGORIES.index(operator_category(s)) for s in names] + [_OTHER], dtype=np.int64)
    by_op = op_category[np.where(call >= 0, name[np.maximum(call, 0)] if len(name) else -1, -1)]
    category = np.where(said >= 0, said, by_op)
    return call[keep], dur[keep], category[keep]


def _launch_regions(trace: Trace, work: pa.Table) -> np.ndarray:
    """The region of each piece of device work's launch: its runtime call's (by correlation id) when the trace
    holds the call, else its own."""
    own = _ints(work.column("region_id"))
    calls = trace["runtime_calls"]
    corr = _ints(work.column("correlation"))
    if not calls.num_rows or not (corr >= 0).any():
        return own
    call_corr, call_region = _ints(calls.column("correlation")), _ints(calls.column("region_id"))
    order = np.argsort(call_corr, kind="stable")
    at = np.minimum(np.searchsorted(call_corr[order], corr), len(order) - 1)
    hit = (corr >= 0) & (call_corr[order[at]] == corr)
    return np.where(hit, call_region[order[at]], own)


def device_by_operator(calls: OpCalls) -> pd.DataFrame:
    """One row per operator name (OPS_COLUMNS): calls, device calls, self and total device time, CPU time, its
    category and its share of the regions' device time; by self device time, then total, then CPU time (a run
    without device work reads as a CPU profile), then name."""
    k = len(calls.names)
    if not k:
        return pd.DataFrame(columns=OPS_COLUMNS)
    sums = {c: np.bincount(calls.name, weights=getattr(calls, c), minlength=k)
            for c in ("self_ns", "total_ns", "cpu_ns")}  # fmt: skip
    device_calls = np.bincount(calls.name, weights=calls.total_n > 0, minlength=k)
    total = calls.device_ns
    frame = pd.DataFrame({
        "operator": calls.names, "calls": np.bincount(calls.name, minlength=k), "device_calls": _exact(device_calls),
        "device_self_ns": _exact(sums["self_ns"]), "device_total_ns": _exact(sums["total_ns"]), "cpu_ns": _exact(sums["cpu_ns"]),
        "category": [CATEGORIES[c].value for c in calls.name_categories()],
        "share": sums["self_ns"] / total if total else np.zeros(k)})  # fmt: skip
    frame = frame[frame["calls"] > 0]
    order = np.lexsort((frame["operator"].to_numpy(), -frame["cpu_ns"].to_numpy(), -frame["device_total_ns"].to_numpy(),
                        -frame["device_self_ns"].to_numpy()))  # fmt: skip
    return frame.iloc[order].reset_index(drop=True)[OPS_COLUMNS]


def category_totals(calls: OpCalls) -> pd.DataFrame:
    """Device time per category (CATEGORY_COLUMNS), every category listed, in the order of `OpCategory`: each
    piece of device work counted once, in its own category."""
    spent = np.bincount(calls.item_category, weights=calls.item_ns, minlength=len(CATEGORIES)) if len(calls.item_ns) else np.zeros(len(CATEGORIES))
    total = spent.sum()
    return pd.DataFrame({"category": [c.value for c in CATEGORIES], "device_ns": _exact(spent),
                         "share": spent / total if total else np.zeros(len(CATEGORIES))})  # fmt: skip

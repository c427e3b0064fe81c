"""A port diff: two runs of the same model (two devices, eager and compiled, measured and predicted), operator by
operator, even where the backends lower an operator differently.

Rows are operators by name. An operator whose name occurs on one side only (``aten::cudnn_convolution`` on CUDA,
``aten::miopen_convolution`` on ROCm; flash vs efficient attention under ``aten::scaled_dot_product_attention``)
is folded into the lowest operator around it whose name occurs on both sides, and listed there as that side's
own name; one with no such ancestor keeps a row of its own. A row's device time is the self device time of its
operator's calls and of every call folded into it, so the rows of a side sum to the device time its operators
launched. Device work is compared by what it does (its category, `op_categories`) and by the operator that
launched it, never by the kernel's vendor name.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .op_device import CATEGORIES, OpCalls, categories_by_spend, category_totals, op_calls
from .trace import Trace

__all__ = ["PORT_CATEGORY_COLUMNS", "PORT_COLUMNS", "PORT_LINE_COLUMNS", "PortDiff", "port_diff", "port_diff_of", "row_keys", "row_op_ids"]

PORT_COLUMNS = ["operator", "category", "a_calls", "b_calls", "a_device_self_ns", "b_device_self_ns", "delta_ns", "ratio",
                "a_cpu_ns", "b_cpu_ns", "a_ops", "b_ops"]  # fmt: skip
PORT_CATEGORY_COLUMNS = ["category", "a_device_ns", "b_device_ns", "delta_ns", "ratio"]
PORT_LINE_COLUMNS = ["line", "a_device_ns", "b_device_ns", "delta_ns", "ratio"]


@dataclasses.dataclass(frozen=True)
class PortDiff:
    """ops: one row per aligned operator (PORT_COLUMNS; `a_ops` / `b_ops`: that side's own operator names folded
    into the row), what got slower first; categories: device time per category on each side
    (PORT_CATEGORY_COLUMNS, every category); lines: device time per model line (the call site of the operator
    that launched it, PORT_LINE_COLUMNS), what got slower first, empty when neither trace has call sites;
    unattributed: device work of A / of B launched outside any operator (in no row, in the categories)."""

    ops: pd.DataFrame
    categories: pd.DataFrame
    lines: pd.DataFrame
    unattributed: tuple[int, int]


def row_keys(calls: OpCalls, shared: set[str]) -> np.ndarray:
    """Per call: the name code of the row it counts in, its own name when `shared` holds it, else the nearest
    enclosing call's whose name it holds, else its own."""
    is_shared = np.array([n in shared for n in calls.names] + [False], dtype=bool)
    key = np.full(len(calls.name), -1, dtype=np.int64)
    at = np.arange(len(calls.name))
    while (live := (key < 0) & (at >= 0)).any():
        hit = live & is_shared[np.where(at >= 0, calls.name[np.maximum(at, 0)] if len(at) else -1, -1)]
        key[hit] = calls.name[at[hit]]
        at = np.where(live & ~hit, calls.parent[np.maximum(at, 0)], -1)
    return np.where(key >= 0, key, calls.name)


def row_op_ids(calls: OpCalls, other: OpCalls, operator: str) -> np.ndarray:
    """The op ids of the calls of `calls` that count in the port diff's row `operator` (the other side: `other`)."""
    if not len(calls.name):
        return np.zeros(0, np.int64)
    keys = row_keys(calls, set(calls.names) & set(other.names))
    return calls.op_id[np.asarray(calls.names, dtype=object)[keys] == operator]


def _side(calls: OpCalls, shared: set[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """One side's rows (per row name: calls of that operator, the self device time folded into it, CPU time of its
    own calls, its other names with device time) and the row name of each piece of device work an operator
    launched."""
    keys = row_keys(calls, shared)
    names = np.array(calls.names, dtype=object)
    frame = pd.DataFrame({"operator": names[keys], "own": names[calls.name], "device": calls.self_ns,
                          "cpu": np.where(keys == calls.name, calls.cpu_ns, 0), "call": keys == calls.name})  # fmt: skip
    rows = frame.groupby("operator", sort=False).agg(calls=("call", "sum"), device_self_ns=("device", "sum"), cpu_ns=("cpu", "sum"))
    folded = frame[(frame["own"] != frame["operator"]) & (frame["device"] > 0)]
    rows["ops"] = folded.groupby("operator")["own"].agg(lambda s: sorted(set(s))).reindex(rows.index)
    rows["ops"] = rows["ops"].apply(lambda v: v if isinstance(v, list) else [])
    return rows, names[keys[calls.item_call[calls.item_call >= 0]]]


def port_diff(trace_a: Trace, regions_a: list[int] | None, trace_b: Trace, regions_b: list[int] | None) -> PortDiff:
    """The port diff of A's regions (None: the whole run) against B's."""
    return port_diff_of(op_calls(trace_a, regions_a), op_calls(trace_b, regions_b))


def port_diff_of(calls_a: OpCalls, calls_b: OpCalls) -> PortDiff:
    """The port diff of two sides' operator calls (`op_calls`)."""
    shared = set(calls_a.names) & set(calls_b.names)
    (rows_a, work_a), (rows_b, work_b) = _side(calls_a, shared), _side(calls_b, shared)
    ops = rows_a.add_prefix("a_").join(rows_b.add_prefix("b_"), how="outer")
    for side in "ab":
        for column in ("calls", "device_self_ns", "cpu_ns"):
            ops[f"{side}_{column}"] = ops[f"{side}_{column}"].fillna(0).astype("int64")
        ops[f"{side}_ops"] = ops[f"{side}_ops"].apply(lambda v: v if isinstance(v, list) else [])
    ops = ops.reset_index(names="operator")
    ops["delta_ns"] = ops["b_device_self_ns"] - ops["a_device_self_ns"]
    a_ns, b_ns = ops["a_device_self_ns"].to_numpy(), ops["b_device_self_ns"].to_numpy()
    ops["ratio"] = [b / a if a else None for a, b in zip(a_ns.tolist(), b_ns.tolist(), strict=True)]
    # a row's category: its operator's by name, else the one its device work on both sides spent most time in
    row = pd.Index(ops["operator"]).get_indexer(np.concatenate([work_a, work_b]))
    launched = [c.item_call >= 0 for c in (calls_a, calls_b)]
    categories = categories_by_spend(ops["operator"].tolist(), row, np.concatenate([calls_a.item_ns[launched[0]], calls_b.item_ns[launched[1]]]),
                                     np.concatenate([calls_a.item_category[launched[0]], calls_b.item_category[launched[1]]]))  # fmt: skip
    ops["category"] = [CATEGORIES[c].value for c in categories]
    order = np.lexsort((ops["operator"].to_numpy(dtype=str), -np.maximum(a_ns, b_ns), -ops["delta_ns"].to_numpy()))
    ops = ops.iloc[order].reset_index(drop=True)[PORT_COLUMNS]
    return PortDiff(ops=ops, categories=_categories(calls_a, calls_b), lines=_lines(calls_a, calls_b),
                    unattributed=(calls_a.unattributed_ns, calls_b.unattributed_ns))  # fmt: skip


def _lines(calls_a: OpCalls, calls_b: OpCalls) -> pd.DataFrame:
    """Self device time per model line on each side (the calls' own call sites), lines with device time only."""
    sides = []
    for c in (calls_a, calls_b):
        sited = c.line >= 0
        spent = np.bincount(c.line[sited], weights=c.self_ns[sited], minlength=len(c.lines)) if len(c.lines) else np.zeros(0)
        sides.append(pd.Series(np.rint(spent).astype(np.int64), index=pd.Index(c.lines, dtype=object), dtype="int64"))
    frame = pd.concat(sides, axis=1, keys=["a_device_ns", "b_device_ns"]).fillna(0).astype("int64")
    frame = frame[(frame["a_device_ns"] > 0) | (frame["b_device_ns"] > 0)].reset_index(names="line")
    frame["delta_ns"] = frame["b_device_ns"] - frame["a_device_ns"]
    frame["ratio"] = [b / a if a else None for a, b in zip(frame["a_device_ns"].tolist(), frame["b_device_ns"].tolist(), strict=True)]
    frame = frame.sort_values(["delta_ns", "line"], ascending=[False, True], kind="stable")
    return frame.reset_index(drop=True)[PORT_LINE_COLUMNS]


def _categories(calls_a: OpCalls, calls_b: OpCalls) -> pd.DataFrame:
    """Device time per category on each side: every piece of device work in its own category."""
    a, b = (category_totals(c)["device_ns"].to_numpy() for c in (calls_a, calls_b))
    return pd.DataFrame({"category": [c.value for c in CATEGORIES], "a_device_ns": a, "b_device_ns": b, "delta_ns": b - a,
                         "ratio": [y / x if x else None for x, y in zip(a.tolist(), b.tolist(), strict=True)]})  # fmt: skip

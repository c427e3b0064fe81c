"""A prediction against a measurement: a predicted run and a measured run of the same model, operator by operator,
so a user sees where the model of the device (the target's figures) is wrong.

An operator's *predicted* time is the time of the predicted run's work it did itself: its slices on the target's
compute engines and DMA engines, and on the host lane (a fallback, a read of a device value), not its dispatch or
its compile. Its *measured* time is its own device work (kernels, copies) where the measured run has device work,
else (a CPU run: the host is the device) its own host time, its calls' time less that of the calls nested in them.
Operators line up by name as in the port diff (`port_diff.row_keys`: an operator one side lacks counts in the
lowest enclosing operator both sides have). Each row's cost is labelled by where the predicted run's figures for it
come from (`CostLabel`): the figures of the engine that did most of its predicted work.
"""

from __future__ import annotations

import dataclasses
import enum
import re

import numpy as np
import pandas as pd

from . import arrow_compute as pc
from .catalog import SourceKind
from .op_categories import operator_category
from .op_device import OpCalls, op_calls
from .port_diff import row_keys
from .schema import DEVICE_ENGINES, EngineKind, SliceKind
from .trace import Trace
from .viewport import dictionary_codes

__all__ = ["CHECK_COLUMNS", "CostLabel", "PredictionCheck", "cost_label", "prediction_check", "prediction_check_of"]

CHECK_COLUMNS = ["operator", "kind", "predicted_calls", "measured_calls", "predicted_ns", "measured_ns", "error_ns",
                 "abs_error_ns", "error_pct", "cost"]  # fmt: skip
TOTAL = "total"

_HOST_WORK = {SliceKind.COMPUTE.value, SliceKind.FALLBACK.value, SliceKind.SYNC.value}
_CALIBRATED = re.compile(r"^measured:.*, n=\d+")  # what `portscope targets calibrate` writes


class CostLabel(enum.Enum):
    """Where a predicted cost comes from: a device's measurement, a calibration from a trace (`targets calibrate`),
    a datasheet, or an assumption."""

    MEASURED = "measured"
    CALIBRATED = "calibrated"
    DATASHEET = "datasheet"
    ASSUMED = "assumed"


_WEAKEST_FIRST = [CostLabel.ASSUMED, CostLabel.DATASHEET, CostLabel.CALIBRATED, CostLabel.MEASURED]


def cost_label(source: str) -> CostLabel:
    """The label of one figure's recorded source text ("measured: a.json, n=61, ..." -> CALIBRATED)."""
    kind = SourceKind.of_text(source)
    if kind is SourceKind.MEASURED:
        return CostLabel.CALIBRATED if _CALIBRATED.match(source) else CostLabel.MEASURED
    return CostLabel.DATASHEET if kind is SourceKind.DATASHEET else CostLabel.ASSUMED


@dataclasses.dataclass(frozen=True)
class PredictionCheck:
    """rows: one per aligned operator (CHECK_COLUMNS), largest absolute error first, then a total row (operator
    TOTAL); predicted: which side ("A" or "B") is the prediction; target: its target's name; measured_by: what the
    measured side's time is ("device" or "host"); labels: label -> figure paths the predicted run's figures carry."""

    rows: pd.DataFrame
    predicted: str
    target: str
    measured_by: str
    labels: dict[CostLabel, list[str]]


def prediction_check(trace_a: Trace, regions_a: list[int] | None, trace_b: Trace,
                     regions_b: list[int] | None) -> PredictionCheck | None:
    """The check of whichever of A and B is predicted against the other (None unless exactly one is predicted)."""
    if trace_a.predicted == trace_b.predicted:
        return None
    return prediction_check_of(trace_a, op_calls(trace_a, regions_a), trace_b, op_calls(trace_b, regions_b))


def prediction_check_of(trace_a: Trace, calls_a: OpCalls, trace_b: Trace, calls_b: OpCalls) -> PredictionCheck:
    """`prediction_check` from each side's operator calls (`op_calls`), read once by the caller."""
    a_predicted = trace_a.predicted
    (pt, pcalls), (mt, mcalls) = ((trace_a, calls_a), (trace_b, calls_b)) if a_predicted else ((trace_b, calls_b), (trace_a, calls_a))
    sources = pt.run_info.extra.get("cost_sources")
    sources = sources if isinstance(sources, dict) else {}
    p_ns, engine = _predicted_work(pt, pcalls)
    m_ns, measured_by = _measured_work(mt, mcalls)
    shared = set(pcalls.names) & set(mcalls.names)
    pside = _side(pcalls, shared, p_ns, engine)
    mside = _side(mcalls, shared, m_ns, None)
    rows = pside.add_suffix("_p").join(mside.add_suffix("_m"), how="outer")
    rows = rows.rename(columns={"calls_p": "predicted_calls", "calls_m": "measured_calls", "ns_p": "predicted_ns",
                                "ns_m": "measured_ns"})
    for column in ("predicted_calls", "measured_calls", "predicted_ns", "measured_ns"):
        rows[column] = rows[column].fillna(0).astype("int64")
    rows = rows[(rows["predicted_ns"] > 0) | (rows["measured_ns"] > 0)].reset_index(names="operator")
    rows["kind"] = [operator_category(n).value for n in rows["operator"]]
    rows["cost"] = [_row_label(e, k, sources) for e, k in zip(rows["engine_p"], rows["kind"], strict=True)]
    rows = _errors(rows)
    rows = rows.sort_values(["abs_error_ns", "operator"], ascending=[False, True], kind="stable")
    total = _errors(pd.DataFrame([{"operator": TOTAL, "kind": "", "cost": _run_label(sources),
                                   **{c: int(rows[c].sum()) for c in ("predicted_calls", "measured_calls", "predicted_ns", "measured_ns")}}]))
    out = pd.concat([rows, total], ignore_index=True)[CHECK_COLUMNS]
    labels: dict[CostLabel, list[str]] = {}
    for figure, text in sorted(sources.items()):
        labels.setdefault(cost_label(str(text)), []).append(figure)
    return PredictionCheck(rows=out, predicted="A" if a_predicted else "B", target=pt.run_info.target or "",
                           measured_by=measured_by, labels=labels)


def _errors(rows: pd.DataFrame) -> pd.DataFrame:
    rows["error_ns"] = rows["predicted_ns"] - rows["measured_ns"]
    rows["abs_error_ns"] = rows["error_ns"].abs()
    rows["error_pct"] = [100.0 * e / m if m else None for e, m in zip(rows["error_ns"].tolist(), rows["measured_ns"].tolist(), strict=True)]
    return rows


def _side(calls: OpCalls, shared: set[str], ns: np.ndarray, engine: np.ndarray | None) -> pd.DataFrame:
    """Per row name: the calls of that operator, the time of every call counted in it, and (predicted side) the
    engine that did most of that time."""
    keys = row_keys(calls, shared) if len(calls.name) else np.zeros(0, np.int64)
    names = np.array(calls.names, dtype=object)
    frame = pd.DataFrame({"row": names[keys], "ns": ns, "call": keys == calls.name})
    out = frame.groupby("row", sort=False).agg(calls=("call", "sum"), ns=("ns", "sum"))
    if engine is not None:
        frame["engine"] = engine
        spent = frame[frame["engine"] != ""].groupby(["row", "engine"])["ns"].sum()
        best = spent.sort_values(ascending=False, kind="stable").reset_index().drop_duplicates("row").set_index("row")["engine"]
        out["engine"] = best.reindex(out.index).fillna("")
    else:
        out["engine"] = ""
    return out


def _predicted_work(trace: Trace, calls: OpCalls) -> tuple[np.ndarray, np.ndarray]:
    """Per call: the time of its own work in the predicted schedule (compute and DMA engines; compute, fallback
    and sync slices of the host lane), and the engine figures that timed most of it ("engines.<name>", "host",
    "" for none)."""
    slices = trace["engine_slices"]
    n = len(calls.name)
    ns, engine = np.zeros(n, np.int64), np.full(n, "", dtype=object)
    if not slices.num_rows or not n:
        return ns, engine
    kind_codes, kinds = dictionary_codes(slices.column("engine_kind"))
    what_codes, whats = dictionary_codes(slices.column("kind"))
    engine_codes, engines = dictionary_codes(slices.column("engine"))
    device = np.array([k in {e.value for e in DEVICE_ENGINES} for k in kinds] + [False], dtype=bool)[kind_codes]
    host = np.array([k == EngineKind.HOST.value for k in kinds] + [False], dtype=bool)[kind_codes]
    work = np.array([w in _HOST_WORK for w in whats] + [False], dtype=bool)[what_codes]
    annotation = np.array([w == SliceKind.ANNOTATION.value for w in whats] + [False], dtype=bool)[what_codes]
    keep = (device & ~annotation) | (host & work)
    row = _call_rows(calls, pc.int_values(slices.column("op_id").combine_chunks()))
    keep &= row >= 0
    dur = pc.int_values(slices.column("dur").combine_chunks())
    np.add.at(ns, row[keep], dur[keep])
    timed_by = np.array([f"engines.{e}" for e in engines] + ["host", ""], dtype=object)
    lane = np.where(host, len(engines), np.where(engine_codes >= 0, engine_codes, len(engines) + 1))
    by = pd.DataFrame({"row": row[keep], "engine": timed_by[lane[keep]], "ns": dur[keep]})
    if len(by):
        most = by.groupby(["row", "engine"])["ns"].sum().sort_values(ascending=False, kind="stable").reset_index()
        most = most.drop_duplicates("row")
        engine[most["row"].to_numpy()] = most["engine"].to_numpy()
    return ns, engine


def _measured_work(trace: Trace, calls: OpCalls) -> tuple[np.ndarray, str]:
    """Per call: its own device work's time where the run has device work ("device"), else its own host time:
    its time less that of the calls nested in it ("host")."""
    if calls.device_ns > 0:
        return calls.self_ns.astype(np.int64), "device"
    own = calls.cpu_ns.astype(np.int64).copy()
    nested = calls.parent >= 0
    np.subtract.at(own, calls.parent[nested], calls.cpu_ns[nested])
    return np.maximum(own, 0), "host"


def _call_rows(calls: OpCalls, op_ids: np.ndarray) -> np.ndarray:
    """The call row of each op id (-1: not a call of these regions)."""
    order = np.argsort(calls.op_id, kind="stable")
    if not len(order):
        return np.full(len(op_ids), -1, np.int64)
    at = np.minimum(np.searchsorted(calls.op_id[order], op_ids), len(order) - 1)
    return np.where((op_ids >= 0) & (calls.op_id[order[at]] == op_ids), order[at], -1)


def _figures_of(engine: str, kind: str, sources: dict[str, str]) -> list[str]:
    """The recorded figures that time an operator of `kind` on `engine` ("engines.<name>": the kind's own figures
    where the target has them, else the engine's; "host": the host's cost figures)."""
    if engine == "host":
        return [f for f in ("cost.dispatch_ns", "cost.host_flops_per_ns", "cost.sync_ns") if f in sources]
    own = [f for f in sources if f.startswith(f"{engine}.kinds.{kind}.")]
    return own or [f for f in sources if f.startswith(engine + ".") and ".kinds." not in f]


def _row_label(engine: object, kind: str, sources: dict[str, str]) -> str:
    """A row's cost label: the weakest source among the figures that time the engine that did most of its work."""
    if not isinstance(engine, str) or not engine:
        return ""
    labels = {cost_label(str(sources[f])) for f in _figures_of(engine, kind, sources)}
    label = next((label.value for label in _WEAKEST_FIRST if label in labels), "")
    return f"{engine.removeprefix('engines.')}: {label}" if label else ""


def _run_label(sources: dict[str, str]) -> str:
    """The whole run's: how many figures carry each label ("3 calibrated, 10 assumed")."""
    counts = [cost_label(str(t)) for t in sources.values()]
    return ", ".join(f"{counts.count(label)} {label.value}" for label in reversed(_WEAKEST_FIRST) if label in counts)

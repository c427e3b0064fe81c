"""Compare page, prediction check section: when one run is a prediction and the other a measurement of the same
model, each operator's predicted time against its measured time, what the model of the device gets most wrong
first (ingest/prediction_check.py), each cost labelled measured, calibrated, datasheet or assumed."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, html

from portscope.ingest.prediction_check import TOTAL, PredictionCheck, prediction_check_of
from portscope.ingest.trace import Trace

from .. import ids
from ..components import fmt_int, problem, text_table
from ..context import store
from ..time_axis import fmt_duration
from .compare_port import calls_of


def _duration(v: Any) -> str:
    return fmt_duration(v) if v else "0"


def _signed_duration(v: Any) -> str:
    return ("+" if v > 0 else "−" if v < 0 else "") + _duration(abs(v)) if v is not None else ""


def _pct(v: Any) -> str:
    return "-" if v is None or v != v else f"{v:+.0f} %"


def columns(check: PredictionCheck) -> list[tuple[str, str, Any]]:
    p, m = check.predicted, "B" if check.predicted == "A" else "A"
    return [("operator", "Operator", None), ("kind", "Kind", None),
            ("predicted_calls", f"{p} calls (predicted)", fmt_int), ("measured_calls", f"{m} calls (measured)", fmt_int),
            ("predicted_ns", "Predicted", _duration), ("measured_ns", "Measured", _duration),
            ("error_ns", "Error", _signed_duration), ("error_pct", "Error %", _pct), ("cost", "Cost figures", None)]  # fmt: skip


def section(trace_a: Trace, trace_b: Trace) -> html.Div:
    """The section's place on the page (empty unless exactly one of the runs is predicted); the callback fills it."""
    if trace_a.predicted == trace_b.predicted:
        return html.Div(html.Div(id=ids.COMPARE_PREDICTION), id=ids.COMPARE_PREDICTION_SECTION)
    return html.Div([
        html.H3("Predicted against measured, per operator"),
        html.Div("Each operator's time in the prediction (its own work on the target's engines and on the host, not "
                 "its dispatch) against the measurement (its own device work, or its own host time on a CPU run), "
                 "largest error first. Where the rows are far off, the target's figures for that kind of operator "
                 "are wrong: `portscope targets calibrate` fits them from a measured trace.", className="muted"),
        html.Div(id=ids.COMPARE_PREDICTION),
    ], id=ids.COMPARE_PREDICTION_SECTION)  # fmt: skip


def view(check: PredictionCheck) -> list[Any]:
    """The summary line, the labelled cost figures and the table (operators, then the total)."""
    rows = check.rows
    if len(rows) <= 1:
        return [html.P("Neither region has operator work to compare.", className="muted")]
    total = rows[rows["operator"] == TOTAL].iloc[0]
    measured = "its own device work" if check.measured_by == "device" else "its own host time (a CPU run)"
    summary = html.P([
        html.B(f"{check.predicted} is predicted for {check.target or 'a target'}: "),
        f"{_duration(total.predicted_ns)} of operator work against {_duration(total.measured_ns)} measured "
        f"({_pct(total.error_pct)}); each operator's measured time is {measured}.",
    ])  # fmt: skip
    labels = [html.Li([html.B(f"{label.value}: "), ", ".join(figures)]) for label, figures in check.labels.items()]
    costs = [html.Div("The prediction's cost figures:", className="muted"), html.Ul(labels)] if labels else []
    return [summary, *costs, text_table(rows, columns(check), table_id=ids.COMPARE_PREDICTION_TABLE)]


def check_of(a: str, region_a: int, b: str, region_b: int) -> PredictionCheck:
    return store().memo(f"prediction-check:{a}:{int(region_a)}:{b}:{int(region_b)}",
                        lambda: prediction_check_of(store().trace(a), calls_of(a, region_a), store().trace(b), calls_of(b, region_b)))


def register(app: dash.Dash) -> None:
    @app.callback(
        Output(ids.COMPARE_PREDICTION, "children"),
        Input(ids.COMPARE_REGION_A, "value"),
        Input(ids.COMPARE_REGION_B, "value"),
        State(ids.COMPARE_KEY, "data"),
    )
    def show(region_a: int | None, region_b: int | None, key: dict[str, str]) -> Any:
        if store().trace(key["a"]).predicted == store().trace(key["b"]).predicted:
            return None  # two measurements or two predictions: nothing to check
        if region_a is None or region_b is None:
            return problem("pick a region on each side")
        return view(check_of(key["a"], region_a, key["b"], region_b))


__all__ = ["check_of", "columns", "register", "section", "view"]

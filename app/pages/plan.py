"""Plan: a static-shape compile plan (`portscope plan`) as charts against the sequence length, and its table."""

from __future__ import annotations

from typing import Any

import dash
from dash import dcc, html

from portscope.ingest.plan_report import fit_advice

from .. import ids, urls
from ..components import fmt_bytes, page, problem, text_table
from ..plan_charts import DECODE, MEMORY, PADDING, plan_chart
from .common import load, run_label


def _percent(v: Any) -> str:
    return "-" if v is None or v != v else f"{v:.1%}"


def _ms(v: Any) -> str:
    return "-" if v is None or v != v else f"{v / 1e6:.2f}"


def _fits(v: Any) -> str:
    return "?" if v is None or v != v else ("yes" if v else "NO")


PLAN_COLUMNS = [
    ("max_sequence_length", "Sequence", None),
    ("max_cache_length", "Cache", None),
    ("batch_size", "Batch", None),
    ("weight_bytes", "Weights", fmt_bytes),
    ("kv_cache_bytes", "KV cache", fmt_bytes),
    ("device_memory_bytes", "Memory", fmt_bytes),
    ("fits", "Fits", _fits),
    ("programs", "Programs", None),
    ("padding_waste", "Padding", _percent),
    ("prompts_over_sequence", "Prompts refused", None),
    ("prefill_ns", "Prefill (ms)", _ms),
    ("decode_ns_per_token", "Decode/token (ms)", _ms),
    ("h2d_bytes_per_token", "H2D/token", fmt_bytes),
    ("d2h_bytes_per_token", "D2H/token", fmt_bytes),
]


def layout(run_id: str = "", **_query: str) -> html.Div:
    trace, error = load(run_id)
    if trace is None:
        return page("Plan", error)
    frame = trace["plan"].to_pandas()
    back = html.Div([dcc.Link("Run", href=urls.run(run_id))], className="links")
    if not len(frame):
        return page("Plan", back, problem(f"{run_label(run_id, trace)} has no plan (write one with `portscope plan`)."))
    memory = frame["memory_bytes"].dropna()
    source = frame["cost_source"].dropna()
    charts: list[Any] = [
        dcc.Graph(id=ids.PLAN_MEMORY, figure=plan_chart(frame, MEMORY, memory_bytes=int(memory.iloc[0]) if len(memory) else None),
                  config={"displaylogo": False}),
    ]
    if frame["padding_waste"].notna().any():
        charts.append(dcc.Graph(id=ids.PLAN_PADDING, figure=plan_chart(frame, PADDING), config={"displaylogo": False}))
    else:
        charts.append(html.P("No padding waste: the plan was made without prompt lengths (--prompt-lengths FILE)."))
    if frame["decode_ns_per_token"].notna().any():
        charts.append(dcc.Graph(id=ids.PLAN_DECODE, figure=plan_chart(frame, DECODE, cost_source=str(source.iloc[0]) if len(source) else None),
                                config={"displaylogo": False}))
    info = trace.run_info
    model = info.model
    summary = (f"{model.get('class', 'model')}: {model.get('parameters', 0):,} parameters, {model.get('layers', '?')} layers, "
               f"{model.get('kv_heads', '?')} KV heads x {model.get('head_dim', '?')}; target {info.target or '?'}. "
               "Two programs at every length (one prefill, one decode); the KV cache is reserved on the device for "
               "batch x cache length.")
    return page(
        "Static-shape plan",
        back,
        html.P(summary),
        html.Div(charts, className="plan-charts"),
        html.H3("Per sequence length and batch"),
        text_table(frame.sort_values(["batch_size", "max_sequence_length"]), PLAN_COLUMNS, table_id=ids.PLAN_TABLE),
        html.Ul([html.Li(line) for line in fit_advice(trace["plan"].to_pylist(), (info.config.get("static_shapes") or {}).get("weight_bits"))],
                id=ids.PLAN_ADVICE),
        subtitle=run_label(run_id, trace),
    )


def register(app: dash.Dash) -> None:
    dash.register_page(__name__, path_template="/run/<run_id>/plan", order=3, name="Plan", title="portscope: plan", layout=layout)

"""Charts of a `portscope plan` table: figures against the compiled sequence length, one line per batch."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd

BATCH_COLOURS = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#9D755D", "#EECA3B")
GB = 1e9  # decimal, as the tables and the CLI print bytes


@dataclasses.dataclass(frozen=True)
class PlanChart:
    """One chart: which column, how it is scaled and named."""

    column: str
    title: str
    axis: str
    scale: float = 1.0


MEMORY = PlanChart("device_memory_bytes", "Device memory: weights + KV cache + activations (estimate)", "GB", 1 / GB)
PADDING = PlanChart("padding_waste", "Prefill padding waste at the prompt lengths", "% of computed positions", 100.0)
DECODE = PlanChart("decode_ns_per_token", "Decode time per token", "ms", 1e-6)
CHARTS = (MEMORY, PADDING, DECODE)


def plan_chart(frame: pd.DataFrame, chart: PlanChart, *, memory_bytes: int | None = None,
               cost_source: str | None = None) -> dict[str, Any]:
    """Lines of `chart.column` against max_sequence_length, one per batch size; for memory, the device's
    memory as a dashed line; for times, where the figures come from in the title."""
    data = []
    for i, (batch, rows) in enumerate(frame.sort_values("max_sequence_length").groupby("batch_size", sort=True)):
        values = rows[chart.column].astype(float) * chart.scale
        data.append({
            "type": "scatter",
            "mode": "lines+markers",
            "name": f"batch {int(batch)}",
            "x": rows["max_sequence_length"].astype(int).tolist(),
            "y": [None if v != v else v for v in values.tolist()],  # NaN (no figure) -> a gap
            "line": {"color": BATCH_COLOURS[i % len(BATCH_COLOURS)], "width": 2},
            "hovertemplate": f"batch {int(batch)}, sequence %{{x}}: %{{y:.3g}} {chart.axis}<extra></extra>",
        })
    shapes, annotations = [], []
    if chart is MEMORY and memory_bytes:
        limit = memory_bytes / GB
        highest = float(frame[chart.column].max()) * chart.scale
        if limit <= 2 * highest:  # the device's memory as a dashed line, near enough to compare
            shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": limit, "y1": limit,
                           "line": {"color": "#333", "dash": "dash", "width": 1.5}})
            annotations.append({"xref": "paper", "x": 0.01, "y": limit, "yanchor": "bottom", "showarrow": False,
                                "text": f"device memory {limit:.3g} GB", "font": {"size": 11}})
        else:  # far above every point: said, not drawn (it would flatten the lines)
            annotations.append({"xref": "paper", "yref": "paper", "x": 0.01, "y": 1, "yanchor": "top", "showarrow": False,
                                "text": f"device memory {limit:.3g} GB: above the chart", "font": {"size": 11}})
    title = chart.title + (f" ({cost_source} figures)" if chart is DECODE and cost_source else "")
    sequences = sorted(frame["max_sequence_length"].astype(int).unique().tolist())
    return {
        "data": data,
        "layout": {
            "height": 320,
            "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
            "title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
            "xaxis": {"title": {"text": "compiled sequence length (tokens)"}, "type": "log", "tickvals": sequences,
                      "ticktext": [str(s) for s in sequences], "gridcolor": "#eee"},
            "yaxis": {"title": {"text": chart.axis}, "rangemode": "tozero", "gridcolor": "#eee"},
            "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
            "shapes": shapes,
            "annotations": annotations,
            "plot_bgcolor": "white",
        },
    }

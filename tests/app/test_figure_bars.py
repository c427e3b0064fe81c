"""Bars of a timeline kind without the memory lanes' rows (those lanes are drawn as levels)."""

from __future__ import annotations

import math

import numpy as np

from portscope.app.figures import bars
from portscope.ingest.viewport import KINDS, Viewport


def test_bars_on_hidden_rows_are_left_out() -> None:
    # Three annotation bars: [0, 10) on row 0, [5, 20) on row 2 (a memory lane), [30, 40) on row 1.
    x = np.array([0, 10, np.nan, 5, 20, np.nan, 30, 40, np.nan])
    y = np.array([0, 0, 0, 2, 2, 2, 1, 1, 1], dtype=np.uint16)
    empty = {k: np.zeros(0) for k in KINDS}
    view = Viewport(x0=0, x1=40, px=1, x={**empty, "annotation": x}, y={**empty, "annotation": y},
                    rows={k: np.zeros(0, np.int64) for k in KINDS}, in_view=3, drawn=3)  # fmt: skip
    kept_x, kept_y = bars(view, "annotation", [2])
    assert [v if not math.isnan(v) else None for v in kept_x] == [0, 10, None, 30, 40, None]
    assert kept_y.tolist() == [0, 0, 0, 1, 1, 1]
    all_x, _ = bars(view, "annotation")
    assert len(all_x) == 9
    assert len(bars(view, "compute", [2])[0]) == 0


def test_breakdowns_of_few_signals_have_whole_ticks() -> None:
    """bert_small_h100's ProfilerStep#6: one signal each for three operators, 1 byte: ticks 0, 1 (not 0.2, 0.4...)."""
    import pandas as pd

    from portscope.app.figures import breakdown_figure

    frame = pd.DataFrame({"key": ["aten::_local_scalar_dense", "cudaDeviceSynchronize", "aten::item"],
                          "count": [1, 1, 1], "bytes": [1, 0, 0]})
    counts = breakdown_figure(frame, by="operator", metric="count")["layout"]["xaxis"]
    assert (counts["dtick"], counts["tickformat"], counts["title"]["text"]) == (1, ",d", "signals")
    volume = breakdown_figure(frame, by="operator", metric="bytes")["layout"]["xaxis"]
    assert (volume["dtick"], volume["tickformat"], volume["ticksuffix"]) == (1, "~s", "B")
    many = breakdown_figure(frame.assign(count=[40, 3, 1], bytes=[1_821_299_360, 0, 0]), by="operator", metric="bytes")
    assert "dtick" not in many["layout"]["xaxis"]  # plotly's own round ticks: 500MB, 1GB, ...

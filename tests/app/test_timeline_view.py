"""The timeline page's plain functions: click targets along every bar, the view and range kept in the URL, the clock
box keeping the page's key, and the search's status line saying what it matched.

The browser side (a real click on a long bar, the URL written by assets/timeline_keys.js and read back on a reload)
is tests/app/test_timeline_view_browser.py.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from portscope.app import ids
from portscope.app.pages import timeline, timeline_tools
from portscope.ingest import read_trace
from portscope.ingest.slice_search import SliceMatches
from portscope.ingest.viewport import KINDS, Lanes, Viewport

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
RMSNORM = "llama_fp16-npu_rmsnorm_narrow.arrow"  # its compiler lane: one 40 ms compile, 205,288 .. 40,205,288 ns


def viewport(bars: list[tuple[float, float, int]], x0: float, x1: float, kind: str = "compile") -> Viewport:
    """A viewport of `bars` (start, end, lane) of one kind, drawn as the timeline draws them: x0, x1, gap."""
    empty = {k: np.zeros(0) for k in KINDS}
    x = np.array([v for s, e, _ in bars for v in (s, e, np.nan)], np.float64)
    y = np.array([lane for _, _, lane in bars for _ in range(3)], np.uint16)
    return Viewport(x0=x0, x1=x1, px=(x1 - x0) / 2000, x={**empty, kind: x}, y={**empty, kind: y},
                    rows={k: np.zeros(0, np.int64) for k in KINDS}, in_view=len(bars), drawn=len(bars))


def test_a_long_bar_has_a_click_target_in_every_column_it_covers() -> None:
    from portscope.app.pages import timeline_hits

    # a view of 0..1000 in 250 columns (4 units each, centres at 2, 6, ... 998): a bar over the whole view on lane 2,
    # one over 100..300 on lane 0, one narrower than two columns (its ends are the targets) and one on a memory lane (4)
    assert timeline_hits.HIT_COLUMNS == 250
    view = viewport([(-50, 1_050, 2), (100, 300, 0), (500.2, 507.8, 1), (0, 1_000, 4)], 0, 1_000)
    x, y = timeline_hits.hit_points(view, lanes=5, hidden_rows=[4])
    assert y.dtype == np.uint16  # 10 bytes a point in a zoom's answer
    on = {lane: x[y == lane] for lane in range(5)}
    assert len(on[2]) == 250 and on[2][0] == 2 and on[2][-1] == 998  # every column, clipped to the view
    assert np.all(np.diff(on[2]) == 4)
    assert on[0].tolist() == [float(c) for c in range(102, 300, 4)]  # the columns whose centre lies on the bar
    assert len(on[1]) == 0 and len(on[4]) == 0 and len(on[3]) == 0
    # the middle of a long bar is never further than half a column from a target: Plotly reports a click there
    assert np.abs(on[2] - 500).min() <= 2
    # many lanes: fewer columns, never under MIN_HIT_COLUMNS; the points of a panel stay under MAX_HIT_POINTS
    x, _ = timeline_hits.hit_points(viewport([(0, 1_000, 0)], 0, 1_000), lanes=10_000)
    assert len(x) == timeline_hits.MIN_HIT_COLUMNS
    x, _ = timeline_hits.hit_points(viewport([(0, 1_000, k) for k in range(400)], 0, 1_000), lanes=400)
    assert len(x) <= timeline_hits.MAX_HIT_POINTS


def test_hit_traces_go_after_every_other_trace_and_name_their_panel() -> None:
    from portscope.app.pages import timeline_hits

    figure: dict[str, Any] = {"data": [{"name": k} for k in KINDS] + [{"name": "flows"}]}
    view = viewport([(0, 10, 0)], 0, 10)
    assert timeline_hits.add_hit_traces(figure, [view, view], [1, 1], [[], []]) == [len(KINDS) + 1, len(KINDS) + 2]
    assert [t["name"] for t in figure["data"][-2:]] == [timeline_hits.HITS] * 2
    assert figure["data"][-1]["yaxis"] == "y2" and figure["data"][-1]["hoverinfo"] == "none"
    assert timeline_hits.hit_panel([7, 8], 8) == 1 and timeline_hits.hit_panel([7, 8], 3) is None


@pytest.mark.parametrize(("text", "window"), [
    ("1000,20000", (1000.0, 20000.0)),
    ("18046880.3592,38635121.7672", (18046880.3592, 38635121.7672)),
    ("-5.5,7", (-5.5, 7.0)),
    (None, None), ("", None), ("1000", None), ("1,2,3", None), ("a,b", None), ("20,10", None), ("5,5", None),
    ("nan,1", None), ("0,inf", None),
])  # fmt: skip
def test_a_window_in_the_url(text: str | None, window: tuple[float, float] | None) -> None:
    assert timeline.window_from_query(text) == window


@pytest.fixture
def served(make_app, tmp_path: Path) -> tuple[Any, str]:
    """An app on the rmsnorm sample alone, and its run id."""
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(SAMPLES / RMSNORM, folder / RMSNORM)
    return make_app(trace_paths=(folder,)), read_trace(folder / RMSNORM).content_hash()


def find(node: Any, component_id: str) -> Any:
    """The component of a layout with that id (depth first)."""
    if getattr(node, "id", None) == component_id:
        return node
    children = getattr(node, "children", None)
    for child in children if isinstance(children, list) else [children] if children is not None else []:
        hit = find(child, component_id)
        if hit is not None:
            return hit
    return None


def text_of(node: Any) -> str:
    children = getattr(node, "children", node)
    if isinstance(children, list):
        return " ".join(text_of(c) for c in children)
    return str(children) if not hasattr(children, "children") else text_of(children)


def test_the_page_opens_on_the_view_and_range_of_its_url(served) -> None:
    app, run_id = served
    with app.server.test_request_context("/"):
        page = timeline.layout(run_id=run_id, view="10000000,30000000", range="15000000,25000000")
        figure = find(page, ids.TIMELINE_GRAPH).figure
        assert figure["layout"]["xaxis"]["range"] == [10_000_000, 30_000_000]
        assert figure["layout"]["selections"] == [{"type": "rect", "xref": "x", "yref": "y", "x0": 15_000_000,
                                                   "x1": 25_000_000, "y0": 6.5, "y1": -0.5}]  # 7 lanes, full height
        key = find(page, ids.TIMELINE_KEY).data
        assert key["window"] == [10_000_000, 30_000_000] and key["hit_traces"] == [len(figure["data"]) - 1]
        # the range dragged over is summed up under the timeline as the page opens: the compile alone runs there
        assert text_of(find(page, ids.TIMELINE_TOOLS.range_head)) == "15.0 ms to 25.0 ms (10 ms): 1 slice"
        assert text_of(find(page, ids.TIMELINE_STATUS)).startswith("2 bars drawn for 2 of 15 slices in view")
        # no URL state: the whole run, nothing selected
        page = timeline.layout(run_id=run_id, view="garbage")
        figure = find(page, ids.TIMELINE_GRAPH).figure
        assert figure["layout"]["xaxis"]["range"] == [0, 40_211_409] and "selections" not in figure["layout"]
        assert find(page, ids.TIMELINE_KEY).data["window"] is None


def test_a_click_in_the_middle_of_a_long_bar_selects_it(served) -> None:
    # what Plotly reports for a click at 50 % of the 40 ms compile: the hit point there, on the compiler lane (2)
    app, run_id = served
    with app.server.test_request_context("/"):
        page = timeline.layout(run_id=run_id)
        key = find(page, ids.TIMELINE_KEY).data
        hits = find(page, ids.TIMELINE_GRAPH).figure["data"][key["hit_traces"][0]]
        x = np.frombuffer(base64.b64decode(hits["x"]["bdata"]), np.float64)
        y = np.frombuffer(base64.b64decode(hits["y"]["bdata"]), np.uint16)
        middle = float(x[y == 2][np.argmin(np.abs(x[y == 2] - 20_205_288))])
        click = {"points": [{"curveNumber": key["hit_traces"][0], "x": middle, "y": 2}]}
        detail, _flows = timeline.click_update(key, click, None)
        assert detail.id == "slice-detail"
        facts = dict(zip([text_of(c) for c in detail.children[0::2]], [text_of(c) for c in detail.children[1::2]], strict=True))
        assert facts["name"] == "compile aten::mul.Tensor" and facts["duration"] == "40 ms (40,000,000 ns)"


def test_typing_a_clock_rate_keeps_the_rest_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # a cycle-unit run that is not stored: its extent and unit as the store would answer them
    monkeypatch.setattr(timeline, "extent", lambda run_ids: (0.0, 10.0))
    monkeypatch.setattr(timeline, "run_unit", lambda run_id: "cycles")
    key = {"run_ids": ["r"], "clock_hz": None, "match_traces": [40], "flow_traces": [41], "hit_traces": [42], "window": [0, 5]}
    _patch, new_key = timeline.clock_update(key, "1 GHz", None)
    assert new_key == {**key, "clock_hz": 1e9}  # a search, a click and a zoom still find their traces


def matches(n: int, operator_of: list[int], operators: tuple[str, ...] = ()) -> SliceMatches:
    empty = np.zeros(0)
    lanes = Lanes([], [], empty, empty, empty, np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    return SliceMatches(rows=np.arange(n), start=np.zeros(n), end=np.ones(n), lanes=lanes,
                        operator_of=np.array(operator_of, np.int64), operators=operators)


def test_the_search_says_what_it_matched() -> None:
    status = timeline_tools.search_status
    assert status([matches(25, [-1] * 25)]) == "25 slices match by name"
    assert status([matches(26, [0] * 26, ("aten::addmm",))]) == "26 slices match by their operator's name (aten::addmm)"
    assert status([matches(3, [-1, 0, 1], ("aten::addmm", "aten::_addmm_activation"))]) == (
        "3 slices match: 1 by name, 2 by their operator's name (aten::addmm, aten::_addmm_activation)")
    assert status([matches(1, [-1]), None]) == "1 slice matches by name"
    assert status([matches(0, [])]) == "0 slices match (slice and operator names are matched case-insensitively, any part)"
    many = tuple(f"aten::op{i}" for i in range(5))
    assert status([matches(5, list(range(5)), many)]).endswith("(aten::op0, aten::op1, aten::op2 and 2 more)")
    # two runs (a compare page): counted together, each operator named once
    assert status([matches(2, [0, 0], ("aten::addmm",)), matches(1, [0], ("aten::addmm",))]) == (
        "3 slices match by their operator's name (aten::addmm)")

"""Every component id of the viewer, in one place (no string concatenation elsewhere)."""

from __future__ import annotations

from dash import ALL

# shell (on every page)
UPLOAD_ZONE = "upload-zone"
UPLOAD_PROGRESS = "upload-progress"
UPLOAD_STATUS = "upload-status"
UPLOAD_RESULT = "upload-result"  # written by assets/upload.js through dash_clientside.set_props
UPLOAD_MESSAGES = "upload-messages"
SESSION_RUNS = "session-runs"  # run ids this browser uploaded (localStorage)
URL = "url"

# runs page
RUNS_TABLE = "runs-table"
RUNS_COMPARE = "runs-compare"

# run page
RUN_REGIONS = "run-regions"

# region page
SIGNAL_GRID = "signal-grid"
OPERATOR_GRID = "operator-grid"
OPERATOR_DETAIL = "operator-detail"
LINE_GRID = "line-grid"  # by source line
LINE_DETAIL = "line-detail"
BREAKDOWN_BY = "breakdown-by"
BREAKDOWN_GRAPH = "breakdown-graph"  # pattern type; see breakdown_graph()
OPS_GRID = "ops-grid"
REGION_KEY = "region-key"  # {"run_id", "region_id"} of the page

# timeline page
TIMELINE_GRAPH = "timeline-graph"
TIMELINE_STATUS = "timeline-status"
TIMELINE_DETAIL = "timeline-detail"
TIMELINE_KEY = "timeline-key"  # {"run_ids", "clock_hz", "titles", "match_traces"}
TIMELINE_CLOCK = "timeline-clock"  # clock rate typed for a cycle axis
TIMELINE_SEARCH = "timeline-search"
TIMELINE_SEARCH_NEXT = "timeline-search-next"
TIMELINE_SEARCH_PREV = "timeline-search-prev"
TIMELINE_SEARCH_STATUS = "timeline-search-status"
TIMELINE_MATCH = "timeline-match"  # {"text", "index"}: the search and the match stepped to
TIMELINE_RANGE = "timeline-range"  # tables of the time range dragged over

# plan page (portscope plan)
PLAN_MEMORY = "plan-memory"
PLAN_PADDING = "plan-padding"
PLAN_DECODE = "plan-decode"
PLAN_TABLE = "plan-table"

# compare page
COMPARE_KEY = "compare-key"
COMPARE_REGION_A = "compare-region-a"
COMPARE_REGION_B = "compare-region-b"
COMPARE_SIGNALS = "compare-signals"
COMPARE_OPERATORS = "compare-operators"
COMPARE_SITES = "compare-sites"
COMPARE_NUMERICS = "compare-numerics"
COMPARE_TIMELINES = "compare-timelines"


def run_pick(run_id: str) -> dict[str, str]:
    """The checkbox that picks a run for comparison on the runs page."""
    return {"type": "run-pick", "run": run_id}


RUN_PICK_ALL = {"type": "run-pick", "run": ALL}


def breakdown_graph(metric: str) -> dict[str, str]:
    """The breakdown bar chart of one metric ("count" or "bytes") on the region page."""
    return {"type": BREAKDOWN_GRAPH, "metric": metric}


BREAKDOWN_GRAPH_ALL = {"type": BREAKDOWN_GRAPH, "metric": ALL}

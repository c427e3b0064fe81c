"""Every component id of the viewer, in one place (no string concatenation elsewhere)."""

from __future__ import annotations

import dataclasses

from dash import ALL

# shell (on every page)
UPLOAD_ZONE = "upload-zone"
UPLOAD_PROGRESS = "upload-progress"
UPLOAD_STATUS = "upload-status"
UPLOAD_RESULT = "upload-result"  # written by assets/upload.js through dash_clientside.set_props
UPLOAD_MESSAGES = "upload-messages"
SESSION_RUNS = "session-runs"  # [run id, file name] of each run this browser uploaded (localStorage)
URL = "url"

# runs page
RUNS_TABLE = "runs-table"
RUNS_COMPARE = "runs-compare"

# run page
RUN_REGIONS = "run-regions"
RUN_FILE = "run-file"  # the subtitle: the run's file, or the name this browser uploaded it under
RUN_PAGE_ID = "run-page-id"  # store: {"run_id", "file", "model_from_file"} of the run page shown
RUN_MODEL = "run-model"  # the model the run is about (its file's name when nothing names one)

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
REGION_DEVICE_GRID = "region-device-grid"  # device time per operator
REGION_DEVICE_CATEGORIES = "region-device-categories"
REGION_MEMORY_TABLE = "region-memory-table"  # memory per device
REGION_MEMORY_SITES = "region-memory-sites"

# timeline page
TIMELINE_GRAPH = "timeline-graph"
TIMELINE_STATUS = "timeline-status"
TIMELINE_DETAIL = "timeline-detail"
TIMELINE_KEY = "timeline-key"  # {"run_ids", "clock_hz", "titles", "match_traces"}
TIMELINE_CLOCK = "timeline-clock"  # clock rate typed for a cycle axis


@dataclasses.dataclass(frozen=True)
class TimelineTools:
    """Ids of a timeline's search and range tools (one set per page that has a timeline)."""

    search: str
    next: str
    prev: str
    status: str
    match: str  # store: {"text", "index"}: the search and the match stepped to
    range: str  # tables of the time range dragged over
    range_head: str
    range_engines: str
    range_operators: str
    range_signals: str

    @classmethod
    def named(cls, prefix: str) -> TimelineTools:
        return cls(*(f"{prefix}-{part}" for part in ("search", "search-next", "search-prev", "search-status", "match", "range",
                                                     "range-head", "range-engines", "range-operators", "range-signals")))

    def of_run(self, k: int) -> TimelineTools:
        """The range tables' ids for the k-th run of a compare page (the search ids are shared)."""
        return dataclasses.replace(self, **{f: f"{getattr(self, f)}-{k}" for f in ("range_head", "range_engines", "range_operators",
                                                                                 "range_signals")})


TIMELINE_TOOLS = TimelineTools.named("timeline")

# plan page (portscope plan)
PLAN_MEMORY = "plan-memory"
PLAN_PADDING = "plan-padding"
PLAN_DECODE = "plan-decode"
PLAN_TABLE = "plan-table"
PLAN_ADVICE = "plan-advice"  # the margin, and what to change where a setting does not fit

# ranks page (a multi-rank run: app/pages/ranks.py)
RANKS_TABLE = "ranks-table"
RANKS_HEATMAP = "ranks-heatmap"  # busy time by rank x step, the stragglers outlined
RANKS_STRAGGLERS = "ranks-stragglers"
RANKS_SLOW_OPERATORS = "ranks-slow-operators"
RANKS_COLLECTIVES = "ranks-collectives"  # collectives matched across ranks, largest arrival skew first
RANKS_COLLECTIVE_RANKS = "ranks-collective-ranks"
RANKS_COLLECTIVES_SECTION = "ranks-collectives-section"

# compare page
COMPARE_KEY = "compare-key"
COMPARE_REGION_A = "compare-region-a"
COMPARE_REGION_B = "compare-region-b"
COMPARE_SIGNALS = "compare-signals"
COMPARE_OPERATORS = "compare-operators"
COMPARE_SITES = "compare-sites"
COMPARE_NUMERICS = "compare-numerics"
COMPARE_TIMELINES = "compare-timelines"
COMPARE_TOOLS = TimelineTools.named("compare")
# compare page, schedules section (app/pages/compare_schedules.py)
COMPARE_SCHEDULES = "compare-schedules"
COMPARE_SCHEDULE_KEY = "compare-schedule-key"  # {"a", "b", "ra", "rb", "span"} of the aligned timelines
COMPARE_SCHEDULE_TIMELINES = "compare-schedule-timelines"
COMPARE_SCHEDULE_VERDICT = "compare-schedule-verdict"
COMPARE_SCHEDULE_ENGINES = "compare-schedule-engines"
COMPARE_SCHEDULE_CRITICAL = "compare-schedule-critical"
COMPARE_SCHEDULE_IDLE = "compare-schedule-idle"
COMPARE_SCHEDULE_DETAIL = "compare-schedule-detail"  # the clicked slice's facts
COMPARE_SCHEDULE_SLICE = "compare-schedule-slice"
# compare page, operator diff section (app/pages/compare_ops.py)
COMPARE_OPS = "compare-ops"
COMPARE_OPS_SET = "compare-ops-set"  # which change set the table lists
COMPARE_OPS_SUMMARY = "compare-ops-summary"
COMPARE_OPS_TABLE = "compare-ops-table"
COMPARE_PORT = "compare-port"  # operators aligned by what they compute (the port diff)
COMPARE_PORT_TABLE = "compare-port-table"  # with timelines to highlight on (two runs)
COMPARE_PORT_TABLE_ALONE = "compare-port-table-alone"  # two regions of one run: no timelines, nothing to highlight
COMPARE_PORT_CATEGORIES = "compare-port-categories"
COMPARE_PORT_STATUS = "compare-port-status"
COMPARE_PREDICTION = "compare-prediction"  # a predicted run against a measured one (app/pages/compare_prediction.py)
COMPARE_PREDICTION_SECTION = "compare-prediction-section"
COMPARE_PREDICTION_TABLE = "compare-prediction-table"
COMPARE_MEMORY = "compare-memory"  # memory of A and B (app/pages/memory_sections.py)
COMPARE_MEMORY_TABLE = "compare-memory-table"


def run_pick(run_id: str) -> dict[str, str]:
    """The checkbox that picks a run for comparison on the runs page."""
    return {"type": "run-pick", "run": run_id}


RUN_PICK_ALL = {"type": "run-pick", "run": ALL}


def breakdown_graph(metric: str) -> dict[str, str]:
    """The breakdown bar chart of one metric ("count" or "bytes") on the region page."""
    return {"type": BREAKDOWN_GRAPH, "metric": metric}


BREAKDOWN_GRAPH_ALL = {"type": BREAKDOWN_GRAPH, "metric": ALL}

# query page (SQL over the runs ticked: app/pages/query.py)
QUERY_RUNS = "query-runs"  # checklist of runs
QUERY_SQL = "query-sql"
QUERY_RUN = "query-run"  # the button
QUERY_ERROR = "query-error"  # DuckDB's message, under the box
QUERY_STATUS = "query-status"
QUERY_GRID = "query-grid"
QUERY_CSV = "query-csv"  # download the grid as CSV

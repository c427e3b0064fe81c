"""Viewer bench: a synthetic trace of N engine events written by the real writer, then the
server-side work behind each page, timed (no browser).

    .venv/bin/python bench/viewer_bench.py [--events 10000000] [--keep DIR]

Prints: file size and write time; opening the run (validate + hash + run row), cold and
from the shared store (a second worker: its own process); building the timeline index (nesting check included); the server's answer to a zoom
(full, 10 %, 1 %: bars, ticks, band labels) with its Patch size, also with a search's
highlights; a search's first pass; a range summary of 10 %; a click's flows; pages of the region's op table (N/10 ops in one region), plain and sorted; peak RSS.
Targets (issue 6): open <= 2 s, viewport <= 300 ms and <= 1 MB, op page <= 200 ms,
memory <= 2x file size.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from portscope.app.config import ViewerConfig
from portscope.app.data.tables import region_ops_page, timeline_slices
from portscope.app.figures import VIEW_PX, flow_lines, match_indices, timeline_figure
from portscope.app.pages import timeline_tools
from portscope.app.pages.timeline import panels, relayout_update
from portscope.app.server import create_app
from portscope.ingest import RunInfo, Source, write_trace
from portscope.ingest.range_summary import range_summary
from portscope.ingest.schema import TABLES
from portscope.ingest.trace import Trace
from portscope.ingest.viewport import reduce_viewport

ENGINES = [(f"stream {i}", "stream") for i in range(8)] + [("DMA h2d", "dma_h2d"), ("DMA d2h", "dma_d2h"), ("matrix 0", "matrix"), ("matrix 1", "matrix"), ("vector 0", "vector"), ("vector 1", "vector"), ("host", "host"), ("dispatch", "dispatch")]
KINDS = ["compute", "fallback", "transfer", "compile", "dispatch", "sync"]
OP_NAMES = [f"aten::op{i}" for i in range(200)]
SEARCH = "op17"  # matches op17 and op170..op179: 11 names of 200, ~5.5 % of the slices


def _dict(codes: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(values))


def synthetic_trace(events: int, seed: int = 0) -> Trace:
    """events engine slices on 16 engines, events/10 ops in one region, events/100 signals."""
    rng = np.random.default_rng(seed)
    n_ops = max(events // 10, 1)
    n_sig = max(events // 100, 1)
    per_engine = events // len(ENGINES)
    engine = np.repeat(np.arange(len(ENGINES)), per_engine)
    n = len(engine)
    gaps = rng.integers(5, 200, n)
    durs = rng.integers(1, 150, n)
    start = np.empty(n, np.int64)
    for e in range(len(ENGINES)):  # back to back per engine, with gaps
        sl = slice(e * per_engine, (e + 1) * per_engine)
        start[sl] = np.cumsum(gaps[sl] + durs[sl]) - durs[sl]
    span = int(start.max() + 200)
    kind = rng.integers(0, len(KINDS), n)
    op_id = rng.integers(0, n_ops, n)
    slices = pa.table(
        {
            "region_id": pa.array(np.where(start < span // 2, 0, 1).astype(np.int32)),
            "engine": _dict(engine, [e for e, _ in ENGINES]),
            "engine_kind": _dict(engine, [k for _, k in ENGINES]),
            "kind": _dict(kind, KINDS),
            "name": _dict(rng.integers(0, len(OP_NAMES), n), OP_NAMES),
            "start": pa.array(start),
            "dur": pa.array(durs.astype(np.int64)),
            "op_id": pa.array(op_id.astype(np.int64)),
            "bytes": pa.nulls(n, pa.int64()),
            "correlation": pa.nulls(n, pa.int64()),
            "module": pa.nulls(n, pa.dictionary(pa.int32(), pa.string())),
            "waited_on": pa.nulls(n, pa.dictionary(pa.int32(), pa.string())),
        },
        schema=TABLES["engine_slices"],
    )
    op_start = np.sort(rng.integers(0, span, n_ops))
    placement = rng.choice(4, n_ops, p=[0.85, 0.02, 0.1, 0.03])
    ops = pa.table(
        {
            "op_id": pa.array(np.arange(n_ops, dtype=np.int64)),
            "region_id": pa.array(np.zeros(n_ops, np.int32)),
            "name": _dict(rng.integers(0, len(OP_NAMES), n_ops), OP_NAMES),
            "start_ns": pa.array(op_start),
            "dur_ns": pa.array(rng.integers(100, 5000, n_ops)),
            "placement": _dict(placement, ["device", "host", "fallback", "graph"]),
            "device": _dict(np.zeros(n_ops), ["npu:0"]),
            "input_shapes": _dict(rng.integers(0, 3, n_ops), ["1x7x128;", "1x1x128;", "128x128;1x7x128"]),
            "input_strides": pa.nulls(n_ops, pa.dictionary(pa.int32(), pa.string())),
            "input_dtypes": _dict(np.zeros(n_ops), ["float16;"]),
            "output_shapes": pa.nulls(n_ops, pa.dictionary(pa.int32(), pa.string())),
            "output_dtypes": pa.nulls(n_ops, pa.dictionary(pa.int32(), pa.string())),
            "bytes_in": pa.array(rng.integers(0, 1 << 20, n_ops)),
            "bytes_out": pa.array(rng.integers(0, 1 << 20, n_ops)),
            "flops": pa.nulls(n_ops, pa.int64()),
            "module": _dict(rng.integers(0, 32, n_ops), [f"model.layers.{i}.mlp" for i in range(32)]),
            "call_site": _dict(rng.integers(0, 50, n_ops), [f"model.py:{i} (forward)" for i in range(50)]),
            "stack_id": pa.nulls(n_ops, pa.int32()),
            "graph_id": pa.nulls(n_ops, pa.int32()),
            "thread": pa.nulls(n_ops, pa.int32()),
        },
        schema=TABLES["ops"],
    )
    sig_kind = rng.choice(["dispatch/cpu_fallback", "host_bounce/dtype_cast", "transfer/d2h", "dispatch/recompile"], n_sig)
    signals = pa.table(
        {
            "region_id": pa.array(np.zeros(n_sig, np.int32)),
            "op_id": pa.array(rng.integers(0, n_ops, n_sig)),
            "kind": pa.array(sig_kind).dictionary_encode(),
            "reason": _dict(rng.integers(0, 2, n_sig), ["dtype-not-supported", "unaligned"]),
            "op_name": _dict(rng.integers(0, len(OP_NAMES), n_sig), OP_NAMES),
            "count": pa.array(np.ones(n_sig, np.int64)),
            "bytes": pa.array(rng.integers(0, 4096, n_sig)),
            "call_site": _dict(rng.integers(0, 50, n_sig), [f"model.py:{i} (forward)" for i in range(50)]),
            "stack_id": pa.nulls(n_sig, pa.int32()),
            "module": _dict(rng.integers(0, 32, n_sig), [f"model.layers.{i}.mlp" for i in range(32)]),
            "note": pa.nulls(n_sig, pa.dictionary(pa.int32(), pa.string())),
            "time_ns": pa.nulls(n_sig, pa.int64()),
        },
        schema=TABLES["signals"],
    )
    regions = pa.table(
        {
            "region_id": pa.array([0, 1], pa.int32()),
            "parent_id": pa.array([None, None], pa.int32()),
            "name": ["step", "step"],
            "start_ns": pa.array([0, span // 2], pa.int64()),
            "dur_ns": pa.array([span // 2, span - span // 2], pa.int64()),
            "mode": pa.array(["eager", "eager"]).dictionary_encode(),
            "phase": pa.array(["cold", "warm"]).dictionary_encode(),
            "device": ["npu:0", "npu:0"],
            "peak_memory_bytes": pa.array([None, None], pa.int64()),
            "error": pa.array([None, None], pa.string()),
            "tags": pa.array([None, None], pa.string()),
        },
        schema=TABLES["regions"],
    )
    info = RunInfo(source=Source.PREDICTED, target="bench-npu", model={"class": "Synthetic", "events": events})
    return Trace(run_info=info, tables={"engine_slices": slices, "ops": ops, "signals": signals, "regions": regions})


def timed(fn, repeat: int = 1):
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return value, best


def open_cached(traces: Path, store_dir: Path) -> float:
    """Seconds a second worker takes to open the (one) run of `traces` from a store the first one filled."""
    app = create_app(ViewerConfig(trace_paths=(traces,), store_dir=store_dir))
    with app.server.test_request_context("/"):
        store = app.server.extensions["portscope"].store
        t0 = time.perf_counter()
        run_id = store.listed()[0][0][0]
        store.run_row(run_id)
        store.trace(run_id)
        return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--keep", type=Path, default=None, help="keep the trace and store in this folder")
    parser.add_argument("--generate-only", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--open-cached", nargs=2, type=Path, metavar=("TRACES", "STORE"), help=argparse.SUPPRESS)
    parser.add_argument("--traces", type=Path, default=None,
                        help="measure the (one) run in this folder instead of a synthetic one (bench/scale_bench.py)")
    args = parser.parse_args()
    if args.generate_only:
        write_trace(synthetic_trace(args.events), args.generate_only)
        return 0
    if args.open_cached:
        print(round(open_cached(*args.open_cached), 3))
        return 0
    work = args.keep or Path(tempfile.mkdtemp(prefix="portscope-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    traces = args.traces or work / "traces"
    traces.mkdir(exist_ok=True)
    path = next(traces.glob("*.arrow")) if args.traces else traces / f"synthetic-{args.events}.arrow"
    results: dict[str, object] = {"events": args.events} if not args.traces else {}
    if not path.exists():  # in a child process, so its memory does not count as the server's
        command = [sys.executable, __file__, "--events", str(args.events), "--generate-only", str(path)]
        _, t_gen = timed(lambda: subprocess.run(command, check=True))
        results["generate_and_write_s"] = round(t_gen, 2)
    size = path.stat().st_size
    results["file_mb"] = round(size / 1e6, 1)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    app = create_app(ViewerConfig(trace_paths=(traces,), store_dir=work / "store"))
    with app.server.test_request_context("/"):
        store = app.server.extensions["portscope"].store
        listed, t_list = timed(lambda: store.listed())
        run_id = listed[0][0][0]
        _, t_row = timed(lambda: store.run_row(run_id))
        results["open_run_first_s"] = round(t_list + t_row, 2)
        # another worker sharing the store: its own process, as under gunicorn (its mapping of the run is its own memory)
        cached = subprocess.run([sys.executable, __file__, "--open-cached", str(traces), str(work / "store")],
                                check=True, capture_output=True, text=True)  # fmt: skip
        results["open_run_cached_s"] = float(cached.stdout.split()[-1])
        lanes, t_lanes = timed(lambda: store.lanes(run_id))
        results["timeline_index_first_s"] = round(t_lanes, 2)
        x0, x1 = lanes.extent
        middle = float(np.median(lanes.start)) if args.traces and len(lanes) else (x0 + x1) / 2  # a real run may idle mid-way
        _, t_search = timed(lambda: timeline_tools.matches(run_id, SEARCH))
        results["search_first_ms"] = round(t_search * 1000, 1)
        results["search_matches"] = len(timeline_tools.matches(run_id, SEARCH))
        match_traces = match_indices(timeline_figure(panels([run_id], [run_id]), drag="select"))  # as the page keeps them
        for label, frac in (("full", 1.0), ("10pct", 0.1), ("1pct", 0.01)):
            mid = middle if frac < 1 else (x0 + x1) / 2
            w0, w1 = mid - (x1 - x0) * frac / 2, mid + (x1 - x0) * frac / 2
            view = reduce_viewport(lanes, w0, w1, VIEW_PX)

            def answer(w0: float = w0, w1: float = w1, search: str | None = None) -> str:
                """The server's whole answer to a zoom: bars, ticks, band labels (and search highlights), as JSON."""
                patch, _ = relayout_update([run_id], {"xaxis.range": [w0, w1]})
                if search:
                    found = timeline_tools.text_matches([run_id], search)
                    timeline_tools.add_highlights(patch, found, (w0, w1), match_traces)
                return json.dumps(patch.to_plotly_json())

            body, t_answer = timed(answer, repeat=3)
            results[f"viewport_{label}_ms"] = round(t_answer * 1000, 1)
            results[f"viewport_{label}_kb"] = round(len(body) / 1000, 1)
            results[f"viewport_{label}_bars"] = f"{view.drawn}/{view.in_view}"
            body, t_answer = timed(lambda answer=answer: answer(search=SEARCH), repeat=3)
            results[f"viewport_search_{label}_ms"] = round(t_answer * 1000, 1)
            results[f"viewport_search_{label}_kb"] = round(len(body) / 1000, 1)
            if frac == 0.1:
                table = timeline_slices(store.trace(run_id))[0]
                _, t_range = timed(lambda w0=w0, w1=w1, table=table: range_summary(table, lanes, store.trace(run_id)["signals"], w0, w1))
                results["range_summary_10pct_ms"] = round(t_range * 1000, 1)
                row = int(lanes.row[len(lanes) // 2])
                _, t_flows = timed(lambda row=row: flow_lines(store.trace(run_id), lanes, row), repeat=3)
                results["click_flows_ms"] = round(t_flows * 1000, 1)
        trace = store.trace(run_id)
        results["engine_slices"] = trace["engine_slices"].num_rows
        n_ops = trace["ops"].num_rows
        _, t_page = timed(lambda: region_ops_page(trace, 0, n_ops // 2, n_ops // 2 + 100), repeat=3)
        by_dur = [{"colId": "dur_ns", "sort": "desc"}]

        def remember(key: str, make):  # noqa: ANN001, ANN202 - the server's per-process memo, as the page callback uses it
            return store.memo(f"{run_id}:{key}", make)

        _, t_sorted = timed(lambda: region_ops_page(trace, 0, n_ops // 2, n_ops // 2 + 100, by_dur, remember=remember))
        _, t_next = timed(lambda: region_ops_page(trace, 0, n_ops // 2 + 100, n_ops // 2 + 200, by_dur, remember=remember),
                          repeat=3)
        results.update(region_ops=n_ops, ops_page_ms=round(t_page * 1000, 1), ops_page_sorted_first_ms=round(t_sorted * 1000, 1),
                       ops_page_sorted_next_ms=round(t_next * 1000, 1))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    results["peak_rss_mb"] = round(peak / 1e6)
    results["rss_growth_over_file"] = round((peak - rss_before) / size, 2)
    for key, value in results.items():
        print(f"{key:28s} {value}")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

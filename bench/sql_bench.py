"""Bench: `portscope sql` grouping by operator across many runs, against pandas reading the same Arrow files.

Makes RUNS traces of about MB megabytes each (uncompressed, memory-mappable): a sample run (default: the CUDA
training step sample_traces/cuda_diff_control.arrow, 40k operators) repeated inside one trace with its ids, correlations and
times shifted past the previous copy's, written once, then copied (new files: nothing of the first is remembered,
so opening each one validates it in full, as for any file a user points at). Then, each in its own process (time
and peak RSS of that process):

* open: `open_runs(DIR)` the first time: memory-map, validate and hash every file, remembering its run id (in a
  private `PORTSCOPE_RUN_IDS` folder), as `portscope sql` does with files it has not seen;
* duckdb: `open_runs(DIR)` again (remembered: not read through), then `SELECT name, count(*), sum(dur_ns) FROM ops
  GROUP BY name` over every run (the views of ingest/sql.py: the Arrow tables read in place);
* duckdb-kernels: kernels (engine slices joined to their launching operator, per run) grouped by operator;
* pandas: each file's `ops` read (memory-mapped, not validated) into pandas, grouped, the partial sums added up
  run by run (a streaming pandas: all runs at once would not fit).

Run: .venv/bin/python bench/sql_bench.py [--runs 100] [--mb 100] [--dir DIR] [--keep]
     .venv/bin/python bench/sql_bench.py --runs 4 --mb 10      (quick)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from portscope.ingest import arrow_compute as pc
from portscope.ingest import schema
from portscope.ingest.trace import Trace, read_trace, write_trace

SAMPLE = Path(__file__).resolve().parents[1] / "sample_traces" / "cuda_diff_control.arrow"
BY_OPERATOR = "SELECT name AS operator, count(*) AS calls, sum(dur_ns) AS host_ns FROM ops GROUP BY name ORDER BY host_ns DESC"
KERNELS_BY_OPERATOR = ("SELECT operator, count(*) AS kernels, sum(dur) AS device_ns FROM kernels GROUP BY operator "
                       "ORDER BY device_ns DESC")
# (table, column) -> what it is shifted by in each copy: a region id, an operator id, a correlation, a time
SHIFTS = {
    "regions": {"region_id": "region", "parent_id": "region", "start_ns": "time"},
    "ops": {"op_id": "op", "region_id": "region", "start_ns": "time"},
    "signals": {"region_id": "region", "op_id": "op", "time_ns": "time"},
    "transfers": {"region_id": "region", "op_id": "op", "start_ns": "time"},
    "compiles": {"region_id": "region", "time_ns": "time"},
    "engine_slices": {"region_id": "region", "op_id": "op", "correlation": "correlation", "start": "time"},
    "runtime_calls": {"region_id": "region", "op_id": "op", "correlation": "correlation", "start_ns": "time"},
}


def _max(trace: Trace, pairs: list[tuple[str, str]]) -> int:
    highs = [pc.min_max(trace[t].column(c))[1] for t, c in pairs if trace[t].num_rows]
    return max([h for h in highs if h is not None] or [0])


def repeated(trace: Trace, copies: int) -> Trace:
    """The run `copies` times over, each copy's ids, correlations and times past the previous copy's."""
    step = {"region": _max(trace, [("regions", "region_id")]) + 1, "op": _max(trace, [("ops", "op_id")]) + 1,
            "correlation": _max(trace, [("engine_slices", "correlation"), ("runtime_calls", "correlation")]) + 1,
            "time": _max(trace, [("regions", "start_ns")]) + _max(trace, [("regions", "dur_ns")]) + 1}  # fmt: skip
    tables = {}
    for name in schema.TABLES:
        table = trace[name]
        if name not in SHIFTS:
            tables[name] = table
            continue
        parts = []
        for i in range(copies):
            part = table
            for column, kind in SHIFTS[name].items():
                col = part.column(column)
                part = part.set_column(part.schema.get_field_index(column), column,
                                       pc.call("add", col, pa.scalar(i * step[kind], col.type)))
            parts.append(part)
        tables[name] = pa.concat_tables(parts)
    return Trace(run_info=trace.run_info, tables=tables)


def make_runs(folder: Path, runs: int, mb: float, sample: Path) -> list[Path]:
    trace = read_trace(sample)
    per_copy = sum(trace[name].nbytes for name in SHIFTS)  # uncompressed, as written (the samples are zstd)
    copies = max(1, round(mb * 1e6 / per_copy))
    first = folder / "run-000.arrow"
    write_trace(repeated(trace, copies), first)
    paths = [first]
    for i in range(1, runs):
        paths.append(folder / f"run-{i:03d}.arrow")
        shutil.copyfile(first, paths[-1])
    return paths


def measure(what: str, folder: Path) -> dict:
    """One measurement, in this process: seconds, peak RSS, and the answer's first rows."""
    started = time.perf_counter()
    if what in ("open", "duckdb", "duckdb-kernels"):
        from portscope.ingest.sql import connect, open_runs, run_query, views_in

        runs = open_runs([folder])
        opened = time.perf_counter() - started
        rows: list = []
        if what != "open":
            sql = BY_OPERATOR if what == "duckdb" else KERNELS_BY_OPERATOR
            con = connect(runs, views=views_in(sql))  # as `portscope sql` does
            answer = run_query(con, sql).table.slice(0, 3)
            rows = [(name, int(n), int(ns)) for name, n, ns in (tuple(r.values()) for r in answer.to_pylist())]
            con.close()
        result = {"open_s": opened}
    else:
        import pandas as pd

        total = None
        for path in sorted(folder.glob("*.arrow")):
            ops = read_trace(path, validate=False)["ops"].select(["name", "dur_ns"]).to_pandas()
            part = ops.groupby("name", observed=True).agg(calls=("dur_ns", "size"), host_ns=("dur_ns", "sum"))
            total = part if total is None else total.add(part, fill_value=0)
        assert total is not None
        top = total.sort_values("host_ns", ascending=False).head(3)
        rows = [(str(name), int(r.calls), int(r.host_ns)) for name, r in top.iterrows()]
        del pd
        result = {}
    return {**result, "seconds": time.perf_counter() - started, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "top": rows}  # fmt: skip


def _child(what: str, folder: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, "--measure", what, "--dir", str(folder)], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return json.loads(done.stdout)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--mb", type=float, default=100.0, help="size of each run (MB)")
    parser.add_argument("--dir", type=Path, help="where the runs are (made there when it holds none)")
    parser.add_argument("--keep", action="store_true", help="keep the runs made in a temporary folder")
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.dir)))
        return 0
    os.environ["PORTSCOPE_RUN_IDS"] = tempfile.mkdtemp(prefix="sql-bench-ids-")  # the first open validates and hashes
    tmp = None
    folder = args.dir
    if folder is None:
        tmp = tempfile.mkdtemp(prefix="sql-bench-")
        folder = Path(tmp)
    folder.mkdir(parents=True, exist_ok=True)
    paths = sorted(folder.glob("*.arrow"))
    if not paths:
        started = time.perf_counter()
        paths = make_runs(folder, args.runs, args.mb, args.sample)
        print(f"made {len(paths)} runs in {time.perf_counter() - started:.1f} s")
    size = sum(p.stat().st_size for p in paths)
    ops = read_trace(paths[0], validate=False).num_rows("ops")
    print(f"{len(paths)} runs of {paths[0].stat().st_size / 1e6:.0f} MB ({size / 1e9:.2f} GB, {ops * len(paths) / 1e6:.0f}M operators) in {folder}")
    try:
        results = {what: _child(what, folder) for what in ("open", "duckdb", "duckdb-kernels", "pandas")}
        results["duckdb-again"] = _child("duckdb", folder)  # the files now in the page cache for every one
        results["pandas-again"] = _child("pandas", folder)
    finally:
        if tmp and not args.keep:
            shutil.rmtree(tmp)
    for what, r in results.items():
        extra = f" (open {r['open_s']:.1f} s)" if "open_s" in r else ""
        print(f"{what:15s} {r['seconds']:7.2f} s{extra}  peak RSS {r['peak_rss'] / 2**20:7.0f} MB  top {r['top'][:1]}")
    sql_top = [tuple(t) for t in results["duckdb"]["top"]]
    assert sql_top == [tuple(t) for t in results["pandas"]["top"]], (sql_top, results["pandas"]["top"])
    best_sql = min(results["duckdb"]["seconds"], results["duckdb-again"]["seconds"])
    best_pd = min(results["pandas"]["seconds"], results["pandas-again"]["seconds"])
    query_s = best_sql - min(results["duckdb"]["open_s"], results["duckdb-again"]["open_s"])
    print(f"group by operator over {len(paths)} runs: portscope sql {best_sql:.1f} s (open {best_sql - query_s:.1f} s + "
          f"connect and query {query_s:.1f} s), pandas {best_pd:.1f} s: {best_pd / best_sql:.1f}x faster; same answer; "
          f"the first open of the files (validated, hashed) {results['open']['seconds']:.1f} s")
    return 0 if math.isfinite(best_sql) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

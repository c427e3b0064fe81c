"""`portscope convert` (other tools' traces -> portscope) and `portscope export` (portscope -> other viewers)."""

from __future__ import annotations

import argparse
import sys

from . import progress
from .convert import FORMATS, big_npu_lanes, load_any
from .errors import UsageError
from .output_paths import OutputFile, OutputFolder
from .rank_inputs import is_rank_input
from .trace import write_run


def register(sub: argparse._SubParsersAction) -> None:
    """Add `convert` and `export`."""
    c = sub.add_parser(
        "convert", description="The input format is recognised from the content: " + "; ".join(
            f"{f.name} ({f.looks_like})" for f in FORMATS.values()),
    )
    c.add_argument("input", help="a file (.json, .json.gz, .log...), a TORCH_TRACE directory, or a folder or glob of "
                                 "per-rank PyTorch-profiler traces (one multi-rank run)")
    c.add_argument("-o", "--output", required=True, type=OutputFile, help="the portscope trace to write (.arrow)")
    c.add_argument("--format", choices=sorted(FORMATS), help="skip detection and read as this format")
    c.add_argument("--infer-fallback", action="store_true",
                   help="kineto: count leaf operators of a GPU trace that launched no GPU work as cpu_fallback (a guess)")
    c.add_argument("--compression", choices=["zstd", "lz4"], help="compress the Arrow tables (not memory-mappable)")
    c.add_argument("--jobs", type=int, metavar="N", help="multi-rank runs: ranks converted at once (default: one per core; "
                                                         "with --dask local: the worker processes)")
    c.add_argument("--dask", metavar="SCHEDULER", help="multi-rank runs: convert the ranks on Dask distributed workers, at "
                   "a scheduler's address (tcp://host:8786) or `local` (a LocalCluster of worker processes here). The "
                   "workers must see the rank files and the output's folder (where they write the converted ranks) at "
                   "the same paths: a shared filesystem")
    c.set_defaults(func=_convert)

    e = sub.add_parser("export")
    e.add_argument("trace", nargs="+", metavar="RUN",
                   help="--chrome: a portscope trace, or any input `convert` reads; --parquet: traces, folders of traces or globs")
    to = e.add_mutually_exclusive_group(required=True)
    to.add_argument("--chrome", action="store_true", help="Chrome trace JSON (Perfetto, chrome://tracing) of one trace")
    to.add_argument("--parquet", metavar="DIR", type=OutputFolder,
                    help="the SQL views (`portscope sql --schema`) as Parquet partitioned by run, DIR/VIEW/run=RUN/, for a "
                         "distributed engine (Dask, Spark, Trino...)")
    e.add_argument("-o", "--output", type=OutputFile, help="--chrome: the .json file to write")
    e.set_defaults(func=_export)


def _convert(args: argparse.Namespace) -> int:
    if is_rank_input(args.input) and args.format in (None, "kineto"):
        return _convert_ranks(args)
    if args.dask:
        raise UsageError("--dask applies to multi-rank runs only (a folder or glob of per-rank traces)")
    options = {"infer_fallback": True} if args.infer_fallback else {}
    if options and args.format not in (None, "kineto"):
        raise UsageError("--infer-fallback applies to kineto traces only")
    from .spill import converting_process

    converting_process(args.input, npu_lanes=big_npu_lanes(args.input))  # this process: freed batches go back
    shown = progress.for_terminal()  # bytes, events, rate and time left on stderr; nothing when not a terminal
    try:
        with progress.reporting(shown or progress.Progress()) as listener:
            trace = load_any(args.input, format=args.format, sliced=True, **options)  # sliced: big tables made as written
            if options and trace.run_info.converted_from != "kineto":
                raise UsageError("--infer-fallback applies to kineto traces only")
            listener.stage(progress.Stage.WRITING)
            write_run(trace, args.output, compression=args.compression)  # the run id remembered: the viewer need not hash it
    finally:
        if shown:
            shown.close()
    counts = ", ".join(f"{trace.num_rows(t)} {t}" for t in ("regions", "ops", "signals", "transfers", "compiles", "engine_slices"))
    print(f"{args.output}: converted from {trace.run_info.converted_from}: {counts}")
    for problem in trace.run_info.extra.get("problems") or []:
        print(f"  warning: {problem}", file=sys.stderr)
    unknown = trace.run_info.extra.get("unknown_lines")
    if unknown:
        print(f"  warning: {unknown} lines were not understood (see run_info.extra)", file=sys.stderr)
    if trace.run_info.missing_signals:
        print("  this source could not provide: " + "; ".join(trace.run_info.missing_signals))
    return 0


def _convert_ranks(args: argparse.Namespace) -> int:
    from .ranks import convert_ranks

    if args.infer_fallback:
        raise UsageError("--infer-fallback applies to single kineto traces only")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    trace, _ = convert_ranks(args.input, args.output, jobs=args.jobs, compression=args.compression, dask=args.dask)
    ranks = trace.run_info.extra["ranks"]
    counts = ", ".join(f"{trace.num_rows(t)} {t}" for t in ("regions", "ops", "signals", "engine_slices"))
    listed = ", ".join(f"{r['rank']}: {r['file']}" for r in ranks)
    print(f"{args.output}: {len(ranks)} ranks ({listed}): {counts}")
    for problem in trace.run_info.extra.get("problems") or []:
        print(f"  warning: {problem}", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    if args.parquet:
        from .sql import export_parquet, open_runs

        runs = open_runs(args.trace, command="export")
        written = export_parquet(runs, args.parquet)
        print(f"{args.parquet}: {len(runs)} runs, " + ", ".join(f"{rows} {view}" for view, rows in written.items()))
        return 0
    if len(args.trace) != 1 or not args.output:
        raise UsageError("--chrome exports one trace: give one RUN and -o FILE.json")
    trace = load_any(args.trace[0])
    from .export_chrome import write_chrome  # only `export` pays for it (and for pyarrow.compute)

    write_chrome(trace, args.output)
    print(f"{args.output}: Chrome trace JSON of {trace['ops'].num_rows} ops, {trace['transfers'].num_rows} transfers, "
          f"{trace['signals'].num_rows} signals; open it in https://ui.perfetto.dev")
    return 0

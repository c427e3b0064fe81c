"""`portscope report` and `portscope check`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .budget import check, parse_budgets
from .given import open_given
from .numerics import check_numerics, tolerances_from
from .output_paths import OutputFile
from .report import format_trace, trace_report_data
from .summary import region_ids, summarize


def register(sub: argparse._SubParsersAction) -> None:
    """Add `report` and `check`."""
    p = sub.add_parser("report")
    p.add_argument("trace", help="a portscope trace (.arrow), or any file `convert` reads (converted in memory)")
    p.add_argument("--region", help="only regions with this name")
    p.add_argument("--json", action="store_true", help="print the same facts as JSON")
    p.add_argument("--schedule", action="store_true", help="print the per-engine schedule summary of each region")
    p.add_argument("--ops", action="store_true",
                   help="device time per operator (self, total, device calls, CPU time, category), as key_averages() gives it")
    p.add_argument("--memory", action="store_true",
                   help="memory per region and device: peak, live at exit, allocations, the call sites that allocated most")
    p.add_argument("--ranks", action="store_true",
                   help="a multi-rank run: per rank and step, compute, communication (exposed), idle; each step's straggler")
    p.set_defaults(func=_report)

    c = sub.add_parser("check")
    c.add_argument("trace", help="a portscope trace (.arrow), or any file `convert` reads (converted in memory)")
    c.add_argument(
        "--max",
        action="append",
        default=[],
        metavar="NAME=LIMIT",
        help="a budget, e.g. cpu_fallback=0 or d2h_bytes=1MB (repeatable)",
    )
    c.add_argument("--region", help="only regions with this name")
    c.add_argument("--numerics", metavar="TOLERANCES.json", help="also enforce numerics tolerances recorded earlier")
    c.add_argument("--record-numerics", metavar="TOLERANCES.json", type=OutputFile,
                   help="write this (trusted) trace's numerics as tolerances for later checks, and exit")
    c.set_defaults(func=_check)


def _report(args: argparse.Namespace) -> int:
    trace = open_given(args.trace, command="report")
    if args.region and not region_ids(trace, args.region):
        print(f"portscope report: {args.trace}: no region named {args.region!r} "
              f"(regions: {', '.join(trace.region_names())})", file=sys.stderr)
        return 2
    if args.schedule:  # engine schedules (ingest/schedule_summary.py)
        from .schedule_summary import format_schedule, schedule_summaries

        regions = trace["regions"]
        modes = {r: (m, p) for r, m, p in zip(*(regions.column(c).to_pylist() for c in ("region_id", "mode", "phase")), strict=True)}
        sys.stdout.write(format_schedule(schedule_summaries(trace, args.region), unit=trace.run_info.time_unit.value, modes=modes))
        return 0
    if args.ranks:  # per-rank steps and stragglers (ingest/rank_report.py)
        from .rank_report import format_ranks, ranks_report_data

        data = ranks_report_data(trace)
        sys.stdout.write(json.dumps(data, indent=1) + "\n" if args.json else format_ranks(data))
        return 0
    if args.memory:  # memory per region (ingest/memory.py)
        from .memory_report import format_memory, memory_report_data

        data = memory_report_data(trace, args.region)
        sys.stdout.write(json.dumps(data, indent=1) + "\n" if args.json else format_memory(data))
        return 0
    if args.ops:  # device time per operator (ingest/op_device.py)
        from .op_report import format_ops, ops_report_data

        data = ops_report_data(trace, args.region)
        sys.stdout.write(json.dumps(data, indent=1) + "\n" if args.json else format_ops(data))
        return 0
    if args.json:
        print(json.dumps(trace_report_data(trace, args.region), indent=1, default=str))
    else:
        sys.stdout.write(format_trace(trace, args.region))
    return 0


def _check(args: argparse.Namespace) -> int:
    budgets = parse_budgets(args.max)
    trace = open_given(args.trace, command="check")
    if args.record_numerics:
        limits = tolerances_from(trace)
        Path(args.record_numerics).write_text(json.dumps(limits, indent=1, sort_keys=True) + "\n")
        print(f"wrote tolerances for {', '.join(sorted(limits))} to {args.record_numerics}")
        return 0
    ids = region_ids(trace, args.region)
    if args.region and not ids:
        print(f"portscope check: {args.trace}: no region named {args.region!r}", file=sys.stderr)
        return 2
    lines = [v.line() for v in check([summarize(trace, rid) for rid in ids], budgets)]
    if args.numerics:
        lines += check_numerics(trace, args.numerics)
    for line in lines:
        print(line)
    if not lines:
        print(f"ok: {len(ids)} regions within {len(budgets)} budgets" + (" and the numerics tolerances" if args.numerics else ""))
    return 1 if lines else 0

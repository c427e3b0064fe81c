"""`portscope diff`: one region against another, in one trace or two (the viewer's compare page, as text)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import pandas as pd

from .catalog import format_signed_bytes
from .diff import diff_call_sites, diff_operators, diff_signals, pair_regions
from .errors import UsageError
from .given import open_given
from .op_diff_cli import op_section
from .op_report import records
from .report import region_report_data
from .schedule_diff import schedule_section
from .summary import region_ids, regions_frame, summarize
from .trace import Trace


class _Usage(Exception):
    """A region that cannot be chosen; exit status 2."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `diff`."""
    p = sub.add_parser("diff")
    p.add_argument("a", help="trace A (.arrow, or any file `convert` reads: converted in memory)")
    p.add_argument("b", nargs="?", help="trace B (default: A itself, pairing eager with compiled, else cold with warm)")
    p.add_argument("--region-a", metavar="NAME", help="the region of A (default: paired as the viewer does)")
    p.add_argument("--region-b", metavar="NAME", help="the region of B")
    p.add_argument("--top", type=int, default=10, help="changed operators and call sites to list (default 10)")
    p.add_argument("--json", action="store_true", help="print the same tables as JSON")
    p.add_argument("--schedule", action="store_true",
                   help="compare the two regions' engine schedules: busy time per engine A/B/Δ/%%, the critical path and "
                        "what on it changed, idle by cause (ingest/schedule_diff.py)")
    p.add_argument("--ops", action="store_true",
                   help="operators aligned by what they compute (an operator of one side only folded into the lowest "
                        "operator both share): device time in A and B, what got slower first, device time per category; "
                        "then every operator, runtime call and kernel by name: HTA's ops diff sets, the call sites whose "
                        "counts changed")
    p.add_argument("--memory", action="store_true",
                   help="peak and live memory per device of A and B, and the call sites whose allocated bytes grew most")
    p.add_argument("--fail-on-increase", action="store_true",
                   help="exit 1 when any signal's count (or the d2h volume) is higher in B than in A (a CI gate against a baseline)")
    p.set_defaults(func=_diff)


def _named(trace: Trace, path: str, name: str) -> int:
    ids = region_ids(trace, name)
    if not ids:
        raise _Usage(f"{path}: no region named {name!r} (regions: {', '.join(trace.region_names())})")
    return ids[0]


def choose_regions(a: Trace, b: Trace, path_a: str, path_b: str, name_a: str | None, name_b: str | None,
                   *, same_run: bool) -> tuple[int, int]:
    """Region ids of A and B: the named ones, else the viewer's default pairing."""
    default_a, default_b = pair_regions(regions_frame(a), regions_frame(b), same_run=same_run)
    rid_a = _named(a, path_a, name_a) if name_a else default_a
    rid_b = _named(b, path_b, name_b) if name_b else default_b
    if rid_a is None or rid_b is None:
        raise _Usage(f"{path_a if rid_a is None else path_b}: the trace holds no regions")
    if same_run and rid_a == rid_b:
        raise _Usage(f"{path_a}: one region only ({a.region_names()[0]!r}); give a second trace or --region-b")
    return rid_a, rid_b


def _side(trace: Trace, path: str, rid: int) -> dict[str, Any]:
    row = regions_frame(trace).set_index("region_id").loc[rid]
    return {"file": path, "region_id": int(rid), "region": row["name"], "mode": row["mode"], "phase": row["phase"]}


def _ratio(v: float) -> str:
    return "" if math.isnan(v) else "new" if math.isinf(v) else f"{v:.2f}x"


def format_diff(a: dict[str, Any], b: dict[str, Any], signals: pd.DataFrame, operators: pd.DataFrame,
                sites: pd.DataFrame, top: int) -> str:
    """The comparison as text: who is compared, the signal table, then the operators and call sites that
    changed (`operators`, `sites`: only their changed rows)."""
    lines = [f"{side}: {s['file']}  region {s['region']!r} ({s['mode']}, {s['phase']})" for side, s in (("A", a), ("B", b))]
    table = pd.DataFrame({
        "signal": signals["signal"], "A": signals["a_count"], "B": signals["b_count"], "Δ": signals["delta"],
        "B/A": [_ratio(v) for v in signals["ratio"]], "Δ bytes": [format_signed_bytes(v) for v in signals["delta_bytes"]],
    })
    lines += ["", table.to_string(index=False)]
    lines += ["", f"operators that changed ({len(operators)}, top {top}):"]
    lines += [f"  {r.change:<9} {r.signal:<26} {r.operator:<40} {r.a_count} -> {r.b_count}"
              for r in operators.head(top).itertuples()]
    lines += ["", f"call sites that changed ({len(sites)}, top {top}):"]
    lines += [f"  {r.change:<9} {r.call_site:<60} {r.a_count} -> {r.b_count}" for r in sites.head(top).itertuples()]
    return "\n".join(lines) + "\n"


def memory_section(trace_a: Trace, region_a: int, trace_b: Trace, region_b: int, *, wanted: bool, as_json: bool,
                   top: int) -> dict[str, Any]:
    """What `diff --memory` adds: {} when not asked, {"memory": ...} for --json, else {"text": ...}."""
    if not wanted:
        return {}
    from .memory import memory_diff
    from .memory_report import format_memory_diff, memory_diff_data

    diff = memory_diff(trace_a, region_a, trace_b, region_b)
    return {"memory": memory_diff_data(diff)} if as_json else {"text": format_memory_diff(diff, top)}


def _diff(args: argparse.Namespace) -> int:
    path_b = args.b or args.a
    trace_a = open_given(args.a, command="diff")
    trace_b = open_given(path_b, command="diff") if args.b else trace_a
    try:
        rid_a, rid_b = choose_regions(trace_a, trace_b, args.a, path_b, args.region_a, args.region_b,
                                      same_run=args.b is None)
    except _Usage as exc:
        print(f"portscope diff: {exc}", file=sys.stderr)
        return 2
    report_a = region_report_data(summarize(trace_a, rid_a))
    report_b = region_report_data(summarize(trace_b, rid_b))
    signals = diff_signals(report_a, report_b)
    operators = diff_operators(report_a, report_b)
    operators = operators[operators["change"] != "same"]
    sites = diff_call_sites(report_a, report_b)
    sites = sites[sites["change"] != "same"]
    a, b = _side(trace_a, args.a, rid_a), _side(trace_b, path_b, rid_b)
    try:
        schedule = schedule_section(trace_a, rid_a, trace_b, rid_b, wanted=args.schedule, as_json=args.json, top=args.top)
    except UsageError as exc:
        print(f"portscope diff --schedule: {exc}", file=sys.stderr)
        return 2
    ops = op_section(trace_a, rid_a, trace_b, rid_b, wanted=args.ops, as_json=args.json, top=args.top)
    memory = memory_section(trace_a, rid_a, trace_b, rid_b, wanted=args.memory, as_json=args.json, top=args.top)
    if args.json:
        print(json.dumps({"a": a, "b": b, "signals": records(signals), "operators": records(operators),
                          "call_sites": records(sites), **schedule, **ops, **memory}, indent=1, default=str))
    else:
        sys.stdout.write(format_diff(a, b, signals, operators, sites, args.top) + schedule.get("text", "") + ops.get("text", "")
                         + memory.get("text", ""))
    increased = signals[signals["delta"] > 0]
    if args.fail_on_increase and len(increased):
        print(f"increased in B: {', '.join(increased['signal'])}", file=sys.stderr)
        return 1
    return 0

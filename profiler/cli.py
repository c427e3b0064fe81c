"""Sub-commands that need torch: record, demo."""

from __future__ import annotations

import argparse
import sys
import traceback


def register(sub: argparse._SubParsersAction) -> None:
    """Add `record` and `demo`."""
    r = sub.add_parser(
        "record",
        help="run a Python script under the profiler and write a trace (even when the script fails)",
        description="portscope record [--target NAME|PATH] [-o run.arrow] -- python script.py ARGS...",
    )
    r.add_argument("--target", help="predict for a target (built-in name or TOML path) instead of measuring")
    r.add_argument("-o", "--output", default="run.arrow", help="trace file to write (default run.arrow)")
    r.add_argument("--no-stack", action="store_true", help="do not record call sites and stacks (faster)")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- python script.py ARGS...")
    r.set_defaults(func=_record)

    d = sub.add_parser("demo", help="regenerate the sample traces (tiny random-init models)")
    d.add_argument("-o", "--output", default="sample_traces", help="folder to write into")
    d.add_argument("--only", action="append", help="only this file (repeatable)")
    d.set_defaults(func=_demo)

    t = sub.add_parser("targets", help="list the built-in targets, or validate a target file")
    t.add_argument("path", nargs="?", help="a target TOML file to validate")
    t.set_defaults(func=_targets)


def _record(args: argparse.Namespace) -> int:
    from .record import record

    path, failure = record(args.command, args.output, target=args.target, with_stack=not args.no_stack)
    print(f"portscope record: wrote {path}", file=sys.stderr)
    if failure is not None:
        if isinstance(failure, SystemExit):
            return int(failure.code) if isinstance(failure.code, int) else 1
        traceback.print_exception(failure)
        return 130 if isinstance(failure, KeyboardInterrupt) else 1
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import make_samples

    for path in make_samples(args.output, only=args.only, progress=lambda f: print(f"  making {f} ...", file=sys.stderr)):
        print(path)
    return 0


def _targets(args: argparse.Namespace) -> int:
    from .targets import builtin_targets, load_target

    if args.path:
        t = load_target(args.path)
        print(f"{t.path}: ok ({t.name}: {t.description})")
        return 0
    for name in builtin_targets():
        t = load_target(name)
        print(f"{name:12s} {t.description}")
    return 0

"""The `portscope` command: one sub-command per job, each registered by the package that owns it."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from portscope.ingest.errors import PortscopeError

# Each module has `register(subparsers) -> None`; its sub-commands set `func(args) -> int`.
COMMAND_MODULES = (
    "portscope.ingest.report_cli",  # report, check
    "portscope.ingest.diff_cli",  # diff
    "portscope.ingest.convert_cli",  # convert, export
    "portscope.profiler.cli",  # record, demo, compare-modes, validate
    "portscope.app.view_cli",  # view
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="portscope",
        description="What the backend had to do to run your PyTorch model: record, predict, report, view.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PortscopeError as exc:
        print(f"portscope {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

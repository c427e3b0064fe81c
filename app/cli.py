"""The `portscope` command: one sub-command per job, each registered by the package that owns it.

The parser is built in two steps so that a command starts light: the top level knows every command's name
and summary from `COMMANDS` (no imports), and only the module that owns the chosen command is imported to
add its arguments. Nothing here imports torch; commands that need it say so (`needs_torch`), and without
torch they exit 2 with one line saying how to install it.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence

from portscope.ingest.errors import PortscopeError
from portscope.ingest.output_paths import check_outputs

PROFILE_EXTRA_HINT = ("pip install torch==2.13.0 && pip install -e '.[profile]' in a portscope checkout "
                      "(or the torch your backend needs, 2.5 or newer)")


@dataclasses.dataclass(frozen=True)
class Command:
    """A sub-command: the module whose `register(subparsers)` adds it, and its one-line summary."""

    module: str
    summary: str


COMMANDS: dict[str, Command] = {
    "view": Command("portscope.app.view_cli", "open the web viewer (runs, regions, engine timelines, comparisons, uploads)"),
    "report": Command("portscope.ingest.report_cli", "print the report of a trace's regions"),
    "check": Command("portscope.ingest.report_cli", "exit 1 when a region exceeds a budget (a CI gate)"),
    "sql": Command("portscope.ingest.sql_cli", "SQL over one run or hundreds: operators, kernels, copies, syncs, fallbacks..."),
    "diff": Command("portscope.ingest.diff_cli", "compare two regions' signals: eager vs compiled, cold vs warm, run vs run"),
    "convert": Command("portscope.ingest.convert_cli",
                       "convert a PyTorch profiler trace, fallback log or TORCH_TRACE log into a portscope trace"),
    "export": Command("portscope.ingest.convert_cli", "write a trace in another tool's format (Chrome trace JSON for Perfetto)"),
    "targets": Command("portscope.profiler.cli", "list the built-in targets, validate a target file, or calibrate one from measured traces"),
    "record": Command("portscope.profiler.cli",
                      "run a Python script under the profiler and write a trace (needs torch)"),
    "demo": Command("portscope.profiler.cli", "regenerate the sample traces from tiny random-init models (needs torch)"),
    "compare-modes": Command("portscope.profiler.cli",
                             "one model eager and compiled (fixed shapes), cold and warm, in one trace (needs torch)"),
    "validate": Command("portscope.profiler.cli", "the port's numerics against the model in float32 on the CPU (needs torch)"),
    "plan": Command("portscope.profiler.cli", "what compiling an LLM for fixed shapes costs: memory, fits, padding, "
                    "per-token time and transfers per sequence length and batch (needs torch; no weights)"),
}


class Subcommands:
    """The sub-parsers action as the command modules see it: summaries come from `COMMANDS`."""

    def __init__(self, action: argparse._SubParsersAction) -> None:
        self._action = action

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser:
        if name not in COMMANDS:
            raise KeyError(f"sub-command {name!r} is not listed in portscope.app.cli.COMMANDS")
        kwargs.setdefault("help", COMMANDS[name].summary)
        kwargs.setdefault("description", COMMANDS[name].summary)
        return self._action.add_parser(name, **kwargs)  # type: ignore[arg-type]


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The `portscope` parser: every command listed, the arguments of `chosen` loaded (of all when None)."""
    parser = argparse.ArgumentParser(
        prog="portscope",
        description="What the backend had to do to run your PyTorch model: record, predict, report, view.",
    )
    action = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    action.required = True
    if chosen is None:
        modules = list(dict.fromkeys(c.module for c in COMMANDS.values()))
    else:
        modules = [COMMANDS[chosen].module] if chosen in COMMANDS else []
    sub = Subcommands(action)
    for module in modules:
        importlib.import_module(module).register(sub)
    for name, command in COMMANDS.items():  # the rest: listed by name, arguments not loaded
        if name not in action.choices:
            action.add_parser(name, help=command.summary, add_help=False)
    return parser


def _chosen_command(argv: Sequence[str]) -> str:
    """The first argument that names a command ('' when there is none: --help or an empty line)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return ""


def torch_available() -> bool:
    """True where torch can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_chosen_command(argv))
    args = parser.parse_args(argv)
    if getattr(args, "needs_torch", False) and not torch_available():
        print(f"portscope {args.subcommand}: needs torch, which is not installed here; to record, install the profile "
              f"extra: {PROFILE_EXTRA_HINT}", file=sys.stderr)
        return 2
    try:
        check_outputs(args)  # before the work: a folder that is not there is one line, nothing half-written
        return int(args.func(args) or 0)
    except PortscopeError as exc:
        print(f"portscope {args.subcommand}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `portscope sql ... | head`: the reader left; no traceback, no second error at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command its pipe closed on


if __name__ == "__main__":
    sys.exit(main())

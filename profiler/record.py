"""`portscope record`: run a script under the profiler and always write its trace."""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from portscope.ingest.errors import UsageError

from .region import RecordRun, Region, explain, recording_run, save

_PYTHONS = {"python", "python3", os.path.basename(sys.executable)}


def split_command(command: list[str]) -> tuple[str, str, list[str]]:
    """('path'|'module', target, argv) from `python script.py ARGS` / `script.py ARGS` / `python -m mod ARGS`."""
    if command and command[0] == "--":
        command = command[1:]
    if command and (os.path.basename(command[0]) in _PYTHONS or command[0] == sys.executable):
        command = command[1:]
    if not command:
        raise UsageError("nothing to run: give `-- python script.py ARGS...`")
    if command[0] == "-m":
        if len(command) < 2:
            raise UsageError("-m needs a module name")
        return "module", command[1], command[1:]
    script = command[0]
    if not Path(script).is_file():
        raise UsageError(f"{script}: no such script")
    return "path", script, command


def record(command: list[str], output: str | Path, *, target: str | None = None, with_stack: bool = True,
           library: Sequence[str] | None = None) -> tuple[Path, BaseException | None]:
    """Run a script; write every top-level region it opened (or one around the whole script).

    library: packages whose frames are never call sites (explain(library=...)), for every region.
    Returns the trace path and the exception the script ended with (None when it succeeded).
    """
    kind, name, argv = split_command(command)
    run = RecordRun(target=target, with_stack=with_stack, library=tuple(library or ()))
    token = recording_run.set(run)
    old_argv = sys.argv
    failure: BaseException | None = None
    outer: Region = explain("script", with_stack=with_stack, target=target, library=library)
    try:
        sys.argv = list(argv)
        with outer:
            if kind == "module":
                runpy.run_module(name, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(name, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            failure = exc
    except BaseException as exc:  # noqa: BLE001 - the trace is written whatever the script did
        failure = exc
    finally:
        sys.argv = old_argv
        recording_run.reset(token)
    inner = list(outer.children)
    regions = inner or [outer]
    for r in inner:
        r.parent = None
    path = save(regions, output)
    return path, failure

"""The trace a read-only command is given (`report`, `check`, `diff`, `sql`, `export --parquet`): a portscope trace as
it is, any other input `convert` reads converted in memory first.

A user holding a PyTorch-profiler export or a vendor table runs ``portscope report trace.json`` and gets the report;
nothing is written. Converting is the slow part for a big file, so the command says on stderr how to keep the
conversion (``portscope convert``) and shows progress on a terminal, as `convert` does. The readers and their
imports load only when the input is not a portscope trace: reporting on a ``.arrow`` file pays nothing for this.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from .errors import TraceFormatError, UsageError
from .trace import Trace, read_trace

_ZIP_MAGIC = b"PK\x03\x04"


def is_portscope_file(path: Path) -> bool:
    """Whether `path` is to be read as a portscope trace: named ``.arrow``, or a file that starts as a ZIP container
    does (a damaged one included: reading it as a trace names what is wrong). Anything else, a folder included, is
    an input for the converters."""
    if path.suffix == ".arrow":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == _ZIP_MAGIC
    except (IsADirectoryError, FileNotFoundError, PermissionError):
        return False


def open_given(path: str | Path, *, command: str, note: TextIO | None = None) -> Trace:
    """The trace at `path`: read when it is a portscope trace, else converted in memory from whatever format
    `portscope convert` recognises, with one line on `note` (stderr by default) naming the format and how to keep
    the conversion. A multi-rank folder or glob is a usage error (the ranks are merged into a file by `convert`)."""
    path = Path(path)
    if is_portscope_file(path):
        return read_trace(path)
    from . import progress
    from .rank_inputs import is_rank_input

    if is_rank_input(path):
        raise UsageError(f"{path}: a multi-rank input (a folder or glob of rank traces): merge it first with "
                         f"`portscope convert {path} -o run.arrow`, then `portscope {command} run.arrow`")
    if not path.exists():
        raise TraceFormatError(path, "no such file")
    from .convert import load_any

    shown = progress.for_terminal()
    try:
        with progress.reporting(shown or progress.Progress()):
            trace = load_any(path)
    finally:
        if shown:
            shown.close()
    keep = path.name.removesuffix(".gz").rsplit(".", 1)[0] + ".arrow"
    print(f"portscope {command}: {path}: read as {trace.run_info.converted_from} and converted in memory "
          f"(`portscope convert {path} -o {keep}` keeps it)", file=note or sys.stderr)
    return trace


__all__ = ["is_portscope_file", "open_given"]

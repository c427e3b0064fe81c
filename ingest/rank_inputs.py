"""Which files a multi-rank run is: a folder or glob of per-rank trace files, or of torch_npu rank folders.

Light on purpose (no conversion code): `portscope convert FILE` and the read-only commands ask `is_rank_input` of
every input they are given.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any

from .errors import TraceFormatError

__all__ = ["ASCEND_OUTPUT", "ascend_folder", "display_name", "is_rank_input", "rank_files"]

_TRACE_SUFFIXES = (".json", ".json.gz")
ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"  # a torch_npu rank folder's analysed output: trace_view.json in it
_ASCEND_TRACE = "trace_view.json"


def display_name(path: Path) -> str:
    """A rank file's name as listed: its file name; a torch_npu trace view, with its rank folder
    (``host_1_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json``)."""
    return f"{path.parent.parent.name}/{ASCEND_OUTPUT}/{path.name}" if ascend_folder(path) else path.name


def ascend_folder(path: Path) -> Path | None:
    """The torch_npu rank folder of a trace view (``<folder>/ASCEND_PROFILER_OUTPUT/trace_view.json``), else None."""
    return path.parent.parent if path.parent.name == ASCEND_OUTPUT else None


def _ascend_trace(folder: Path) -> Path | None:
    found = folder / ASCEND_OUTPUT / _ASCEND_TRACE
    return found if found.is_file() else None


def is_rank_input(spec: str | Path) -> bool:
    """Whether `convert` should read `spec` as a multi-rank run: a glob pattern, or a folder holding trace JSON
    files (a TORCH_TRACE folder holds logs) or torch_npu rank folders (``*_ascend_pt``)."""
    text = str(spec)
    if any(c in text for c in "*?[") and not Path(text).exists():
        return True
    p = Path(text)
    return p.is_dir() and any((f.is_file() and _is_trace_name(f)) or (f.is_dir() and _ascend_trace(f)) for f in p.iterdir())


def _is_trace_name(path: Path) -> bool:
    return path.name.lower().endswith(_TRACE_SUFFIXES)


def rank_files(spec: str | Path) -> list[Path]:
    """The trace files of a folder (``*.json``, ``*.json.gz``, and the trace view of each torch_npu rank folder in
    it) or a glob pattern (files, or torch_npu rank folders), in name order."""
    p = Path(spec)
    entries = list(p.iterdir()) if p.is_dir() else [Path(f) for f in glob.glob(str(spec))]
    found = [f for f in entries if f.is_file() and (_is_trace_name(f) or not p.is_dir())]
    found += [t for f in entries if f.is_dir() and (t := _ascend_trace(f)) is not None]
    if not found:
        raise TraceFormatError(spec, "no trace files (*.json, *.json.gz) or torch_npu rank folders (*_ascend_pt, holding "
                                     f"{ASCEND_OUTPUT}/{_ASCEND_TRACE}) to read as ranks")
    return sorted(found, key=lambda f: _natural(Path(display_name(f))))


def _natural(path: Path) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]

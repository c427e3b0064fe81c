"""TORCH_TRACE structured logs (the input of tlparse) -> compiles table and compile/* signals.

Parsing lives in _torch_trace_log.py, building the tables in _torch_trace_build.py; this module joins them.
"""

from __future__ import annotations

from pathlib import Path

from ..trace import Trace
from ._source import DEFAULT_CAPS, SizeCaps
from ._torch_trace_build import build_trace
from ._torch_trace_log import FORMAT, Record, StructuredLog, log_files, parse, sniff

__all__ = ["FORMAT", "Record", "StructuredLog", "log_files", "parse", "read_torch_trace", "sniff"]


def read_torch_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a TORCH_TRACE file or directory into a Trace (compiles and compile/* signals)."""
    return build_trace(Path(path), parse(path, caps=caps))

"""The portscope trace: its schema, reading and writing, converters, and shared queries.

Nothing here imports torch or dash. Every name below is imported on first use, so a module that needs only
`portscope.ingest.errors` (the command line's parser) does not pay for pyarrow or pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .builder import TraceBuilder
    from .convert import detect, load_any
    from .errors import PortscopeError, TargetError, TraceFormatError, UsageError
    from .schema import (
        CompileKind,
        Direction,
        EngineKind,
        Mode,
        Phase,
        Placement,
        SignalKind,
        SliceKind,
        Source,
        TimeUnit,
    )
    from .summary import RegionSummary, summarize
    from .trace import RunInfo, Trace, read_trace, write_trace

_HOME = {  # public name -> the module that defines it
    **dict.fromkeys(["TraceBuilder"], "builder"),
    **dict.fromkeys(["PortscopeError", "TargetError", "TraceFormatError", "UsageError"], "errors"),
    **dict.fromkeys(["CompileKind", "Direction", "EngineKind", "Mode", "Phase", "Placement", "SignalKind",
                     "SliceKind", "Source", "TimeUnit"], "schema"),
    **dict.fromkeys(["RunInfo", "Trace", "read_trace", "write_trace"], "trace"),
    **dict.fromkeys(["RegionSummary", "summarize"], "summary"),
    **dict.fromkeys(["load_any", "detect"], "convert"),
}

__all__ = [
    "CompileKind", "Direction", "EngineKind", "Mode", "Phase", "Placement", "PortscopeError", "RegionSummary",
    "RunInfo", "SignalKind", "SliceKind", "Source", "TargetError", "TimeUnit", "Trace", "TraceBuilder",
    "TraceFormatError", "UsageError", "detect", "load_any", "read_trace", "summarize", "write_trace",
]


def __getattr__(name: str) -> object:
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

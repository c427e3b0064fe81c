"""The portscope trace: its schema, reading and writing, converters, and shared queries.

Nothing here imports torch or dash.
"""

from .builder import TraceBuilder
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
from .trace import RunInfo, Trace, read_trace, write_trace

_LAZY = {  # pandas-backed: imported on first use, so converters and readers start light
    "RegionSummary": ("summary", "RegionSummary"),
    "summarize": ("summary", "summarize"),
    "load_any": ("convert", "load_any"),
    "detect": ("convert", "detect"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "CompileKind",
    "Direction",
    "EngineKind",
    "Mode",
    "Phase",
    "Placement",
    "PortscopeError",
    "RegionSummary",
    "RunInfo",
    "SignalKind",
    "SliceKind",
    "Source",
    "TargetError",
    "TimeUnit",
    "Trace",
    "TraceBuilder",
    "TraceFormatError",
    "UsageError",
    "detect",
    "load_any",
    "read_trace",
    "summarize",
    "write_trace",
]

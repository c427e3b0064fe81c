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
from .summary import RegionSummary, summarize
from .trace import RunInfo, Trace, read_trace, write_trace

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
    "read_trace",
    "summarize",
    "write_trace",
]

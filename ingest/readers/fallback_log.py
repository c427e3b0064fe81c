"""Eager NPU fallback logs -> events (`events.EventColumns`) -> Trace of dispatch/cpu_fallback signals.

A fallback line, optionally followed by a TRACE warning that names the call site
and a line holding its source::

    [2026-09-14 19:49:00.145][I] `aten::neg` op ran on CPU instead of RBLN
    [2026-09-14 19:49:00.146][W] TRACE: /work/model.py:85 in rotate_half
        return torch.cat((-x2, x1), dim=-1)
    [2026-09-14 19:49:00.200][I] `sdpa_overrideable (query sequence length 7 not aligned to 32)` op ran on CPU instead of RBLN

Each fallback line is a `placement` event: the operator, on the host (device -1), at the line's time, with what the
log says of it (`events.Logged`: the reason in parentheses, the call site and its source line). The rule
``logged-fallback`` (`rules`) makes the signals and their causes.

Anything else is counted as an unknown line and reported in run_info.extra; never fatal.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from pathlib import Path

from ..assemble import assemble
from ..callsites import relative_site
from ..errors import TraceFormatError
from ..events import EventColumns, EventKind, Logged, Translated
from ..schema import Mode, Source
from ..trace import RunInfo, Trace
from .source import DEFAULT_CAPS, SizeCaps, decode_text, read_bytes

FORMAT = "fallback-log"

# The fallback words after any prefix the line was logged with (the backend's "[time][I] ", glog's
# "W0914 19:49:00.148000 1234 file.cc:12] ", Python logging's "2026-09-14 19:49:00,149 - WARNING - "...); a full stop
# after the device is the sentence's, not the device's.
FALLBACK = re.compile(
    r"^(?P<prefix>[^`]*)`(?P<op>[^`]+)`\s+op ran on (?:CPU|the CPU|host) instead of (?P<device>[\w:\-]+(?:\.[\w:\-]+)*)"
)
_TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")  # in the prefix
_SITE = re.compile(r"(?P<file>[^\s:`'\"()\[\]]+\.py)(?::|\", line )(?P<line>\d+)(?:,? in (?P<func>[\w<>.]+))?")
_TRACE = re.compile(r"\bTRACE\b", re.IGNORECASE)
_LOG_PREFIX = re.compile(r"^\s*\[\d{4}-\d\d-\d\d")
_MAX_EXAMPLES = 5


@dataclasses.dataclass
class _Fallback:
    op: str
    detail: str | None
    device: str
    time: datetime.datetime | None
    call_site: str | None = None
    source: str | None = None


def sniff(text: str) -> bool:
    """True when some line of the text is a fallback line."""
    return any(FALLBACK.match(line) for line in text.splitlines())


def read_fallback_log(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert an eager backend's fallback log into a Trace."""
    path = Path(path)
    text = decode_text(path, read_bytes(path, caps))
    fallbacks: list[_Fallback] = []
    unknown = 0
    examples: list[str] = []
    lines = text.splitlines()
    last: _Fallback | None = None
    expect_source = False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        m = FALLBACK.match(line)
        if m:
            op_text = m.group("op").strip()
            op, detail = op_text, None
            if op_text.endswith(")") and " (" in op_text:
                op, _, rest = op_text.partition(" (")
                detail = rest[:-1].strip() or None
            stamp = _TIME.search(m.group("prefix"))
            last = _Fallback(op.strip(), detail, m.group("device"), _parse_time(stamp.group() if stamp else None))
            fallbacks.append(last)
            expect_source = False
            continue
        site = _SITE.search(line)
        if last is not None and last.call_site is None and site and (_TRACE.search(line) or "Warning" in line):
            func = f" ({site.group('func')})" if site.group("func") else ""
            last.call_site = relative_site(f"{site.group('file')}:{site.group('line')}{func}")
            expect_source = True
            continue
        if expect_source and last is not None and not _LOG_PREFIX.match(line) and line[:1].isspace():
            last.source = line.strip()
            expect_source = False
            continue
        expect_source = False
        unknown += 1
        if len(examples) < _MAX_EXAMPLES:
            examples.append(f"line {number}: {line[:120]}")
    if not fallbacks:
        raise TraceFormatError(path, "no line of the form '[time][I] `op` op ran on CPU instead of DEVICE': not a fallback log")
    return assemble(_translate(path, fallbacks, len(lines), unknown, examples))


def _parse_time(ts: str | None) -> datetime.datetime | None:
    """A logged time as written (a zone it names is dropped: the times of one log are compared as logged)."""
    if not ts:
        return None
    try:
        return datetime.datetime.fromisoformat(ts.replace(",", ".").replace("T", " ")).replace(tzinfo=None)
    except ValueError:
        return None


def _translate(path: Path, fallbacks: list[_Fallback], n_lines: int, unknown: int, examples: list[str]) -> Translated:
    """The fallbacks of one log as `placement` events on the host, in the log's order: ns from the first timed line;
    a line without a usable time sits at the previous line's time, marked untimed."""
    times = [f.time for f in fallbacks if f.time is not None]
    t0 = min(times) if times else None

    def ns(t: datetime.datetime | None) -> int | None:
        if t is None or t0 is None or (t - t0).days >= 100_000:  # int64 nanoseconds span 292 years
            return None
        return int((t - t0).total_seconds() * 1e9)

    devices = sorted({f.device for f in fallbacks})
    info = RunInfo(
        source=Source.CONVERTED,
        devices=["cpu", *(d.lower() for d in devices)],
        start_time=t0.isoformat() if t0 else None,
        producer="portscope convert",
        converted_from=FORMAT,
        missing_signals=[
            "operators that ran on the device (the log lists fallbacks only)",
            "transfers and bytes",
            "host_bounce/*",
            "sync",
            "compiles",
        ],
        extra={
            "lines": n_lines,
            "fallback_lines": len(fallbacks),
            "unknown_lines": unknown,
            "unknown_line_examples": examples,
            "time_zone": "as logged (unknown)",
        },
    )
    out = EventColumns()
    at = 0
    for f in fallbacks:
        start = ns(f.time)
        at = at if start is None else start
        code = out.log(Logged(reason=f.detail, call_site=f.call_site, source=f.source, timed=start is not None))
        out.add(EventKind.PLACEMENT, f.op, "log", "log", at, device=-1, logged=code)
    return Translated(out, info, root_name=path.name, root_device=devices[0].lower() if len(devices) == 1 else None,
                      root_mode=Mode.EAGER)  # fmt: skip


__all__ = ["FALLBACK", "FORMAT", "read_fallback_log", "sniff"]

"""TORCH_TRACE structured logs (the input of tlparse): the records of a log (a leaf module: the
translation, torch_trace.py, reads what it parses).

Each record is a glog prefix and a JSON envelope on one line, e.g.
``V0403 07:28:48.061000 1398 torch/_dynamo/output_graph.py:1139] {"dynamo_output_graph": {...},
"frame_id": 0, "frame_compile_id": 0, "attempt": 1, "has_payload": "..."}``, followed by its
payload lines, each starting with a tab. A bad envelope or payload is reported in
run_info.extra["problems"], never fatal, and so is a file of a TORCH_TRACE folder that cannot be read as text (a
stray binary file): it is skipped.

glog writes a month and day but no year: the days between dates are counted on the real calendar (`_Calendar`),
one calendar for every file of a folder (its ranks share one time axis).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import orjson

from ..errors import TraceFormatError
from .source import DEFAULT_CAPS, SizeCaps, decode_text, read_bytes

FORMAT = "torch-trace"

GLOG = re.compile(r"^(?P<level>[VIWEF])(?P<month>\d\d)(?P<day>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d(?:\.\d+)?) +\d+ [^\]]*\] (?P<json>\{.*)$")
_JSON_PAYLOADS = {"chromium_event", "dynamo_guards"}
_MAX_PROBLEMS = 20
_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)  # of a common year
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # Feb 29: the year is a leap year


@dataclasses.dataclass
class Record:
    """One structured-log record: its kind (the envelope's main key), metadata and payload."""

    line: int
    time_s: float  # seconds since the start of the log's first day (its first file's first record's)
    kind: str
    value: Any
    envelope: dict[str, Any]
    payload: str | None = None
    file: str = ""  # the name of the log file it is in (a TORCH_TRACE folder: one a process, a rank's)

    @property
    def compile_id(self) -> str | None:
        env = self.envelope
        if "frame_id" not in env:
            return None
        cid = f"{env.get('frame_id')}/{env.get('frame_compile_id')}"
        return cid + (f"_{env['attempt']}" if env.get("attempt") else "")

    @property
    def frame_key(self) -> str | None:
        """frame/frame_compile_id without the attempt (a process's: every rank's log has a 0/0)."""
        env = self.envelope
        return f"{env.get('frame_id')}/{env.get('frame_compile_id')}" if "frame_id" in env else None


@dataclasses.dataclass
class StructuredLog:
    records: list[Record]
    strings: dict[tuple[str, int], str]  # interned file names ({"str": [name, id]}) by (log file, id): each numbers its own
    problems: list[str]
    files: list[str]
    lines: int = 0


def log_files(path: Path) -> list[Path]:
    """The log files of a TORCH_TRACE directory (sorted), or the file itself."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise TraceFormatError(path, "the TORCH_TRACE directory holds no log files")
        return files
    return [path]


def sniff(text: str) -> bool:
    """True when the first non-empty line is a glog line with a JSON envelope."""
    for line in text.splitlines():
        if line.strip():
            return bool(GLOG.match(line))
    return False


def parse(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> StructuredLog:
    """Parse every record of a TORCH_TRACE file or directory."""
    path = Path(path)
    log = StructuredLog(records=[], strings={}, problems=[], files=[])
    bad_lines = 0
    calendar = _Calendar()
    for file in log_files(path):
        try:
            text = decode_text(file, read_bytes(file, caps))
        except TraceFormatError as exc:
            if not path.is_dir():
                raise
            _problem(log, f"{file.name}: skipped, {'; '.join(exc.problems)}")  # a stray file in the folder
            continue
        log.files.append(file.name)
        lines = text.split("\n")
        current: Record | None = None
        payload: list[str] = []
        for number, line in enumerate(lines, 1):
            if line.startswith("\t"):
                if current is not None:
                    payload.append(line[1:])
                continue
            if not line.strip():
                continue
            if current is not None:
                _finish(current, payload, log, file)
            current, payload = None, []
            m = GLOG.match(line)
            if not m:
                bad_lines += 1
                _problem(log, f"{file.name}:{number}: not a structured log line")
                continue
            try:
                env = orjson.loads(m.group("json"))
            except orjson.JSONDecodeError as exc:
                bad_lines += 1
                _problem(log, f"{file.name}:{number}: envelope is not valid JSON ({exc})")
                continue
            if not isinstance(env, dict) or not env:
                _problem(log, f"{file.name}:{number}: envelope is not a JSON object")
                continue
            day = calendar.day(int(m.group("month")), int(m.group("day")))
            if day is None:
                bad_lines += 1
                _problem(log, f"{file.name}:{number}: no such date {m.group('month')}{m.group('day')} (month, day)")
                continue
            t = day * 86400.0 + int(m.group("h")) * 3600 + int(m.group("m")) * 60 + float(m.group("s"))
            kind = next(iter(env))
            if kind == "str" and isinstance(env["str"], list) and len(env["str"]) == 2:
                name, sid = env["str"]
                if isinstance(sid, int) and isinstance(name, str):
                    log.strings[file.name, sid] = name
                continue
            current = Record(number, t, kind, env[kind], env, file=file.name)
        if current is not None:
            _finish(current, payload, log, file)
        log.lines += len(lines)
    if not log.records and not log.strings:
        raise TraceFormatError(path, ["no TORCH_TRACE records (lines like 'V0403 07:28:48.05 1 file.py:1] {...}')",
                                      *log.problems[:5]])  # fmt: skip
    if bad_lines:
        log.problems.insert(0, f"{bad_lines} lines were not structured log records")
    return log


class _Calendar:
    """Days from a log's first date to each later one, from glog's month and day (no year): real calendar arithmetic,
    a year is a leap year once it shows a Feb 29 (one that shows none has 365 days). A log goes forward in time, so
    each date is the first day of its month and day no more than a day before the previous record's: a date that
    goes back in the year (Dec 31 -> Jan 1) is the next year's, and a line written a moment out of order across
    midnight (Jan 1, then Dec 31) stays on its day."""

    def __init__(self) -> None:
        self.year = 0  # the previous record's year, counted from the first record's
        self.year_start = 0  # its Jan 1, in days from the first record's year's
        self.leap: set[int] = set()  # the years that showed a Feb 29
        self.last: int | None = None  # the previous record's day, from the first record's year's Jan 1
        self.first = 0  # the first record's

    def day(self, month: int, day: int) -> int | None:
        """Days from the first record's date to this date (None: no such date)."""
        if not (1 <= month <= 12 and 1 <= day <= _DAYS_IN_MONTH[month - 1]):
            return None
        years = [(self.year, self.year_start)]
        if self.last is None:
            self.first = _DAYS_BEFORE_MONTH[month - 1] + day - 1
        else:
            years += [(self.year + 1, self.year_start + self._length(self.year)),
                      (self.year - 1, self.year_start - self._length(self.year - 1))]  # fmt: skip
        ordinals = [start + _DAYS_BEFORE_MONTH[month - 1] + (month > 2 and y in self.leap) + day - 1 for y, start in years]
        earliest = (self.first if self.last is None else self.last) - 1
        at = min((i for i in range(len(years)) if ordinals[i] >= earliest), key=ordinals.__getitem__)
        (self.year, self.year_start), self.last = years[at], ordinals[at]
        if month == 2 and day == 29:
            self.leap.add(self.year)
        return self.last - self.first

    def _length(self, year: int) -> int:
        return 366 if year in self.leap else 365


def _finish(record: Record, payload: list[str], log: StructuredLog, file: Path) -> None:
    if payload:
        record.payload = "\n".join(payload)
    encoding = record.value.get("encoding") if isinstance(record.value, dict) else None
    if record.payload is not None and (record.kind in _JSON_PAYLOADS or encoding == "json"):
        try:
            record.value = {**(record.value if isinstance(record.value, dict) else {}), "_json": orjson.loads(record.payload)}
        except orjson.JSONDecodeError as exc:
            base = record.value if isinstance(record.value, dict) else {}
            if record.payload.lstrip()[:1] in ("{", "[", '"'):
                _problem(log, f"{file.name}:{record.line}: {record.kind} payload is not valid JSON ({exc}); skipped")
                record.value = {**base, "_json": None}
            else:  # torch >= 2.9 writes some "json" artifacts as plain text
                record.value = {**base, "_json": record.payload.strip()}
    log.records.append(record)


def _problem(log: StructuredLog, text: str) -> None:
    if len(log.problems) < _MAX_PROBLEMS:
        log.problems.append(text)
    elif len(log.problems) == _MAX_PROBLEMS:
        log.problems.append("... more problems not listed")

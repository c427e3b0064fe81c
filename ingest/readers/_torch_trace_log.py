"""TORCH_TRACE structured logs (the input of tlparse): the records of a log (a leaf module: the
translation, torch_trace.py, reads what it parses).

Each record is a glog prefix and a JSON envelope on one line, e.g.
``V0403 07:28:48.061000 1398 torch/_dynamo/output_graph.py:1139] {"dynamo_output_graph": {...},
"frame_id": 0, "frame_compile_id": 0, "attempt": 1, "has_payload": "..."}``, followed by its
payload lines, each starting with a tab. A bad envelope or payload is reported in
run_info.extra["problems"], never fatal.
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


@dataclasses.dataclass
class Record:
    """One structured-log record: its kind (the envelope's main key), metadata and payload."""

    line: int
    time_s: float  # seconds since the start of the log's first day
    kind: str
    value: Any
    envelope: dict[str, Any]
    payload: str | None = None

    @property
    def compile_id(self) -> str | None:
        env = self.envelope
        if "frame_id" not in env:
            return None
        cid = f"{env.get('frame_id')}/{env.get('frame_compile_id')}"
        return cid + (f"_{env['attempt']}" if env.get("attempt") else "")

    @property
    def frame_key(self) -> str | None:
        """frame/frame_compile_id without the attempt."""
        env = self.envelope
        return f"{env.get('frame_id')}/{env.get('frame_compile_id')}" if "frame_id" in env else None


@dataclasses.dataclass
class StructuredLog:
    records: list[Record]
    strings: dict[int, str]  # interned file names ({"str": [name, id]})
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
    for file in log_files(path):
        text = decode_text(file, read_bytes(file, caps))
        log.files.append(file.name)
        lines = text.split("\n")
        current: Record | None = None
        payload: list[str] = []
        day0: float | None = None
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
            day = (int(m.group("month")) * 31 + int(m.group("day"))) * 86400.0
            day0 = day if day0 is None else day0
            t = day - day0 + int(m.group("h")) * 3600 + int(m.group("m")) * 60 + float(m.group("s"))
            kind = next(iter(env))
            if kind == "str" and isinstance(env["str"], list) and len(env["str"]) == 2:
                name, sid = env["str"]
                if isinstance(sid, int) and isinstance(name, str):
                    log.strings[sid] = name
                continue
            current = Record(number, t, kind, env[kind], env)
        if current is not None:
            _finish(current, payload, log, file)
        log.lines += len(lines)
    if not log.records and not log.strings:
        raise TraceFormatError(path, ["no TORCH_TRACE records (lines like 'V0403 07:28:48.05 1 file.py:1] {...}')",
                                      *log.problems[:5]])  # fmt: skip
    if bad_lines:
        log.problems.insert(0, f"{bad_lines} lines were not structured log records")
    return log


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

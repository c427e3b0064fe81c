"""TORCH_TRACE structured logs (the input of tlparse) -> events (`events.EventColumns`) -> Trace of compiles and
compile/* signals.

Parsing lives in _torch_trace_log.py. Each record about a compile becomes a `compile` event at the record's time,
named after the code it compiles, with what the record says (`events.Logged`, its ``record`` as the log names it):
``dynamo_output_graph`` (a graph, with its frame's op count and compile time from the frame's compile metrics),
``dynamo_graph_break_reason`` (reason, call site and user stack), ``recompile_reasons`` (the failed guards); a
frame's ``compilation_metrics`` gives a ``restart_reasons`` event per restart reason and a ``recompile_reason``
event. The rules (`rules`: compiled-graph, graph-break, recompile) decide what they are.

A folder's files are its processes' logs (a rank's each), and every one numbers its frames from 0/0: an event's
process (`pid`) is its file's name, and a frame's metrics and first record are looked up in its own file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..assemble import assemble
from ..callsites import relative_frames, relative_site
from ..events import EventColumns, EventKind, Logged, Translated
from ..graph_breaks import parse_graph_break
from ..schema import Mode, Source
from ..trace import RunInfo, Trace
from ._torch_trace_log import FORMAT, Record, StructuredLog, log_files, parse, sniff
from .source import DEFAULT_CAPS, SizeCaps

__all__ = ["FORMAT", "Record", "StructuredLog", "log_files", "parse", "read_torch_trace", "sniff", "translate"]


def read_torch_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a TORCH_TRACE file or directory into a Trace (compiles and compile/* signals)."""
    return assemble(translate(Path(path), parse(path, caps=caps)))


def translate(path: Path, log: StructuredLog) -> Translated:
    """The compile records of one parsed structured log as `compile` events, ns from its first record."""
    records = log.records
    t0 = min((r.time_s for r in records), default=0.0)
    t1 = max((r.time_s for r in records), default=0.0)

    def ns(t: float) -> int:
        return int(round((t - t0) * 1e9))

    metrics: dict[tuple[str, str], dict[str, Any]] = {}  # (file, frame key) ->
    starts: dict[tuple[str, str], Record] = {}
    for r in records:
        key = r.frame_key
        if key is None:
            continue
        if r.kind == "compilation_metrics" and isinstance(r.value, dict):
            metrics[r.file, key] = r.value
        elif r.kind == "dynamo_start" and (r.file, key) not in starts:
            starts[r.file, key] = r
    out = EventColumns()

    def add(record: str, r: Record, *, reason: str | None = None, call_site: str | None = None,
            stack: tuple[tuple[str, int, str], ...] = (), op_count: int | None = None,
            compile_ns: int | None = None) -> None:  # fmt: skip
        key = r.frame_key
        name, frame = _frame(metrics.get((r.file, key or "")), starts.get((r.file, key or "")), log.strings)
        frame = relative_site(frame) if frame else None  # library paths package-relative, as call sites everywhere
        site = relative_site(call_site) if call_site else frame
        code = out.log(Logged(record=record, reason=reason, call_site=site, stack=stack, compile_id=r.compile_id,
                              frame_key=key, frame=frame, op_count=op_count, compile_ns=compile_ns))  # fmt: skip
        out.add(EventKind.COMPILE, name, r.file, "log", ns(r.time_s), logged=code)  # its process: its log file

    for r in records:
        value = r.value if isinstance(r.value, dict) else {}
        if r.kind == "dynamo_output_graph":
            m = metrics.get((r.file, r.frame_key or ""), {})
            seconds = m.get("entire_frame_compile_time_s")
            seconds = seconds * 1e9 if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None
            add(r.kind, r, op_count=_int(m.get("graph_op_count")), compile_ns=_int(seconds))
        elif r.kind == "artifact" and value.get("name") == "dynamo_graph_break_reason":
            reason, site, frames = parse_graph_break(r.payload or "")
            add(value["name"], r, reason=reason, call_site=site, stack=tuple(relative_frames(frames)))
        elif r.kind == "artifact" and value.get("name") == "recompile_reasons":
            reasons = value.get("_json")
            text = "; ".join(str(x) for x in reasons) if isinstance(reasons, list) else reasons
            add(value["name"], r, reason=text if isinstance(text, str) and text else None)
        elif r.kind == "compilation_metrics" and r.frame_key is not None:  # older torch logs breaks and recompiles here
            for reason in value.get("restart_reasons") or []:
                add("restart_reasons", r, reason=_first_line(str(reason)))
            if value.get("recompile_reason"):
                add("recompile_reason", r, reason=str(value["recompile_reason"]))
    return Translated(out, _run_info(log), root_name=path.name, root_device=None, root_mode=Mode.COMPILED,
                      end_ns=ns(t1))  # fmt: skip


def _frame(metrics: dict | None, start: Record | None, strings: dict[tuple[str, int], str]) -> tuple[str | None, str | None]:
    """(frame name, "file:line (name)") of a compile id."""
    if metrics and metrics.get("co_name"):
        name = str(metrics["co_name"])
        if metrics.get("co_filename"):
            return name, f"{metrics['co_filename']}:{metrics.get('co_firstlineno', '?')} ({name})"
        return name, None
    if start is not None and isinstance(start.value, dict):
        stack = start.value.get("stack")
        if isinstance(stack, list) and stack and isinstance(stack[-1], dict):
            top = stack[-1]
            file = strings.get((start.file, top.get("filename")), str(top.get("filename")))
            return top.get("name"), f"{file}:{top.get('line')} ({top.get('name')})"
    return None, None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _int(value: Any) -> int | None:
    """A count or duration the log gives (a float truncated), None where it is none or no int64 holds it."""
    if isinstance(value, float) and 0 <= value < 2**63:
        return int(value)
    return value if type(value) is int and 0 <= value < 2**63 else None


def _run_info(log: StructuredLog) -> RunInfo:
    version = None
    for r in log.records:
        if r.kind == "artifact" and isinstance(r.value, dict) and r.value.get("name") == "torch_version":
            v = r.value.get("_json")
            v = v.get("pytorch_version") if isinstance(v, dict) else v
            version = v if isinstance(v, str) else None
    return RunInfo(
        source=Source.CONVERTED,
        torch_version=version,
        producer="portscope convert",
        converted_from=FORMAT,
        missing_signals=["operators, transfers and syncs (a compile log records compilation only)"],
        extra={"files": log.files, "records": len(log.records), "lines": log.lines, "problems": log.problems},
    )

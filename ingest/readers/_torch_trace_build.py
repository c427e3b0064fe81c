"""Build the compiles table and compile/* signals from parsed TORCH_TRACE records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..builder import TraceBuilder
from ..callsites import relative_frames, relative_site
from ..graph_breaks import parse_graph_break
from ..schema import CompileKind, Mode, SignalKind, Source
from ..trace import RunInfo, Trace
from ._torch_trace_log import FORMAT, Record, StructuredLog

_SIGNAL = {
    CompileKind.GRAPH: SignalKind.COMPILE_GRAPH,
    CompileKind.GRAPH_BREAK: SignalKind.COMPILE_GRAPH_BREAK,
    CompileKind.RECOMPILE: SignalKind.COMPILE_RECOMPILE,
}


def build_trace(path: Path, log: StructuredLog) -> Trace:
    """The Trace of one parsed structured log: a root region, compiles and their signals."""
    records = log.records
    t0 = min((r.time_s for r in records), default=0.0)
    t1 = max((r.time_s for r in records), default=0.0)

    def ns(t: float) -> int:
        return int(round((t - t0) * 1e9))

    metrics: dict[str, dict[str, Any]] = {}
    starts: dict[str, Record] = {}
    for r in records:
        key = r.frame_key
        if key is None:
            continue
        if r.kind == "compilation_metrics" and isinstance(r.value, dict):
            metrics[key] = r.value
        elif r.kind == "dynamo_start" and key not in starts:
            starts[key] = r

    b = TraceBuilder(_run_info(log))
    root = b.add_region(path.name, start_ns=0, dur_ns=ns(t1), mode=Mode.COMPILED)

    def add(kind: CompileKind, r: Record, *, reason: str | None = None, call_site: str | None = None,
            stack_id: int | None = None, op_count: int | None = None, compile_ns: int | None = None) -> None:  # fmt: skip
        key = r.frame_key or ""
        name, frame = _frame(metrics.get(key), starts.get(key), log.strings)
        frame = relative_site(frame) if frame else None  # library paths package-relative, as call sites everywhere
        call_site = relative_site(call_site) if call_site else None
        b.compiles.append(region_id=root, kind=kind, compile_id=r.compile_id, key=name, frame=frame, op_count=op_count,
                          compile_ns=compile_ns, reason=reason, call_site=call_site or frame, time_ns=ns(r.time_s))  # fmt: skip
        b.signals.append(region_id=root, kind=_SIGNAL[kind], reason=reason, op_name=name, count=1, bytes=0,
                         call_site=call_site or frame, stack_id=stack_id, time_ns=ns(r.time_s))  # fmt: skip

    breaks_logged: set[str] = set()
    recompiles_logged: set[str] = set()
    for r in records:
        key = r.frame_key
        value = r.value if isinstance(r.value, dict) else {}
        if r.kind == "dynamo_output_graph":
            m = metrics.get(key or "", {})
            seconds = m.get("entire_frame_compile_time_s")
            add(CompileKind.GRAPH, r, op_count=_int(m.get("graph_op_count")),
                compile_ns=int(seconds * 1e9) if isinstance(seconds, (int, float)) and seconds >= 0 else None)  # fmt: skip
        elif r.kind == "artifact" and value.get("name") == "dynamo_graph_break_reason":
            reason, site, frames = parse_graph_break(r.payload or "")
            stack_id = b.stacks.intern(relative_frames(frames)) if frames else None
            add(CompileKind.GRAPH_BREAK, r, reason=reason, call_site=site, stack_id=stack_id)
            breaks_logged.add(key or "")
        elif r.kind == "artifact" and value.get("name") == "recompile_reasons":
            reasons = value.get("_json")
            text = "; ".join(str(x) for x in reasons) if isinstance(reasons, list) else reasons
            text = text if isinstance(text, str) and text else None
            add(CompileKind.RECOMPILE, r, reason=text or "unknown (payload unreadable)")
            recompiles_logged.add(key or "")
    # Older logs: graph breaks only as restart reasons, recompiles only in the metrics.
    for r in records:
        key = r.frame_key
        if r.kind != "compilation_metrics" or not isinstance(r.value, dict) or key is None:
            continue
        if key not in breaks_logged:
            for reason in r.value.get("restart_reasons") or []:
                add(CompileKind.GRAPH_BREAK, r, reason=_first_line(str(reason)))
        if key not in recompiles_logged and r.value.get("recompile_reason"):
            add(CompileKind.RECOMPILE, r, reason=str(r.value["recompile_reason"]))
    return b.build()


def _frame(metrics: dict | None, start: Record | None, strings: dict[int, str]) -> tuple[str | None, str | None]:
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
            file = strings.get(top.get("filename"), str(top.get("filename")))
            return top.get("name"), f"{file}:{top.get('line')} ({top.get('name')})"
    return None, None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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

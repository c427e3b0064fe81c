"""torch.compile inside a region: compile events from torch's structured trace log, and graph calls.

Compile events come from the public structured-trace logger (`torch.__trace`),
the one `TORCH_TRACE`/tlparse read: `compilation_metrics` (compile id, frame,
operator count, compile time, the guard that failed for a recompile), the
`dynamo_graph_break_reason` artifact (reason and user source line) and the
`recompile_reasons` artifact. Fields are read defensively: they vary across torch
versions. torch 2.5 has no graph-break artifact; there the `graph_breaks` artifact
logger (what `TORCH_LOGS=graph_breaks` prints) is read instead, without printing.

Graph calls: after a frame compiles, Dynamo stores each compiled graph as a
`__compiled_fn_*` global of the frame's module; those are wrapped so each call
is recorded as one operator (placement `graph`) with its duration, and the
operators it dispatches carry its graph id.

Graph insides: AOTAutograd's `aot_inference_graph` (`aot_forward_graph`) record of a
compile holds the graph's ATen operators (aot_graph.py); the graph call wrapped for
that compile keeps them (`GraphFunc.inside`), and predicted schedules run them as the
compiled program's inside.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import sys
import threading
import time
from typing import Any

from portscope.ingest.graph_breaks import location, parse_graph_break
from portscope.ingest.schema import CompileKind

from ._thread_state import current_session, skip_dynamo
from .aot_graph import GRAPH_RECORDS, AotGraph, parse_aot_graph

_TRACE_LOGGER = "torch.__trace"
_GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"
_STACK_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_COMPILED_PREFIX = "__compiled_fn"


@dataclasses.dataclass
class CompileEvent:
    kind: CompileKind
    compile_id: str | None
    frame: str | None = None
    op_count: int | None = None
    compile_ns: int | None = None
    cache_hit: bool | None = None
    reason: str | None = None
    call_site: str | None = None
    time_ns: int = 0
    graph_id: int | None = None


def _graph_break(payload: str) -> tuple[str | None, str]:
    """(user source line, reason) from a dynamo_graph_break_reason payload (the parser TORCH_TRACE logs use too)."""
    reason, site, _frames = parse_graph_break(payload)
    return site, reason or (payload.strip().splitlines()[0] if payload.strip() else "unknown")


def graph_break_record(record: logging.LogRecord) -> tuple[str | None, str]:
    """(user source line, reason) from a `graph_breaks` log record: the structured payload's text (newer
    torch), or a formatted user stack with the cause as exc_info (torch 2.5)."""
    message = record.getMessage()
    if "Graph Break Reason:" in message:
        return _graph_break(message)
    frames = _STACK_FRAME.findall(message)
    site = f"{frames[-1][0]}:{frames[-1][1]}" if frames else None
    exc = record.exc_info[1] if record.exc_info else None
    text = str(getattr(exc, "msg", None) or exc or "").strip()
    return site, (text.splitlines()[0] if text else "graph break")


_families: dict[str, tuple[int, list[logging.Logger]]] = {}  # logger name -> (loggers known then, it + descendants)


def _set_level(logger: logging.Logger, level: int) -> None:
    """`logger.setLevel(level)` without `Logger.setLevel`'s walk over every logger of the process (~100 us per
    region with torch and transformers loaded): only this logger's and its descendants' cached levels can change.
    Loggers are never removed, so the family list stays right while the number of loggers does not change."""
    if logger.level == level:
        return
    if not all(hasattr(x, "_cache") for x in (logger, logging.root)):  # a logging without per-logger caches
        logger.setLevel(level)
        return
    loggers = logging.Logger.manager.loggerDict
    known, family = _families.get(logger.name, (-1, []))
    if known != len(loggers):
        prefix = logger.name + "."
        family = [logger] + [x for name, x in list(loggers.items())
                             if name.startswith(prefix) and isinstance(x, logging.Logger)]
        _families[logger.name] = (len(loggers), family)
    with logging._lock:  # type: ignore[attr-defined]  # what Logger.setLevel holds while it clears caches
        logger.level = logging._checkLevel(level)  # type: ignore[attr-defined]
        for x in family:
            x._cache.clear()  # type: ignore[attr-defined]


class _GraphBreakLog(logging.Handler):
    def __init__(self, watcher: CompileWatcher) -> None:
        super().__init__(level=logging.DEBUG)
        self.watcher = watcher

    def emit(self, record: logging.LogRecord) -> None:
        if threading.get_ident() != self.watcher._thread or not self.watcher.session.regions:
            return
        try:
            site, reason = graph_break_record(record)
            if site is not None:  # without a source line it cannot be told apart from the structured event
                self.watcher.graph_break(None, site, reason, structured=False)
        except Exception:  # noqa: BLE001 - never break the user's compile
            return


class CompileWatcher(logging.Handler):
    """Collects compile events while regions are open; attributes them to the innermost region."""

    def __init__(self, session: Any) -> None:
        super().__init__(level=logging.DEBUG)
        self.session = session
        self._graph_ids: dict[str, int] = {}
        self._cache_hits: set[str] = set()
        self._wrapped_modules: set[int] = set()
        self._thread = threading.get_ident()
        self._saved: tuple[int, bool] | None = None
        self._recompile_reasons: dict[str | None, str] = {}
        self._insides: dict[str | None, AotGraph] = {}  # compile id -> its graph's ATen operators
        self._break_log = _GraphBreakLog(self)
        self._break_state: tuple[int, bool] | None = None

    # ---- install ------------------------------------------------------------------------

    def install(self) -> None:
        logger = logging.getLogger(_TRACE_LOGGER)
        self._saved = (logger.level, logger.propagate)
        logger.addHandler(self)
        if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
            _set_level(logger, logging.DEBUG)
        # Only an artifact logger torch registered (never created here). Unless the user enabled it
        # (TORCH_LOGS=graph_breaks), its records stop at this handler: nothing is printed.
        breaks = logging.Logger.manager.loggerDict.get(_GRAPH_BREAK_LOGGER)
        if isinstance(breaks, logging.Logger):
            self._break_state = (breaks.level, breaks.propagate)
            breaks.addHandler(self._break_log)
            if breaks.level == logging.NOTSET or breaks.level > logging.DEBUG:
                _set_level(breaks, logging.DEBUG)
                breaks.propagate = False

    def uninstall(self) -> None:
        logger = logging.getLogger(_TRACE_LOGGER)
        logger.removeHandler(self)
        if self._saved is not None:
            _set_level(logger, self._saved[0])
        if self._break_state is not None:
            breaks = logging.getLogger(_GRAPH_BREAK_LOGGER)
            breaks.removeHandler(self._break_log)
            _set_level(breaks, self._break_state[0])
            breaks.propagate = self._break_state[1]
            self._break_state = None

    # ---- events -------------------------------------------------------------------------

    def graph_id(self, compile_id: str) -> int:
        gid = self._graph_ids.get(compile_id)
        if gid is None:
            gid = self._graph_ids[compile_id] = len(self._graph_ids)
        return gid

    def emit(self, record: logging.LogRecord) -> None:
        if threading.get_ident() != self._thread or not self.session.regions:
            return
        metadata = getattr(record, "metadata", None)
        if not isinstance(metadata, dict) or not metadata:
            return
        try:
            self._handle(metadata, getattr(record, "payload", None))
        except Exception:  # noqa: BLE001 - a field we did not expect must never break the user's compile
            return

    def _handle(self, metadata: dict, payload: Any) -> None:
        key = next(iter(metadata))
        body = metadata[key]
        compile_id = _compile_id(metadata)
        region = self.session.regions[-1]
        now = time.perf_counter_ns()
        if key in GRAPH_RECORDS and isinstance(payload, str):
            self._insides[compile_id] = parse_aot_graph(payload)
        elif key == "artifact" and isinstance(body, dict):
            name = str(body.get("name", ""))
            if name == "dynamo_graph_break_reason" and isinstance(payload, str):
                site, reason = _graph_break(payload)
                self.graph_break(compile_id, site, reason, structured=True)
            elif name == "recompile_reasons" and isinstance(payload, str):
                reasons = json.loads(payload)
                if isinstance(reasons, list) and reasons:
                    self._recompile_reasons[compile_id] = "; ".join(str(r) for r in reasons)
            elif "cache_hit" in name and compile_id:
                self._cache_hits.add(compile_id)
        elif key == "compilation_metrics" and isinstance(body, dict):
            self._metrics(region, body, compile_id, now)

    def graph_break(self, compile_id: str | None, site: str | None, reason: str, *, structured: bool) -> None:
        """One event per source line and region; torch's structured artifact wins over the log record."""
        region = self.session.regions[-1]
        for event in region.compile_events:
            if event.kind is CompileKind.GRAPH_BREAK and location(event.call_site) == location(site):
                if structured:
                    event.reason, event.compile_id = reason, compile_id or event.compile_id
                    event.call_site = site or event.call_site
                return
        region.compile_events.append(CompileEvent(CompileKind.GRAPH_BREAK, compile_id, reason=reason, call_site=site,
                                                  time_ns=time.perf_counter_ns()))

    def _metrics(self, region: Any, m: dict, compile_id: str | None, now: int) -> None:
        inside = self._insides.pop(compile_id, None)
        compile_id = str(m.get("compile_id") or compile_id or "?")
        inside = self._insides.pop(compile_id, inside)
        filename, line, name = m.get("co_filename"), m.get("co_firstlineno"), m.get("co_name")
        frame = f"{filename}:{line} ({name})" if filename else None
        seconds = m.get("entire_frame_compile_time_s")
        compile_ns = int(seconds * 1e9) if isinstance(seconds, (int, float)) else None
        ops = m.get("graph_op_count")
        fail = m.get("fail_reason")
        recompile = m.get("recompile_reason") or self._recompile_reasons.pop(compile_id, None)
        gid = self.graph_id(compile_id)
        if recompile:
            region.compile_events.append(CompileEvent(CompileKind.RECOMPILE, compile_id, frame, reason=str(recompile),
                                                      call_site=frame, time_ns=now, graph_id=gid))
        if not fail and ops != 0:  # an empty graph compiles nothing
            region.compile_events.append(CompileEvent(
                CompileKind.GRAPH, compile_id, frame, op_count=ops if isinstance(ops, int) else None,
                compile_ns=compile_ns, cache_hit=compile_id in self._cache_hits, call_site=frame, time_ns=now,
                graph_id=gid))
        if filename:
            self._wrap_compiled(filename, compile_id, gid, inside)

    def _wrap_compiled(self, filename: str, compile_id: str, gid: int, inside: AotGraph | None) -> None:
        for module in list(sys.modules.values()):
            if getattr(module, "__file__", None) != filename:
                continue
            namespace = module.__dict__
            for name, value in list(namespace.items()):
                if name.startswith(_COMPILED_PREFIX) and callable(value) and not isinstance(value, GraphCall):
                    namespace[name] = GraphCall(value, compile_id, gid, inside)


def _compile_id(metadata: dict) -> str | None:
    frame, attempt = metadata.get("frame_id"), metadata.get("frame_compile_id")
    if frame is None or attempt is None:
        return None
    return f"{frame}/{attempt}"


class GraphFunc:
    """Stands for a compiled graph where the recorder expects an operator; `inside`: its ATen operators, when
    its compile logged them."""

    __slots__ = ("compile_id", "inside")

    def __init__(self, compile_id: str, inside: AotGraph | None = None) -> None:
        self.compile_id = compile_id
        self.inside = inside

    def name(self) -> str:
        return f"compiled graph {self.compile_id}"


class GraphCall:
    """A compiled graph that records each call (one operator) while a region is open."""

    def __init__(self, fn: Any, compile_id: str, graph_id: int, inside: AotGraph | None = None) -> None:
        self.fn = fn
        self.func = GraphFunc(compile_id, inside)
        self.graph_id = graph_id
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        session = current_session()
        if session is None or not session.regions or session.graph is not None:
            return self.fn(*args, **kwargs)
        return session.graph_call(self, args, kwargs)


def _never_traced() -> None:
    """Compiled code calls GraphCall; Dynamo must not trace the recording behind it."""
    if not skip_dynamo(GraphCall.__call__.__code__):
        GraphCall.__call__ = torch_disable(GraphCall.__call__)  # type: ignore[method-assign]


def torch_disable(fn: Any) -> Any:
    import torch

    return torch._dynamo.disable(fn, recursive=True)


_never_traced()

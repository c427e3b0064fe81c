"""The compile rules and the compiler's time, which other rules and `assemble` read.

The rules' statements are in `rules`: online compile, counted recompile, compiled graph, compiler phase, graph break,
recompile. The compiler's time on a thread is its outermost compiler spans there (its phases, PyTorch's
``(dynamo_timed)`` ranges, and the compile events that carry a ``<event>_data: compile_id=`` marker, such as
``dynamo`` around a frame's whole compile): an operator that starts in it is the compiler's (`compiler_ops`: it
traced or compiled, on fake tensors; not the program's work), and a wait in it is no sync (`while_compiling`).
Mode (`compiled_regions`): a region in which the program called compiled code (a `kineto_vocabulary.is_compiled_call`
range starting in it or in a region nested in it, outside the compiler's time) ran compiled; one without such a call
is left as its file says (a profiler trace cannot tell eager from a region nested in a compiled call, or from one
holding no program work).
"""

from __future__ import annotations

import re

import numpy as np

from .events import EventKind, Logged
from .kineto_vocabulary import (
    COMPILER_PHASE_SUFFIX,
    ONLINE_COMPILE_CALLS,
    compiler_event_of,
    is_compiled_call,
)
from .linked import EventRule, Findings, Linked
from .schema import CompileKind, SignalKind

COMPILE_NOTE = ("an operator compiled online (no pre-built binary for its shapes): try static shapes or binary kernels "
                "(torch_npu.npu.set_compile_mode(jit_compile=False))")
# the records of a compile log (TORCH_TRACE) that the compile rules read, as `Logged.record` names them
GRAPH_RECORD = "dynamo_output_graph"  # Dynamo compiled a graph
BREAK_RECORD = "dynamo_graph_break_reason"  # a graph break, its reason and user stack
RECOMPILE_RECORD = "recompile_reasons"  # a recompile, the guards that failed
RESTART_RECORD = "restart_reasons"  # older torch: a restart reason in a frame's compile metrics (a graph break)
# a restart reason Dynamo writes as the exception's class, str(type(e)), for a restart that names no reason: one of its
# own (TensorifyScalarRestartAnalysis...), not a graph break (`_graph_breaks`)
RESTART_WITHOUT_BREAK = re.compile(r"<class '[\w.]+'>")
METRICS_RECOMPILE_RECORD = "recompile_reason"  # older torch: a recompile's reason in a frame's compile metrics
UNREADABLE = "unknown (payload unreadable)"
# an explain dump's record (a backend's counts, no timeline) that a rule reads, as the dump's key names it
COUNTED_RECOMPILE_RECORD = "recompile_by_op"  # dispatch recompiles counted by operator
_NO_TIME = np.iinfo(np.int64).min


def _online_compiles(linked: Linked, out: Findings) -> None:
    a, links = linked.a, linked.links
    calls = linked.rows(EventKind.RUNTIME)
    compile_name = linked.names_where(lambda t: t in ONLINE_COMPILE_CALLS)
    for row in calls[compile_name[a["name"][calls]]].tolist():
        outer = int(links.call_parent[row])
        nested = False
        while outer >= 0:
            if compile_name[a["name"][outer]]:
                nested = True
                break
            outer = int(links.call_parent[outer])
        if nested:
            continue  # one compile, recorded by the call around it
        op = int(links.op[row])
        call = linked.name(row)
        out.signal(row, op, SignalKind.RECOMPILE, f"online-{call}", linked.name(op) if op >= 0 else call, COMPILE_NOTE)
        out.compiled(row, CompileKind.PROGRAM, call)


def _compiler_phases(linked: Linked, out: Findings) -> None:
    """Each outermost compiler phase span on its thread (`COMPILER_PHASE_SUFFIX`: Dynamo compiling a frame,
    AOTAutograd a backward graph...) is one graph compiled, as long as the span; the phases inside it are its own."""
    for row in _outer_phases(linked).tolist():
        phase = linked.name(row).removesuffix(COMPILER_PHASE_SUFFIX)
        out.signal(row, -1, SignalKind.COMPILE_GRAPH, phase, linked.name(row), None)
        out.compiled(row, CompileKind.GRAPH, phase)


def _outer_phases(linked: Linked) -> np.ndarray:
    """The rows of the compiler phase spans no other phase on their thread encloses, by thread then start (worked out
    once per run)."""
    if linked.phases is None:
        spans = _spans(linked)
        phase = linked.names_where(lambda t: t.endswith(COMPILER_PHASE_SUFFIX))
        linked.phases = _outermost_spans(linked, spans[phase[linked.a["name"][spans]]])
    return linked.phases


def _spans(linked: Linked) -> np.ndarray:
    """The rows a compiler range can be: spans and operators (a record_function range is an operator in newer torch)."""
    return np.concatenate([linked.rows(EventKind.SPAN), linked.rows(EventKind.OP)])


def _compiler_spans(linked: Linked) -> np.ndarray:
    """The rows of the compiler's outermost spans on their thread, by thread then start: its phases and its compile
    events, a range named as the event with the event's marker (``dynamo_data: compile_id=0/0``) starting inside it on
    its thread (``dynamo`` opens before the phase ``_compile.compile_inner (dynamo_timed)`` and closes after it).
    Worked out once per run."""
    if linked.compiling is None:
        phase_text = linked.names_where(lambda t: t.endswith(COMPILER_PHASE_SUFFIX))
        event_of = {code: e for code, t in enumerate(linked.texts)
                    if t and "_data: " in t and (e := compiler_event_of(t)) is not None}  # fmt: skip
        if not phase_text.any() and not event_of:  # no compiler in the run (most traces): nothing more to read
            linked.compiling = np.zeros(0, dtype=np.int64)
            return linked.compiling
        a, spans = linked.a, _spans(linked)
        names = np.asarray(a["name"][spans])
        phase = phase_text[names]
        marks: dict[str, list[tuple[int, int]]] = {}  # a compile event's name -> its markers' (thread, start)
        for row in spans[np.isin(names, list(event_of))].tolist():
            marks.setdefault(event_of[int(a["name"][row])], []).append((int(a["thread"][row]), int(a["start_ns"][row])))
        for i in np.flatnonzero(linked.names_where(lambda t: t in marks)[names]).tolist():  # a few: one an event
            row = int(spans[i])
            begin, thread = int(a["start_ns"][row]), int(a["thread"][row])
            end = begin + int(a["dur_ns"][row])
            phase[i] |= any(t == thread and begin <= m < end for t, m in marks[linked.name(row)])
        linked.compiling = _outermost_spans(linked, spans[phase])
    return linked.compiling


def _outermost_spans(linked: Linked, spans: np.ndarray) -> np.ndarray:
    """Those of `spans` no other of them on their thread encloses, by thread then start (at one start the longer)."""
    a = linked.a
    start, thread = np.asarray(a["start_ns"][spans]), np.asarray(a["thread"][spans])
    end = start + np.asarray(a["dur_ns"][spans])
    outer: list[int] = []
    open_until: dict[int, int] = {}
    for i in np.lexsort((-end, start, thread)).tolist():  # by thread, then start; the longer first at one start
        if int(start[i]) >= open_until.get(int(thread[i]), _NO_TIME):
            open_until[int(thread[i])] = int(end[i])
            outer.append(int(spans[i]))
    return np.asarray(outer, dtype=np.int64)


def while_compiling(linked: Linked, rows: np.ndarray) -> np.ndarray:
    """A flag per row: it starts in the compiler's time on its own thread (inside one of its outermost spans there)."""
    a, inside = linked.a, np.zeros(len(rows), dtype=bool)
    spans = _compiler_spans(linked)
    if not len(spans) or not len(rows):
        return inside
    start, thread = np.asarray(a["start_ns"][rows]), np.asarray(a["thread"][rows])
    span_thread, begin = np.asarray(a["thread"][spans]), np.asarray(a["start_ns"][spans])
    end = begin + np.asarray(a["dur_ns"][spans])
    for t in np.unique(span_thread).tolist():  # a thread's outermost spans do not overlap: the last begun before
        mine, on = np.flatnonzero(span_thread == t), np.flatnonzero(thread == t)
        at = np.searchsorted(begin[mine], start[on], side="right") - 1
        inside[on] = (at >= 0) & (start[on] < end[mine][np.maximum(at, 0)])
    return inside


def compiler_ops(linked: Linked) -> np.ndarray:
    """The operators the compiler ran (placement `compiler`): those that start in its time on their thread, its own
    ranges recorded as operators included. Its tracing runs operators on fake tensors, Inductor's passes run
    operators of their own: the compiler's work, not the program's."""
    ops = linked.rows(EventKind.OP)
    return ops[while_compiling(linked, ops)]


def compiled_regions(linked: Linked) -> tuple[bool, np.ndarray]:
    """(whether the program called compiled code anywhere in the run, a flag per annotation in `Links.annotations`
    order: it called some inside that region or a region nested in it). A call of compiled code is a range
    `is_compiled_call` names (``Torch-Compiled Region: 0/0``, ``CompiledFunction``, ``## Call CompiledFxGraph ...
    ##``) that starts outside the compiler's time; its region is the innermost one open at its start (an annotation
    so named: itself)."""
    links = linked.links
    flags = np.zeros(len(links.annotations), dtype=bool)
    named = linked.names_where(is_compiled_call)
    if not named.any():  # no compiled code in the run (most traces): no row to read
        return False, flags
    rows = np.concatenate([_spans(linked), linked.rows(EventKind.ANNOTATION)])
    rows = rows[named[linked.a["name"][rows]]]
    rows = rows[~while_compiling(linked, rows)]
    if not len(rows) or not len(flags):
        return bool(len(rows)), flags
    order = np.argsort(links.annotations, kind="stable")
    inner = np.asarray(links.region_rows[links.region_change(np.asarray(linked.a["start_ns"][rows]))])
    inner = np.unique(inner[inner >= 0])
    at = order[np.searchsorted(links.annotations[order], inner)]  # each innermost annotation's place
    while len(at):  # marked, then the annotations around them, a level at a time
        at = at[~flags[at]]
        flags[at] = True
        up = links.annotation_parent[at]
        up = up[up >= 0]
        at = order[np.searchsorted(links.annotations[order], up)]
    return True, flags



def _counted_recompiles(linked: Linked, out: Findings) -> None:
    for row, logged in linked.logged(EventKind.COMPILE):
        if logged.record == COUNTED_RECOMPILE_RECORD:  # counts by operator: no compiles row (that table lists single
            out.signal(row, -1, SignalKind.RECOMPILE, logged.reason, linked.given_name(row), logged.fix)  # compiles)



def _compiled_graphs(linked: Linked, out: Findings) -> None:
    """A frame's last graph record is the graph it compiled. Dynamo logs a graph per attempt at a frame and restarts
    the analysis (the next attempt) where one tells it to (torch 2.13: ``TensorifyScalarRestartAnalysis`` after
    attempt 0's graph): the graph it logged before is discarded, and the frame's compile metrics (the op count and
    compile time the events carry) are the last attempt's. A record of no frame is a graph of its own."""
    events = [(row, x) for row, x in linked.logged(EventKind.COMPILE) if x.record == GRAPH_RECORD]
    last = {_frame_of(linked, row, x): row for row, x in events}  # file order: the last attempt
    for row, x in events:
        if x.frame_key is None or last[_frame_of(linked, row, x)] == row:
            out.signal(row, -1, SignalKind.COMPILE_GRAPH, None, linked.name(row), None)
            out.compiled(row, CompileKind.GRAPH, None)


def _frame_of(linked: Linked, row: int, logged: Logged) -> tuple[int, str | None]:
    """A compile record's frame: its frame key in its process (its thread: every rank's log numbers its frames from
    0/0)."""
    return int(linked.a["thread"][row]), logged.frame_key


def _compile_records(linked: Linked, out: Findings, record: str, metrics_record: str, kind: CompileKind,
                     signal: SignalKind, unreadable: str | None, not_one: re.Pattern[str] | None = None) -> None:
    """`record` events (their reason, else `unreadable`), and `metrics_record` events of the frames none is of (a
    frame of a process), but those whose reason `not_one` matches whole."""
    events = linked.logged(EventKind.COMPILE)
    logged = {_frame_of(linked, row, x) for row, x in events if x.record == record}
    for row, x in events:
        if x.record == record:
            reason = x.reason or unreadable
        elif (x.record == metrics_record and _frame_of(linked, row, x) not in logged
              and not (not_one is not None and not_one.fullmatch(x.reason or ""))):  # fmt: skip
            reason = x.reason
        else:
            continue
        out.signal(row, -1, signal, reason, linked.name(row), None)
        out.compiled(row, kind, reason)


def _graph_breaks(linked: Linked, out: Findings) -> None:
    """A logged graph break; a frame with none (older torch logs no break record) has one per restart reason in its
    compile metrics, but a restart that is no break. Dynamo restarts a frame's analysis on a ``RestartAnalysis`` and
    records ``e.restart_reason or str(type(e))``: a graph break restarts with its reason in words (older torch:
    ``'skip function graph_break in file …'``; a failed speculation: the break's reason), while a restart Dynamo
    makes for reasons of its own names none (``TensorifyScalarRestartAnalysis``: a float it tensorifies;
    ``UnspecializeRestartAnalysis``, ``CompileCollectiveRestartAnalysis``) and is recorded as its class,
    ``<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>`` (`RESTART_WITHOUT_BREAK`): no break. Neither
    the metrics' ``num_graph_breaks`` (torch 2.13 counts the run's breaks so far; older torch writes none) nor the
    attempt (a break restarts as well) tells them apart."""
    _compile_records(linked, out, BREAK_RECORD, RESTART_RECORD, CompileKind.GRAPH_BREAK,
                     SignalKind.COMPILE_GRAPH_BREAK, None, RESTART_WITHOUT_BREAK)  # fmt: skip


def _recompiles(linked: Linked, out: Findings) -> None:
    _compile_records(linked, out, RECOMPILE_RECORD, METRICS_RECOMPILE_RECORD, CompileKind.RECOMPILE,
                     SignalKind.COMPILE_RECOMPILE, UNREADABLE)  # fmt: skip



ONLINE_COMPILE_RULE = EventRule("online-compile", "an operator compiled online by the runtime; nested compile calls "
                                "count once", (SignalKind.RECOMPILE,), _online_compiles)  # fmt: skip
COUNTED_RECOMPILE_RULE = EventRule("counted-recompile", "operators a backend's dump counts as recompiled at dispatch",
                                   (SignalKind.RECOMPILE,), _counted_recompiles)  # fmt: skip
COMPILED_GRAPH_RULE = EventRule("compiled-graph", "a graph a compile log records as compiled",
                                (SignalKind.COMPILE_GRAPH,), _compiled_graphs)  # fmt: skip
COMPILER_PHASE_RULE = EventRule("compiler-phase", "a compiler phase a profiler trace records (PyTorch's dynamo_timed "
                                "ranges); the outermost on its thread is one compile, nested phases count once",
                                (SignalKind.COMPILE_GRAPH,), _compiler_phases)  # fmt: skip
GRAPH_BREAK_RULE = EventRule("graph-break", "a compile log's graph break; else (older torch) its frame's metrics' "
                             "restart reasons", (SignalKind.COMPILE_GRAPH_BREAK,), _graph_breaks)  # fmt: skip
RECOMPILE_RULE = EventRule("recompile", "a compile log's recompile, the guards that failed; else (older torch) its "
                           "metrics'", (SignalKind.COMPILE_RECOMPILE,), _recompiles)  # fmt: skip

__all__ = ["BREAK_RECORD", "COMPILED_GRAPH_RULE", "COMPILER_PHASE_RULE", "COMPILE_NOTE", "COUNTED_RECOMPILE_RECORD",
           "COUNTED_RECOMPILE_RULE", "GRAPH_BREAK_RULE", "GRAPH_RECORD", "METRICS_RECOMPILE_RECORD",
           "ONLINE_COMPILE_RULE", "RECOMPILE_RECORD", "RECOMPILE_RULE", "RESTART_RECORD", "RESTART_WITHOUT_BREAK",
           "UNREADABLE", "compiled_regions", "compiler_ops", "while_compiling"]

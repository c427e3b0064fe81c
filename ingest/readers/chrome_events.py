"""Chrome trace events collected compactly: spans (X, and B/E pairs), instants, flows and lane names.

The readers of runtime traces (torch_npu, Mobilint, Furiosa, generic Chrome JSON)
share this pass. Spans and instants are kept as columns of integers (times in ns, exact,
see ``chrome_stream.micros_to_ns``, as int64; names, categories, pids and tids as int32
codes into one table of values), and of each event's ``args`` only the keys a reader asks
for: 36 bytes a span, 34 a flow endpoint, and no Python object kept per event (objects kept
from a batch's parse would pin its memory). Each column is a ``spill.DiskColumn``: past
HOLD_ROWS values it goes to a temporary file after each batch of events, so what stays in
memory is bounded whatever the trace's size; consumers read it block by block or by a windowed
gather. The readers give each flow endpoint (``s``/``t``/``f``) to the event model as a FLOW
event; the linker binds it to its span, by Chrome's binding rules.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from .. import spill
from ..errors import TraceFormatError
from ..events import Translated
from ..spill import DiskColumn
from ..trace import Trace
from .chrome_stream import event_batches, micros_to_ns
from .source import DEFAULT_CAPS, SizeCaps

MAX_PROBLEMS = 10


class Values:
    """Interned values (names, categories, pids, tids, args): each distinct value once, referred to by a code."""

    def __init__(self) -> None:
        self.codes: dict[Any, int] = {}
        self.values: list[Any] = []

    def code(self, value: Any, key: Any = None) -> int:
        key = value if key is None else key  # 1, 1.0 and True share a code: Chrome ids are never mixed like that
        c = self.codes.get(key)
        if c is None:
            c = self.codes[key] = len(self.values)
            self.values.append(value)
        return c


PHASES = ("s", "t", "f")
OTHER_ID = -(2**62)  # flow ids that are not int64 (strings, ints past 2^63) get keys from here up to 0 (a hash)
NO_NUMBER = -(2**63)  # a span without an int64 under a key of `collect(number_args=...)`
_RECENT_IDS = 1 << 16  # hashed flow ids remembered (a flow's endpoints come close together), then forgotten
HOLD_ROWS = spill.HOLD_ROWS  # values of a column kept in memory before they go to its temporary file (tests make it tiny)


class _Columns:
    """Columns of one kind of event (`DiskColumn`s of equal length: at most HOLD_ROWS values each in memory)."""

    _names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(getattr(self, self._names[0]))

    def read(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Values lo..hi-1 of one column (a copy)."""
        return getattr(self, name).read(lo, hi)

    def gather(self, name: str, index: np.ndarray) -> np.ndarray:
        """The values of one column at `index` (a run of consecutive numbers is read as a range)."""
        index = np.asarray(index, dtype=np.int64)
        column: DiskColumn = getattr(self, name)
        if len(index) and int(index[-1]) - int(index[0]) == len(index) - 1 and bool(np.all(np.diff(index) == 1)):
            return column.read(int(index[0]), int(index[-1]) + 1)
        return column.take(index)

    def settle(self) -> None:
        """Write each column's held values to its file once there are HOLD_ROWS of them."""
        for name in self._names:
            getattr(self, name).settle()

    def close(self) -> None:
        for name in self._names:
            getattr(self, name).close()


def _column(typecode: str) -> Callable[[], DiskColumn]:
    return lambda: DiskColumn(typecode, HOLD_ROWS)


def other_key(fid: Any) -> int:
    """The key of a flow id that is not an int64 (a string, an int past 2^63, a float): OTHER_ID plus 62 bits of
    BLAKE2b over the id's text, the same in every process. Ids Python holds equal (1.0 and True) share a key; a
    string never shares one with a number. Two distinct ids share a key with probability about n^2 / 2^63 for n
    distinct ids (1e-5 at 10M, 1e-3 at 100M): their flows would then be joined."""
    if type(fid) is str:
        text = b"s" + fid.encode("utf-8", "surrogatepass")
    elif type(fid) is float and not fid.is_integer():
        text = b"f" + repr(fid).encode()
    else:  # int, bool, integral float
        text = b"i" + str(int(fid)).encode()
    return OTHER_ID + (int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 2)


@dataclasses.dataclass(eq=False)
class Flows(_Columns):
    """Flow endpoints as columns: phase (index into PHASES), key (the id: itself when an int64, else
    `other_key(id)`, no table of distinct ids kept), time, thread (value codes), category and name (value codes),
    and whether it binds to the enclosing slice (Chrome: 's' and 't' do, 'f' only with "bp": "e")."""

    _names = ("phase", "key", "ts", "pid", "tid", "cat", "name", "enclosing")
    phase: DiskColumn = dataclasses.field(default_factory=_column("b"))
    key: DiskColumn = dataclasses.field(default_factory=_column("q"))
    ts: DiskColumn = dataclasses.field(default_factory=_column("q"))
    pid: DiskColumn = dataclasses.field(default_factory=_column("i"))
    tid: DiskColumn = dataclasses.field(default_factory=_column("i"))
    cat: DiskColumn = dataclasses.field(default_factory=_column("i"))
    name: DiskColumn = dataclasses.field(default_factory=_column("i"))
    enclosing: DiskColumn = dataclasses.field(default_factory=_column("b"))
    recent_ids: dict[Any, int] = dataclasses.field(default_factory=dict)  # at most _RECENT_IDS

    def append(self, phase: str, fid: Any, ts: int, pid: int, tid: int, cat: int, name: int, enclosing: bool) -> None:
        if type(fid) is int and -(2**62) < fid < 2**63:
            key = fid
        else:
            key = self.recent_ids.get(fid)
            if key is None:
                if len(self.recent_ids) >= _RECENT_IDS:
                    self.recent_ids.clear()
                key = self.recent_ids[fid] = other_key(fid)
        self.phase.held.append(PHASES.index(phase))
        self.key.held.append(key)
        self.ts.held.append(ts)
        self.pid.held.append(pid)
        self.tid.held.append(tid)
        self.cat.held.append(cat)
        self.name.held.append(name)
        self.enclosing.held.append(enclosing)


@dataclasses.dataclass(eq=False)
class Instants(_Columns):
    """Instant events (``i``/``I``/``n``) as columns: time in ns, name, category, pid and tid as value codes."""

    _names = ("ts", "name", "cat", "pid", "tid")
    ts: DiskColumn = dataclasses.field(default_factory=_column("q"))
    name: DiskColumn = dataclasses.field(default_factory=_column("i"))
    cat: DiskColumn = dataclasses.field(default_factory=_column("i"))
    pid: DiskColumn = dataclasses.field(default_factory=_column("i"))
    tid: DiskColumn = dataclasses.field(default_factory=_column("i"))

    def append(self, ts: int, name: int, cat: int, pid: int, tid: int) -> None:
        self.ts.held.append(ts)
        self.name.held.append(name)
        self.cat.held.append(cat)
        self.pid.held.append(pid)
        self.tid.held.append(tid)


@dataclasses.dataclass(eq=False)
class ChromeEvents(_Columns):
    """The spans, instants, flows and metadata of one Chrome trace (times in integer ns as written).

    Each column is a `DiskColumn`: read it block by block (`read`, `blocks`) or by a windowed gather
    (`gather`)."""

    _names = ("start", "dur", "name", "cat", "pid", "tid", "args")
    path: Path
    metadata: dict[str, Any]
    values: Values = dataclasses.field(default_factory=Values)
    start: DiskColumn = dataclasses.field(default_factory=_column("q"))
    dur: DiskColumn = dataclasses.field(default_factory=_column("q"))
    name: DiskColumn = dataclasses.field(default_factory=_column("i"))
    cat: DiskColumn = dataclasses.field(default_factory=_column("i"))
    pid: DiskColumn = dataclasses.field(default_factory=_column("i"))
    tid: DiskColumn = dataclasses.field(default_factory=_column("i"))
    args: DiskColumn = dataclasses.field(default_factory=_column("i"))  # -1: none of the kept keys
    instants: Instants = dataclasses.field(default_factory=Instants)
    flows: Flows = dataclasses.field(default_factory=Flows)
    numbers: dict[str, DiskColumn] = dataclasses.field(default_factory=dict)  # per span an int arg (NO_NUMBER: none)
    process_names: dict[Any, str] = dataclasses.field(default_factory=dict)
    thread_names: dict[tuple[Any, Any], str] = dataclasses.field(default_factory=dict)
    process_sort: dict[Any, int] = dataclasses.field(default_factory=dict)
    events: int = 0
    unmatched_begins: int = 0
    unmatched_async_ends: int = 0  # async ends whose begin the file does not hold (a window cut short)
    cut_events: int = 0  # events cut mid-way at the end of a bare array that is not closed (dropped)

    def __len__(self) -> int:
        return len(self.start)

    def settle(self) -> None:
        super().settle()
        self.instants.settle()
        self.flows.settle()
        for column in self.numbers.values():
            column.settle()

    def close(self) -> None:
        """Drop every column (their temporary files go away)."""
        super().close()
        self.instants.close()
        self.flows.close()
        for column in self.numbers.values():
            column.close()

    def text(self, code: int) -> Any:
        return self.values.values[code]

    def lane_key(self, i: int) -> tuple[Any, Any]:
        return self.values.values[self.pid[i]], self.values.values[self.tid[i]]

    def t0(self) -> int:
        """The earliest time among spans and instants (the run's zero)."""
        first = [int(block.min()) for column in (self.start, self.instants.ts) for _, block in column.blocks() if len(block)]
        return min(first, default=2**62)


def lane_keys(src: _Columns, lo: int, hi: int) -> np.ndarray:
    """(pid code << 32 | tid code) of events lo..hi-1 of spans, instants or flows."""
    return (src.read("pid", lo, hi).astype(np.int64) << 32) | src.read("tid", lo, hi)


def blocks(n: int, rows: int | None = None) -> Iterator[tuple[int, int]]:
    """(lo, hi) of consecutive runs of at most `rows` (default HOLD_ROWS) of n events."""
    rows = max(1, HOLD_ROWS if rows is None else rows)
    for lo in range(0, n, rows):
        yield lo, min(lo + rows, n)


def convert(path: str | Path, translate: Callable[[Path, ChromeEvents], Translated], *, caps: SizeCaps = DEFAULT_CAPS,
            sliced: bool = False, **options: Any) -> Trace:  # fmt: skip
    """A Chrome-JSON reader's whole conversion: collect the file's events (`options` go to `collect`), translate
    them into the one event model (the collector closed either way), assemble the trace. sliced: the big tables as
    `Trace.slices`, made as they are written. An event a bare array's end cut mid-way is dropped and said so
    (a "could not provide" line)."""
    from ..assemble import (
        assemble,  # the assembler imports readers' helpers only lazily, and this module first
    )

    path = Path(path)
    ev = collect(path, caps=caps, unclosed=True, **options)
    try:
        translated = translate(path, ev)
    finally:
        ev.close()
    if ev.cut_events:
        translated.run_info.missing_signals.append(_cut_note(ev.cut_events))
    return assemble(translated, sliced=sliced)


def _cut_note(n: int) -> str:
    """What a run says of the events a file cut short at its end (its "could not provide" line)."""
    return (f"{n} event{'s' if n != 1 else ''} cut mid-way at the end of the file (the JSON array is not closed: "
            "the recording stopped mid-write): dropped")


def collect(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, keep_args: Iterable[str] = (),
            arg_filter: Callable[[str, str], bool] | None = None, lean: bool = False,
            number_args: Iterable[str] = (), unclosed: bool = False) -> ChromeEvents:  # fmt: skip
    """Read every event of a Chrome JSON file (object or bare array); one TraceFormatError lists the problems.

    keep_args: the ``args`` keys kept per span; arg_filter(cat, name) limits that to some spans.
    lean: the spans' categories and args are not kept (their columns stay empty): 28 bytes a span, not 36.
    number_args: keys of `keep_args` kept per span as a column (`ChromeEvents.numbers`, NO_NUMBER where a span
    has no int64 there) when their value is an int, so that values unique to each span (indices) are not
    interned; a value of another type is kept with the span's other args as before.

    unclosed: a bare array that is not closed (the format lets its ']' out: a recording process killed) is read
    to its last whole event, one cut mid-way dropped and counted (`ChromeEvents.cut_events`: the caller says
    so); else such a file is refused.

    'B' and 'E' events pair per thread in time order (equal times in file order), as the format pairs them: as
    they come while each thread's are in order; the file is read again, holding them all until its end, where
    some thread's are not.
    """
    path, keep, numbers = Path(path), tuple(keep_args), tuple(number_args)
    try:
        return _collect(path, caps, keep, arg_filter, lean, numbers, unclosed, by_time=False)
    except _Unordered:
        pass  # (outside the handler: the first reading's file and columns are let go before the second)
    return _collect(path, caps, keep, arg_filter, lean, numbers, unclosed, by_time=True)


class _Unordered(Exception):
    """Some thread's 'B'/'E' events are not in time order: pair them by time (read the file again)."""


def _collect(path: Path, caps: SizeCaps, keep: tuple[str, ...], arg_filter: Callable[[str, str], bool] | None,
             lean: bool, number_args: tuple[str, ...], unclosed: bool, *, by_time: bool) -> ChromeEvents:  # fmt: skip
    """`collect`; by_time: every 'B'/'E' event held to its end and paired there in time order (else as they come,
    raising _Unordered at the first that comes before its thread's last)."""
    cut = [0]
    metadata, batches = event_batches(path, caps, cut_short=cut.append if unclosed else None)
    out = ChromeEvents(path=path, metadata=metadata)
    out.numbers = {} if lean else {k: DiskColumn("q", HOLD_ROWS) for k in number_args if k in keep}
    values = out.values
    code = values.code
    problems: list[str] = []
    bad = 0
    open_b: dict[tuple[Any, Any], list[tuple[int, int, int, dict | None]]] = {}
    # 'B'/'E' events (time, event index, phase, name code, category code, args) by thread: the last one's time (in
    # order) or all of them (by_time)
    last_begin_end: dict[tuple[Any, Any], int] = {}
    held: dict[tuple[Any, Any], list[tuple[int, int, str, int, int, Any]]] = {}
    # async spans ("b"/"e" nestable, "S"/"F" legacy) open by (kind, pid, cat, id[, name]); they close out of order
    open_async: dict[tuple[Any, ...], list[tuple[int, int, int, dict | None]]] = {}
    async_ends_unmatched = 0
    index = 0
    number_appends: list[tuple[str, Callable[[int], None]]] = []

    def problem(text: str) -> None:
        nonlocal bad
        bad += 1
        if len(problems) < MAX_PROBLEMS:
            problems.append(text)

    def kept(cat: str, name: str, args: Any) -> int:
        if not keep or type(args) is not dict or (arg_filter is not None and not arg_filter(cat, name)):
            for _, append in number_appends:
                append(NO_NUMBER)
            return -1
        sub = {k: args[k] for k in keep if k in args}
        for k, append in number_appends:  # an int64 goes to its column, not into the interned args
            v = sub.get(k)
            if type(v) is int and NO_NUMBER < v < 2**63:
                append(v)
                del sub[k]
            else:
                append(NO_NUMBER)
        if not sub:
            return -1
        try:
            key = orjson.dumps(sub, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson refuses what it did not parse itself (e.g. ints beyond 64 bits as floats: never)
            return -1
        return code(sub, ("args", key))

    def begin_end(thread: tuple[Any, Any], mark: tuple[int, int, str, int, int, Any]) -> None:
        """A 'B' opens a span on its thread; an 'E' closes the thread's latest open one."""
        ts, at, ph, name_c, cat_c, args = mark
        stack = open_b.setdefault(thread, [])
        if ph == "B":
            stack.append((ts, name_c, cat_c, args))
        elif stack:
            close(stack.pop(), ts, *thread)
        else:
            problem(f"event {at} ({values.values[name_c]!r:.60}): an 'E' without a matching 'B' on its thread")

    def close(opened: tuple[int, int, int, dict | None], end: int, pid: Any, tid: Any) -> None:
        """A 'B'-'E' or async span from its begin (time, name code, category code, args) to `end`, on lane (pid, tid)."""
        b_ts, b_name, b_cat, b_args = opened
        out.start.held.append(b_ts)
        out.dur.held.append(end - b_ts)
        out.name.held.append(b_name)
        out.pid.held.append(code(pid))
        out.tid.held.append(code(tid))
        if not lean:
            out.cat.held.append(b_cat)
            out.args.held.append(kept(values.values[b_cat], values.values[b_name], b_args))

    for batch in batches:
        out.settle()  # held values past HOLD_ROWS to the columns' files; the arrays appended to below are new then
        start, dur, name_c, pid_c, tid_c = (out.start.held.append, out.dur.held.append, out.name.held.append,
                                            out.pid.held.append, out.tid.held.append)  # fmt: skip
        cat_append, args_append = (_skip, _skip) if lean else (out.cat.held.append, out.args.held.append)
        number_appends[:] = [(k, column.held.append) for k, column in out.numbers.items()]
        for ev in batch:
            index += 1
            if type(ev) is not dict:
                problem(f"event {index - 1} is a {type(ev).__name__}, expected an object")
                continue
            ph = ev.get("ph")
            if ph == "M":
                _metadata(out, ev)
                continue
            name = ev.get("name", "")
            cat = ev.get("cat", "")
            if type(name) is not str or type(cat) is not str:
                if ph in _SPAN_PHASES:
                    problem(f"event {index - 1}: 'name' and 'cat' must be strings")
                continue
            ts = micros_to_ns(ev.get("ts"))
            if ts is None or abs(ts) >= 2**61:
                if ph in _SPAN_PHASES:
                    problem(f"event {index - 1} ({name!r:.60}): 'ts' {ev.get('ts')!r:.40} is not a number of microseconds")
                continue
            pid, tid = ev.get("pid"), ev.get("tid")
            if not _hashable(pid) or not _hashable(tid):
                problem(f"event {index - 1} ({name!r:.60}): 'pid'/'tid' must be numbers or strings")
                continue
            if ph == "X":
                d = micros_to_ns(ev.get("dur", 0))
                if d is None or d < 0 or d >= 2**61:
                    problem(f"event {index - 1} ({name!r:.60}): 'dur' {ev.get('dur')!r:.40} is not a non-negative number")
                    continue
                start(ts)
                dur(d)
                name_c(code(name))
                cat_append(code(cat))
                pid_c(code(pid))
                tid_c(code(tid))
                args_append(-1 if lean else kept(cat, name, ev.get("args")))
                if "bind_id" in ev:
                    _bound_flow(out, ev, ts, code, pid, tid, cat, name)
            elif ph == "B" or ph == "E":
                if ph == "B" and "bind_id" in ev:
                    _bound_flow(out, ev, ts, code, pid, tid, cat, name)
                mark = (ts, index - 1, ph, code(name), code(cat), ev.get("args") if ph == "B" and not lean else None)
                if by_time:
                    held.setdefault((pid, tid), []).append(mark)
                    continue
                if ts < last_begin_end.get((pid, tid), ts):
                    out.close()
                    raise _Unordered()
                last_begin_end[(pid, tid)] = ts
                begin_end((pid, tid), mark)
            elif ph in _ASYNC_PHASES:
                key = _async_key(ev, ph, pid, cat, name)
                if key is None:
                    problem(f"event {index - 1} ({name!r:.60}): an async event needs an 'id' (or 'id2')")
                    continue
                if ph in ("b", "S"):
                    open_async.setdefault(key, []).append((ts, code(name), code(cat), ev.get("args")))
                    continue
                stack = open_async.get(key)
                if not stack or ts < stack[-1][0]:  # the begin fell outside the recorded window: nothing to draw
                    async_ends_unmatched += 1
                    continue
                opened = stack.pop()
                if not stack:
                    del open_async[key]
                text = values.values[opened[1]]
                close(opened, ts, pid, f"async {text}" if text else "async")  # Chrome's async tracks: one per name in a process
            elif ph in ("i", "I", "n"):
                out.instants.append(ts, code(name), code(cat), code(pid), code(tid))
            elif ph in ("s", "t", "f"):
                fid = ev.get("id", ev.get("bind_id"))
                if fid is None and type(ev.get("id2")) is dict:
                    fid = _id2(ev["id2"], pid)
                if not _hashable(fid) or fid is None:
                    problem(f"event {index - 1} ({name!r:.60}): a flow event needs an 'id'")
                    continue
                out.flows.append(ph, fid, ts, code(pid), code(tid), code(cat), code(name), ph != "f" or ev.get("bp") == "e")
    out.settle()
    if held:
        number_appends[:] = [(k, column.held.append) for k, column in out.numbers.items()]
        for thread, marks in held.items():
            marks.sort(key=_time)  # a stable sort: equal times keep file order
            for mark in marks:
                begin_end(thread, mark)
        out.settle()
    out.events = index
    out.cut_events = sum(cut)
    out.unmatched_begins = sum(len(s) for s in open_b.values()) + sum(len(s) for s in open_async.values())
    out.unmatched_async_ends = async_ends_unmatched
    if bad:
        more = f" (and {bad - len(problems)} more)" if bad > len(problems) else ""
        raise TraceFormatError(path, [f"{bad} of {index} events are malformed{more}", *problems])
    if not index:
        raise TraceFormatError(path, "the trace holds no events: nothing to convert")
    return out


_SPAN_PHASES = ("X", "B", "E", "i", "I", "s", "t", "f", "b", "e", "S", "F")
_ASYNC_PHASES = ("b", "e", "S", "F")
_time = operator.itemgetter(0)


def _async_key(ev: dict, ph: str, pid: Any, cat: str, name: str) -> tuple[Any, ...] | None:
    """What pairs an async begin with its end: nestable ("b"/"e") by process, category, scope and id (an end may
    omit its name); legacy ("S"/"F") by the name too. None when the event has no usable id."""
    fid = ev.get("id")
    if fid is None and type(ev.get("id2")) is dict:
        fid = _id2(ev["id2"], pid)
    scope = ev.get("scope")
    if fid is None or not _hashable(fid) or not _hashable(scope):
        return None
    if ph in ("b", "e"):
        return ("b", pid, cat, scope, fid)
    return ("S", pid, cat, scope, fid, name)


def _bound_flow(out: ChromeEvents, ev: dict, ts: int, code: Any, pid: Any, tid: Any, cat: str, name: str) -> None:
    """A flow point of a slice that names its flow itself (flow events v2, as Chrome writes them: ``"bind_id"`` with
    ``"flow_out": true`` where the flow starts, ``"flow_in": true`` where it ends, both where it passes through):
    a point at the slice's start, bound like a v1 point without ``"bp": "e"``: to the first slice of the thread
    starting there, the longest of those first, which is this slice unless one that encloses it starts at the same
    time (then that one). A ``bind_id`` without either flag, or one that is not a number or string, adds nothing."""
    into, out_of = ev.get("flow_in") is True, ev.get("flow_out") is True
    fid = ev["bind_id"]
    if not (into or out_of) or fid is None or not _hashable(fid) or type(fid) is bool:
        return
    ph = "t" if into and out_of else ("f" if into else "s")
    out.flows.append(ph, fid, ts, code(pid), code(tid), code(cat), code(name), False)


def _skip(_: int) -> None:
    pass


def _id2(id2: dict, pid: Any) -> Any:
    """The flow id of an ``"id2"``: ``{"global": id}`` is the id itself, ``{"local": id}`` an id of its process only."""
    if "global" in id2:
        return id2["global"]
    local = id2.get("local")
    return None if local is None or not _hashable(local) else f"id2.local {pid!r} {local!r}"


def _hashable(value: Any) -> bool:
    return value is None or type(value) in (int, str, float, bool)


def _metadata(out: ChromeEvents, ev: dict) -> None:
    args = ev.get("args")
    if type(args) is not dict:
        return
    pid, tid, kind = ev.get("pid"), ev.get("tid"), ev.get("name")
    if not (_hashable(pid) and _hashable(tid)):
        return
    if kind == "process_name" and isinstance(args.get("name"), str):
        out.process_names[pid] = args["name"]
    elif kind == "thread_name" and isinstance(args.get("name"), str):
        out.thread_names[(pid, tid)] = args["name"]
    elif kind == "process_sort_index" and type(args.get("sort_index")) is int:
        out.process_sort[pid] = args["sort_index"]


__all__ = ["HOLD_ROWS", "NO_NUMBER", "OTHER_ID", "PHASES", "ChromeEvents", "Flows", "Instants", "Values", "blocks", "collect", "lane_keys", "other_key"]

"""Chrome trace events collected compactly: spans (X, and B/E pairs), instants, flows and lane names.

The readers of runtime traces (torch_npu, Mobilint, Furiosa, generic Chrome JSON)
share this pass. Spans and instants are kept as columns of integers (times in ns, exact,
see ``_chrome_stream.micros_to_ns``, as int64; names, categories, pids and tids as int32
codes into one table of values), and of each event's ``args`` only the keys a reader asks
for: 36 bytes a span, 34 a flow endpoint, and no Python object kept per event (objects kept
from a batch's parse would pin its memory). ``bind_flows`` ties each flow
endpoint (``s``/``t``/``f``) to the span it belongs to, by Chrome's binding rules.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..errors import TraceFormatError
from ._chrome_stream import event_batches, micros_to_ns
from ._source import DEFAULT_CAPS, SizeCaps

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
_OTHER_ID = -(2**62)  # flow ids that are not int64 (strings, ints past 2^63) get keys from here upwards


class Flows:
    """Flow endpoints as columns: phase (index into PHASES), key (the id: itself when an int64, else a number
    from _OTHER_ID up, one per distinct id), time, thread (value codes), category and name (value codes), and
    whether it binds to the enclosing slice (Chrome: 's' and 't' do, 'f' only with "bp": "e")."""

    def __init__(self) -> None:
        self.phase, self.key, self.ts = array("b"), array("q"), array("q")
        self.pid, self.tid, self.cat, self.name = array("i"), array("i"), array("i"), array("i")
        self.enclosing = array("b")
        self.other_ids: dict[Any, int] = {}

    def __len__(self) -> int:
        return len(self.ts)

    def append(self, phase: str, fid: Any, ts: int, pid: int, tid: int, cat: int, name: int, enclosing: bool) -> None:
        if type(fid) is int and -(2**62) < fid < 2**63:
            key = fid
        else:
            key = self.other_ids.setdefault(fid, _OTHER_ID + len(self.other_ids))
        self.phase.append(PHASES.index(phase))
        self.key.append(key)
        self.ts.append(ts)
        self.pid.append(pid)
        self.tid.append(tid)
        self.cat.append(cat)
        self.name.append(name)
        self.enclosing.append(enclosing)

    def column(self, name: str) -> np.ndarray:
        return column(getattr(self, name))


_DTYPES = {"b": np.int8, "i": np.int32, "q": np.int64}


def column(values: array) -> np.ndarray:
    """A view of an array of the stdlib as numpy (its own dtype; empty: a new empty array)."""
    dtype = _DTYPES[values.typecode]
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def _codes() -> array:
    return array("i")


def _times() -> array:
    return array("q")


@dataclasses.dataclass
class ChromeEvents:
    """The spans, instants, flows and metadata of one Chrome trace (times in integer ns as written)."""

    path: Path
    metadata: dict[str, Any]
    values: Values = dataclasses.field(default_factory=Values)
    start: array = dataclasses.field(default_factory=_times)
    dur: array = dataclasses.field(default_factory=_times)
    name: array = dataclasses.field(default_factory=_codes)
    cat: array = dataclasses.field(default_factory=_codes)
    pid: array = dataclasses.field(default_factory=_codes)
    tid: array = dataclasses.field(default_factory=_codes)
    args: array = dataclasses.field(default_factory=_codes)  # -1: none of the kept keys
    instants: Instants = dataclasses.field(default_factory=lambda: Instants())
    flows: Flows = dataclasses.field(default_factory=Flows)
    process_names: dict[Any, str] = dataclasses.field(default_factory=dict)
    thread_names: dict[tuple[Any, Any], str] = dataclasses.field(default_factory=dict)
    process_sort: dict[Any, int] = dataclasses.field(default_factory=dict)
    events: int = 0
    unmatched_begins: int = 0
    _index: SpanIndex | None = dataclasses.field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.start)

    def col(self, name: str) -> np.ndarray:
        """One span column as numpy (times int64, codes int32), without a copy."""
        return column(getattr(self, name))

    def span_index(self, lanes: np.ndarray) -> SpanIndex:
        """The spans of the threads `lanes` (and of those indexed before) sorted for binding points; kept until
        `drop_index`, made anew when a call needs a thread it lacks."""
        if self._index is None or not np.isin(lanes, self._index.lanes).all():
            known = self._index.lanes if self._index is not None else lanes[:0]
            self._index = None  # free it before the next is made
            self._index = SpanIndex(self, np.union1d(known, lanes))
        return self._index

    def drop_index(self) -> None:
        self._index = None

    def text(self, code: int) -> Any:
        return self.values.values[code]

    def args_of(self, i: int) -> dict[str, Any]:
        code = self.args[i] if len(self.args) else -1
        return self.values.values[code] if code >= 0 else {}

    def lane_key(self, i: int) -> tuple[Any, Any]:
        return self.values.values[self.pid[i]], self.values.values[self.tid[i]]

    def t0(self) -> int:
        """The earliest time among spans and instants (the run's zero)."""
        first = [int(c.min()) for c in (self.col("start"), self.instants.col("ts")) if len(c)]
        return min(first, default=2**62)


@dataclasses.dataclass
class Instants:
    """Instant events (``i``/``I``/``n``) as columns: time in ns, name, category, pid and tid as value codes."""

    ts: array = dataclasses.field(default_factory=_times)
    name: array = dataclasses.field(default_factory=_codes)
    cat: array = dataclasses.field(default_factory=_codes)
    pid: array = dataclasses.field(default_factory=_codes)
    tid: array = dataclasses.field(default_factory=_codes)

    def __len__(self) -> int:
        return len(self.ts)

    def col(self, name: str) -> np.ndarray:
        return column(getattr(self, name))

    def append(self, ts: int, name: int, cat: int, pid: int, tid: int) -> None:
        self.ts.append(ts)
        self.name.append(name)
        self.cat.append(cat)
        self.pid.append(pid)
        self.tid.append(tid)


def collect(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, keep_args: Iterable[str] = (),
            arg_filter: Callable[[str, str], bool] | None = None, lean: bool = False) -> ChromeEvents:  # fmt: skip
    """Read every event of a Chrome JSON file (object or bare array); one TraceFormatError lists the problems.

    keep_args: the ``args`` keys kept per span; arg_filter(cat, name) limits that to some spans.
    lean: the spans' categories and args are not kept (their columns stay empty): 28 bytes a span, not 36.
    """
    path = Path(path)
    metadata, batches = event_batches(path, caps)
    out = ChromeEvents(path=path, metadata=metadata)
    keep = tuple(keep_args)
    values = out.values
    code = values.code
    problems: list[str] = []
    bad = 0
    open_b: dict[tuple[Any, Any], list[tuple[int, int, int, dict | None]]] = {}
    index = 0
    start, dur, name_c, pid_c, tid_c = out.start, out.dur, out.name, out.pid, out.tid
    cat_append, args_append = (_skip, _skip) if lean else (out.cat.append, out.args.append)

    def problem(text: str) -> None:
        nonlocal bad
        bad += 1
        if len(problems) < MAX_PROBLEMS:
            problems.append(text)

    def kept(cat: str, name: str, args: Any) -> int:
        if not keep or type(args) is not dict or (arg_filter is not None and not arg_filter(cat, name)):
            return -1
        sub = {k: args[k] for k in keep if k in args}
        if not sub:
            return -1
        try:
            key = orjson.dumps(sub, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson refuses what it did not parse itself (e.g. ints beyond 64 bits as floats: never)
            return -1
        return code(sub, ("args", key))

    for batch in batches:
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
                if ph in ("X", "B", "E", "i", "I", "s", "t", "f"):
                    problem(f"event {index - 1}: 'name' and 'cat' must be strings")
                continue
            ts = micros_to_ns(ev.get("ts"))
            if ts is None or abs(ts) >= 2**61:
                if ph in ("X", "B", "E", "i", "I", "s", "t", "f"):
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
                start.append(ts)
                dur.append(d)
                name_c.append(code(name))
                cat_append(code(cat))
                pid_c.append(code(pid))
                tid_c.append(code(tid))
                args_append(-1 if lean else kept(cat, name, ev.get("args")))
            elif ph == "B":
                open_b.setdefault((pid, tid), []).append((ts, code(name), code(cat), ev.get("args")))
            elif ph == "E":
                stack = open_b.get((pid, tid))
                if not stack:
                    problem(f"event {index - 1} ({name!r:.60}): an 'E' without a matching 'B' on its thread")
                    continue
                b_ts, b_name, b_cat, b_args = stack.pop()
                if ts < b_ts:
                    problem(f"event {index - 1} ({name!r:.60}): ends before its 'B' began")
                    continue
                start.append(b_ts)
                dur.append(ts - b_ts)
                name_c.append(b_name)
                cat_append(b_cat)
                pid_c.append(code(pid))
                tid_c.append(code(tid))
                args_append(-1 if lean else kept(values.values[b_cat], values.values[b_name], b_args))
            elif ph in ("i", "I", "n"):
                out.instants.append(ts, code(name), code(cat), code(pid), code(tid))
            elif ph in ("s", "t", "f"):
                fid = ev.get("id", ev.get("bind_id"))
                if not _hashable(fid) or fid is None:
                    problem(f"event {index - 1} ({name!r:.60}): a flow event needs an 'id'")
                    continue
                out.flows.append(ph, fid, ts, code(pid), code(tid), code(cat), code(name), ph != "f" or ev.get("bp") == "e")
    out.events = index
    out.unmatched_begins = sum(len(s) for s in open_b.values())
    if bad:
        more = f" (and {bad - len(problems)} more)" if bad > len(problems) else ""
        raise TraceFormatError(path, [f"{bad} of {index} events are malformed{more}", *problems])
    if not index:
        raise TraceFormatError(path, "the trace holds no events: nothing to convert")
    return out


def _skip(_: int) -> None:
    pass


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


class SpanIndex:
    """The spans of some threads (`lanes`: sorted pid code << 32 | tid code) sorted by (thread, start, longest
    first), to locate points in: 24 bytes a span of those threads, kept on the trace (`ChromeEvents.span_index`)
    for the next points; the sort's temporaries (~40 bytes a span) are freed when it is built."""

    def __init__(self, ev: ChromeEvents, lanes: np.ndarray) -> None:
        self.lanes = lanes
        start, dur = ev.col("start"), ev.col("dur")
        kept, ranks = [], []
        for lo in range(0, len(ev) if len(lanes) else 0, _POINTS):  # the spans on those threads, a million at a time
            key = (ev.col("pid")[lo : lo + _POINTS].astype(np.int64) << 32) | ev.col("tid")[lo : lo + _POINTS]
            at = np.minimum(np.searchsorted(lanes, key), len(lanes) - 1)
            hit = lanes[at] == key
            kept.append(np.flatnonzero(hit) + lo)
            ranks.append(at[hit].astype(np.int32))
        spans = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
        rank = np.concatenate(ranks) if ranks else np.zeros(0, dtype=np.int32)
        del kept, ranks
        first = start[spans]
        self.base = int(first.min()) - 1 if len(first) else 0
        self.width = (int(first.max()) - self.base + 1) * 2 if len(first) else 1  # room for points past the last start
        self.usable = len(spans) > 0 and self.width * (len(lanes) + 1) < 2**62
        if not self.usable:  # no spans there, or times too far apart to combine with lanes: no bindings rather than wrong ones
            self.order = self.combined = self.ends = np.zeros(0, dtype=np.int64)
            return
        combined = rank.astype(np.int64)
        del rank
        combined *= self.width
        combined += first
        combined -= self.base
        del first
        order = np.lexsort((-dur[spans], combined))
        self.combined = combined[order]
        del combined
        self.order = spans[order]  # span numbers in sorted order
        del spans, order
        self.ends = start[self.order] + dur[self.order]


def bind_points(ev: ChromeEvents, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, enclosing: np.ndarray, *,
                strict: bool = False) -> np.ndarray:  # fmt: skip
    """Per point (thread as value codes, time in ns): the span it binds to, or -1.

    Enclosing points bind to the innermost span open at their time on their thread, others (and, unless
    `strict`, enclosing points that no span covers) to the first span starting at or after it. Vectorized:
    spans sorted once by (thread, start, longest first) (`SpanIndex`), points located by searchsorted on a
    combined key, a million at a time. Only the spans of the points' threads are sorted.
    """
    found = np.full(len(ts), -1, dtype=np.int64)
    if not len(ev) or not len(ts):
        return found
    index = ev.span_index(np.unique((pid.astype(np.int64) << 32) | tid.astype(np.int64)))
    for lo in range(0, len(ts), _POINTS):
        hi = lo + _POINTS
        found[lo:hi] = _bind(index, pid[lo:hi], tid[lo:hi], ts[lo:hi], enclosing[lo:hi], strict)
    return found


_POINTS = 1 << 20


def _bind(index: SpanIndex, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, enclosing: np.ndarray, strict: bool) -> np.ndarray:
    found = np.full(len(ts), -1, dtype=np.int64)
    lanes, width, combined, order, ends_sorted = index.lanes, index.width, index.combined, index.order, index.ends
    if not index.usable or not len(combined):
        return found
    rel = np.clip(ts - index.base, 0, width - 1)  # a point before or after every span sorts as at the ends
    point_lane = (pid.astype(np.int64) << 32) | tid.astype(np.int64)
    at_lane = np.minimum(np.searchsorted(lanes, point_lane), len(lanes) - 1)
    present = lanes[at_lane] == point_lane
    lo = at_lane.astype(np.int64) * width
    q = lo + rel
    after = np.searchsorted(combined, q, "right")  # first span starting after the point
    at = np.searchsorted(combined, q, "left")  # first span starting at or after it
    # enclosing: the latest start at or before the point on its lane that still covers it (the first candidate
    # almost always; a short walk back for points after a nested span that closed already)
    k = after - 1
    candidate = present & (enclosing != 0) & (k >= 0)
    k_safe = np.maximum(k, 0)
    on_lane = combined[k_safe] >= lo
    hit = candidate & on_lane & (ends_sorted[k_safe] >= ts)
    found[hit] = order[k_safe[hit]]
    for j in np.flatnonzero(candidate & on_lane & ~hit).tolist():
        for kk in range(int(k[j]) - 1, max(int(k[j]) - 64, -1), -1):
            if combined[kk] < lo[j]:
                break
            if ends_sorted[kk] >= ts[j]:
                found[j] = order[kk]
                break
    rest = present & (found < 0) & ~((enclosing != 0) & strict)
    nxt = np.minimum(at, len(combined) - 1)
    ok = rest & (at < len(combined)) & (combined[nxt] < lo + width)
    found[ok] = order[nxt[ok]]
    return found


def bind_flows(ev: ChromeEvents, which: np.ndarray | None = None) -> np.ndarray:
    """Per flow endpoint (all, or the indices `which`): the span it binds to, or -1."""
    f = ev.flows
    idx = np.arange(len(f), dtype=np.int64) if which is None else which
    return bind_points(ev, f.column("pid")[idx], f.column("tid")[idx], f.column("ts")[idx], f.column("enclosing")[idx])


__all__ = ["PHASES", "ChromeEvents", "Flows", "Instants", "Values", "bind_flows", "bind_points", "collect", "column"]

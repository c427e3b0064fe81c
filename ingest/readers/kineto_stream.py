"""Kineto events read in bounded memory: the file streamed in chunks, each event-sized slice of the
``traceEvents`` array decoded by msgspec into typed events, kept as compact columns.

The typed decoder reads only the fields the converter uses (``ph cat name pid tid ts dur`` and
``args`` as raw bytes) and skips the rest in C: measured on an 87 MB CPU trace, 0.5-0.7 s against
3.4 s for orjson's dicts. An operator's tensor arguments are decoded once per distinct signature (a
generation loop repeats a few thousand); the cache key is its raw ``args`` without the two fields
Kineto numbers per call (``External id`` first, ``Ev Idx`` last), so equal keys mean equal tensors.

Where the typed decoder cannot vouch for a slice (a field of another JSON type, an event the checks
refuse) the slice is read again as orjson dicts by the general path, which words the errors; the
two paths keep the same figures. Peak memory: one chunk, one slice's events, the columns.
"""

from __future__ import annotations

import operator
from collections import Counter
from itertools import compress
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import orjson

from .. import progress
from ..errors import TraceFormatError
from ..events import Comm
from ..kineto_vocabulary import (
    KINETO_CATEGORY_ALIASES,
    KINETO_DEVICE_CATEGORIES,
    KINETO_MTIA_DEVICE_CATEGORY,
    KINETO_RUNTIME_CATEGORIES,
    copy_kind,
)
from ._kineto_events import KinetoEvents, comm_args, tensor_args
from ._npu_flows import NpuCollect, RowLaunches, launch_of
from .chrome_stream import event_batches, json_loads, may_hold_non_finite
from .kineto_signatures import signature_keys
from .npu_kineto import NpuLayout, may_hold_device_rows, names_npu_row, npu_layout_of
from .source import DEFAULT_CAPS, SizeCaps

_ALIAS = KINETO_CATEGORY_ALIASES.get
_FLOW_PHASES = ("s", "f")  # a tuple: membership by ==, so an unhashable "ph" from a stranger's file never raises

MAX_PROBLEMS = 10
MEMORY_EVENT = "[memory]"  # Kineto's allocator instants (profile_memory=True)
_INSTANT = ("i", "I")  # "I": the Chrome format's older instant phase
_BEGIN_END = ("B", "E")  # a span written as two events (re-exported traces): read as the X event they stand for
MEMORY_ARGS = ("Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id")
# Distinct raw args kept to skip decoding repeats. Older Kineto writes a per-call "Profiler Event Index" among
# the tensor fields, so its keys never repeat: unbounded, the cache held ~200 bytes an operator.
_SIGNATURE_KEYS = 1 << 16
_NO_ARGS = msgspec.Raw(b"")
_LAUNCH_ID = b'"launch_id"'  # torch-rbln's launch ids: NPU lanes


class _Event(msgspec.Struct, gc=False):
    """The fields of one Chrome event the converter reads (any other field is skipped while decoding)."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = 0.0
    args: msgspec.Raw = _NO_ARGS
    id: msgspec.Raw = _NO_ARGS  # a flow's id (NPU lanes: ``npu_kineto``)
    bp: msgspec.Raw = _NO_ARGS  # a flow end's binding point (``"e"``: the enclosing slice)


class _OtherArgs(msgspec.Struct, gc=False, rename={"external_id": "External id"}):
    """The args fields read of a runtime call or device row (others skipped in C); an explicit null reads as absent."""

    correlation: Any = None
    external_id: Any = None
    bytes: Any = None
    size: Any = None
    kind: Any = None
    device: Any = None
    stream: Any = None
    launch_id: Any = None
    direction: Any = None  # MTIA's DMA requests


_DECODER = msgspec.json.Decoder(list[_Event])
_OTHER_ARGS = msgspec.json.Decoder(list[_OtherArgs])
_TS, _DUR, _NAME, _CAT, _ARGS = (operator.attrgetter(f) for f in ("ts", "dur", "name", "cat", "args"))
_CORRELATION, _EXTERNAL, _BYTES, _KIND, _LAUNCH = (operator.attrgetter(f) for f in ("correlation", "external_id", "bytes",
                                                                                    "kind", "launch_id"))
_THREAD = operator.attrgetter("pid", "tid")


class _Typed(NamedTuple):
    events: list[_Event]
    text: bytes


class _Redo(Exception):
    """A typed slice holds something only the general path words or reads: read it again as dicts."""


def _args(raw: bytes) -> dict:
    """The args object of an event from its raw bytes ({} when absent or not an object)."""
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _Redo() from None  # the general path reports it with the file's name
    return value if type(value) is dict else {}


class Collector:
    """Keeps what the converter uses of each event, batch by batch; :meth:`finish` checks the whole."""

    def __init__(self, path: Path, metadata: dict[str, Any]) -> None:
        self.path = path
        self.out = KinetoEvents(metadata=metadata)
        self.problems: list[str] = []
        self.bad = 0
        self.index = 0
        self.npu_hint = False  # some slice holds a word of an NPU device row: flows are kept from then on
        self.lanes = NpuCollect()  # metadata, launch ids and flows for NPU lanes (npu_kineto)
        self._signatures: dict[bytes, int] = {}
        self._open: dict[tuple[Any, Any], list[dict[str, Any]]] = {}  # per thread, its "B" events not ended yet
        self._ended: list[dict[str, Any]] = []  # B/E pairs as the "X" events they stand for, to add
        self._early: dict[tuple[Any, Any], list[dict[str, Any]]] = {}  # per thread, "E" events before any open "B"

    def _begin_end(self, ev: dict[str, Any]) -> None:
        """A "B" or "E" event (Chrome's other way to write a span): an "E" ends its thread's latest open "B", and the
        pair is read as one "X" event (the args of both; the E's win)."""
        key = (ev.get("pid"), ev.get("tid"))
        if not (_hashable(key[0]) and _hashable(key[1])):
            self.out.unpaired += 1
            return
        if ev.get("ph") == "B":
            self._open.setdefault(key, []).append(ev)
            return
        stack = self._open.get(key)
        if not stack:  # written before its "B" (a tool that merged buffers): paired by time at the end
            self._early.setdefault(key, []).append(ev)
            return
        self._pair(stack.pop(), ev)

    def _pair(self, begin: dict[str, Any], ev: dict[str, Any]) -> None:
        """A "B" and the "E" that ends it, as one "X" event (unpaired both where the times do not make a span)."""
        ts, start = ev.get("ts"), begin.get("ts")
        if type(ts) not in (float, int) or type(start) not in (float, int) or ts < start:
            self.out.unpaired += 2
            return
        args = begin.get("args")
        args = args if type(args) is dict else {}
        if type(ev.get("args")) is dict and ev["args"]:
            args = {**args, **ev["args"]}
        self._ended.append({**begin, "ph": "X", "dur": ts - start, "args": args})

    def _pair_by_time(self) -> None:
        """Pair the "E" events written before their "B" with the "B"s still open on their thread, in time order
        (equal times in file order), as the format pairs them; what stays unpaired is counted."""
        for key, ends in self._early.items():
            marks = sorted([(b.get("ts"), i, b) for i, b in enumerate(self._open.pop(key, []))]
                           + [(e.get("ts"), len(ends) + i, e) for i, e in enumerate(ends)],
                           key=lambda m: (m[0] if type(m[0]) in (float, int) else float("inf"), m[1]))  # fmt: skip
            opened: list[dict[str, Any]] = []
            for _, _, ev in marks:
                if ev.get("ph") == "B":
                    opened.append(ev)
                elif opened:
                    self._pair(opened.pop(), ev)
                else:
                    self.out.unpaired += 1
            self.out.unpaired += len(opened)
        self._early = {}
        self._add_ended()

    def _add_ended(self) -> None:
        """Read the B/E pairs ended so far as X events (they were counted as events when read)."""
        if self._ended:
            ended, self._ended = self._ended, []
            index = self.index
            self.add(ended)
            self.index = index

    # -- the general path: one dict per event -------------------------------------------------------
    def add(self, batch: list[Any]) -> None:
        """Add a batch of events parsed as dicts (validating every one)."""
        out, problems = self.out, self.problems
        ops, categories = out.ops, out.categories
        t_min, t_max, index = out.t_min, out.t_max, self.index
        for ev in batch:
            index += 1
            if type(ev) is not dict:
                self.bad += 1
                if len(problems) < MAX_PROBLEMS:
                    problems.append(f"event {index - 1} is a {type(ev).__name__}, expected an object")
                continue
            ph = ev.get("ph")
            if ph != "X":
                if ph == "M":
                    if not self.npu_hint and names_npu_row(ev.get("name"), ev.get("args")):
                        self.hint()
                    self.lanes.metadata(ev.get("name"), ev.get("pid"), ev.get("tid"), ev.get("args"))
                elif ph in _FLOW_PHASES and ev.get("cat") == "ac2g":
                    self.lanes.flow(ph, ev.get("pid"), ev.get("tid"), ev.get("ts"), ev.get("id"), ev.get("bp"))
                elif ph in _INSTANT and ev.get("name") == MEMORY_EVENT:
                    self._memory(ev.get("ts"), ev.get("pid"), ev.get("tid"), ev.get("args"))
                elif ph in _BEGIN_END:
                    self._begin_end(ev)
                continue
            cat = ev.get("cat")
            ts = ev.get("ts")
            dur = ev.get("dur", 0)
            name = ev.get("name")
            if not (type(ts) in (float, int) and type(dur) in (float, int) and type(name) is str and dur >= 0):
                self.bad += 1
                if len(problems) < MAX_PROBLEMS:
                    problems.append(f"event {index - 1} ({name!r:.60}): {_why_bad(ts, dur, name)}")
                continue
            if not _hashable(cat):
                self.bad += 1
                if len(problems) < MAX_PROBLEMS:
                    problems.append(f"event {index - 1} ({name!r:.60}): 'cat' is {type(cat).__name__}, expected a string")
                continue
            categories[cat] = categories.get(cat, 0) + 1  # as the file names it
            if cat == "Trace" or cat is None:
                continue
            cat = _ALIAS(cat, cat)
            args = ev.get("args")
            if type(args) is not dict:
                args = {}
            t_min = min(t_min, ts)
            t_max = max(t_max, ts + dur)
            pid, tid = ev.get("pid"), ev.get("tid")
            if not (_hashable(pid) and _hashable(tid)):
                self.bad += 1
                if len(problems) < MAX_PROBLEMS:
                    problems.append(f"event {index - 1} ({name!r:.60}): 'pid' or 'tid' is not a number or a string")
                continue
            if cat == "cpu_op":
                ops.append(ts, dur, name, pid, tid, tensor_args(args), comm_args(args))
            else:
                self._other(cat, ts, dur, name, pid, tid, args)
        out.t_min, out.t_max, self.index = t_min, t_max, index
        self._add_ended()

    def _memory(self, ts: Any, pid: Any, tid: Any, args: Any) -> None:
        """A ``[memory]`` instant: (ts, pid, tid, bytes, total allocated, total reserved, device type, device id)."""
        if type(ts) not in (float, int) or type(args) is not dict or not (_hashable(pid) and _hashable(tid)):
            return
        self.out.memory.append((ts, pid, tid, *(_signed(args.get(k)) for k in MEMORY_ARGS)))

    def _other(self, cat: str, ts: float, dur: float, name: str, pid: Any, tid: Any, args: dict) -> None:
        out = self.out
        if cat == "user_annotation":
            out.annotations.append((ts, dur, name, pid, tid))
        elif cat == "python_function":
            out.python.append((ts, dur, name, pid, tid))
        elif cat in KINETO_RUNTIME_CATEGORIES:
            size = args.get("bytes")
            size = args.get("size") if size is None else size  # (an explicit null reads as absent)
            out.runtime.append((ts, dur, name, pid, tid, args.get("correlation"), args.get("External id"), _int(size),
                                copy_kind(args.get("kind"))))
            if "launch_id" in args or cat == "privateuse1_driver":  # NPU lanes (npu_kineto)
                launch = launch_of(args)
                if launch is not None:
                    self.lanes.runtime_launch.set(len(out.runtime) - 1, launch)
                if cat == "privateuse1_driver":
                    self.lanes.runtime_driver.set(len(out.runtime) - 1, 1)
        elif cat in KINETO_DEVICE_CATEGORIES:
            dev, stream = _lane_of(args.get("device"), pid), _lane_of(args.get("stream"), tid)
            out.device.append((ts, dur, cat, name, dev, stream, args.get("correlation"), _int(args.get("bytes"))))
            if "launch_id" in args and (launch := launch_of(args)) is not None:
                self.lanes.device_launch.set(len(out.device) - 1, launch)
        elif cat == KINETO_MTIA_DEVICE_CATEGORY:  # lanes are the device row's threads; a DMA request is a copy
            direction = args.get("direction")
            if name == "dma_request" and type(direction) is str:
                out.device.append((ts, dur, "gpu_memcpy", f"dma_request {direction}", _whole(pid), _whole(tid), None,
                                   _int(args.get("size"))))
            else:
                out.device.append((ts, dur, "kernel", name, _whole(pid), _whole(tid), None, None))

    # -- the typed path ------------------------------------------------------------------------------
    def add_typed(self, batch: _Typed) -> None:
        """Add a typed slice; a slice with anything the checks refuse goes through the general path."""
        try:
            self._typed(batch.events)
        except _Redo:
            try:
                events = orjson.loads(batch.text)
            except orjson.JSONDecodeError as exc:  # msgspec accepts lone surrogates in strings; orjson does not
                raise TraceFormatError(self.path, f"events near event {self.index} are not valid JSON: {exc}") from None
            self.add(events)

    def _typed(self, events: list[_Event]) -> None:
        # column by column (C-level map over attrgetters), not a loop of statements per event
        out = self.out
        ops = out.ops
        rest = self._not_spans(events)
        xs = [ev for ev in events if ev.ph == "X"]
        ts, dur, names, cats = (list(map(get, xs)) for get in (_TS, _DUR, _NAME, _CAT))
        if None in ts or None in dur or None in names or (dur and min(dur) < 0):
            raise _Redo()
        categories = Counter(cats)  # as the file names them
        if "Trace" in categories or None in categories:
            keep = [c != "Trace" and c is not None for c in cats]
            xs, ts, dur, names, cats = (list(compress(column, keep)) for column in (xs, ts, dur, names, cats))
        if not KINETO_CATEGORY_ALIASES.keys().isdisjoint(categories):  # an older Kineto's names: read as today's
            cats = [_ALIAS(c, c) for c in cats]
        ts_live, dur_live = ts, dur
        others: list[tuple[_Event, str, _OtherArgs]] = []  # runtime, device work, annotations, Python frames: last
        if cats.count("cpu_op") != len(xs):
            is_op = [c == "cpu_op" for c in cats]
            not_op = [not op for op in is_op]
            other_evs = list(compress(xs, not_op))
            others = list(zip(other_evs, compress(cats, not_op), _other_args(other_evs), strict=True))
            xs, ts, dur, names = (list(compress(column, is_op)) for column in (xs, ts, dur, names))
        raws = list(map(bytes, map(_ARGS, xs)))
        keys = signature_keys(raws)
        sig_c = list(map(self._signatures.get, keys))
        comms: list[tuple[int, Comm]] = []  # (index, communication arguments) of record_param_comms calls
        if None in sig_c:
            if len(self._signatures) > _SIGNATURE_KEYS:  # keys that carry a per-call number never repeat: start afresh
                self._signatures.clear()
            for i in [i for i, c in enumerate(sig_c) if c is None]:
                code = self._signatures.get(keys[i])
                if code is None:
                    args = _args(raws[i])
                    code = ops.signature_code(tensor_args(args))
                    comm = comm_args(args)
                    if comm is None:
                        self._signatures[keys[i]] = code
                    else:  # never cached: each call is decoded for its own arguments (``Seq`` numbers the calls)
                        comms.append((i, comm))
                sig_c[i] = code
        name_c = list(map(ops._name_codes.get, names))
        if None in name_c:  # new names: coded once each, in order of first appearance
            for name in dict.fromkeys(compress(names, [c is None for c in name_c])):
                ops.name_code(name)
            name_c = list(map(ops._name_codes.get, names))
        threads = list(map(_THREAD, xs))
        thread_c = list(map(ops._thread_codes.get, threads))
        if None in thread_c:
            for thread in dict.fromkeys(compress(threads, [c is None for c in thread_c])):
                ops.thread_code(*thread)
            thread_c = list(map(ops._thread_codes.get, threads))
        # nothing below raises _Redo: a slice read again by the general path has added nothing
        for ph, ev, value in rest:
            if ph == "M":
                self.lanes.metadata(ev.name, ev.pid, ev.tid, value)
            elif ph == "i":
                self._memory(ev.ts, ev.pid, ev.tid, value)
            elif ph in _BEGIN_END:
                self._begin_end({"ph": ph, "cat": ev.cat, "name": ev.name, "pid": ev.pid, "tid": ev.tid, "ts": ev.ts,
                                 "args": value})
            else:
                self.lanes.flow(ph, ev.pid, ev.tid, ev.ts, *value)
        if ts_live:
            out.t_min = min(out.t_min, min(ts_live))
            out.t_max = max(out.t_max, max(map(operator.add, ts_live, dur_live)))
        if others:
            self._others(others)
        first = len(ops)
        ops.extend(ts, dur, name_c, thread_c, sig_c)
        for i, comm in comms:
            ops.add_comm(first + i, comm)
        for cat, n in categories.items():
            out.categories[cat] = out.categories.get(cat, 0) + n
        self.index += len(events)
        self._add_ended()

    def _others(self, others: list[tuple[_Event, str, _OtherArgs]]) -> None:
        """A typed slice's events other than operators: runtime calls and device work added a column at a time
        (what :meth:`_other` adds row by row, NPU launch ids and driver calls kept by row number as it keeps them),
        the rest row by row; all row by row where there are MTIA device rows (device rows of their own making)."""
        runtime = [(ev, cat, args) for ev, cat, args in others if cat in KINETO_RUNTIME_CATEGORIES]
        device = [(ev, cat, args) for ev, cat, args in others if cat in KINETO_DEVICE_CATEGORIES]
        if any(cat == KINETO_MTIA_DEVICE_CATEGORY for _, cat, _ in others):
            for ev, cat, args in others:
                self._other(cat, ev.ts, ev.dur, ev.name, ev.pid, ev.tid, _as_dict(args))
            return
        if len(runtime) + len(device) < len(others):  # annotations, Python frames: their own lists, in order
            for ev, cat, args in others:
                if cat not in KINETO_RUNTIME_CATEGORIES and cat not in KINETO_DEVICE_CATEGORIES:
                    self._other(cat, ev.ts, ev.dur, ev.name, ev.pid, ev.tid, _as_dict(args))
        out = self.out
        if runtime:
            evs, cats, argss = ([row[k] for row in runtime] for k in range(3))
            first = len(out.runtime)
            sizes = [a.size if a.bytes is None else a.bytes for a in argss]
            out.runtime.extend([list(map(_TS, evs)), list(map(_DUR, evs)), list(map(_NAME, evs)),
                                [ev.pid for ev in evs], [ev.tid for ev in evs],
                                list(map(_CORRELATION, argss)), list(map(_EXTERNAL, argss)),
                                [None if v is None else _int(v) for v in sizes],
                                list(map(copy_kind, map(_KIND, argss)))])
            self._launches(self.lanes.runtime_launch, first, argss)
            drivers = [first + i for i, cat in enumerate(cats) if cat == "privateuse1_driver"]
            self.lanes.runtime_driver.set_many(drivers, [1] * len(drivers))
        if device:
            evs, cats, argss = ([row[k] for row in device] for k in range(3))
            first = len(out.device)
            pids, tids = [ev.pid for ev in evs], [ev.tid for ev in evs]
            devs = [a.device if type(a.device) is int else _lane_of(a.device, p) for a, p in zip(argss, pids, strict=True)]
            streams = [a.stream if type(a.stream) is int else _lane_of(a.stream, t) for a, t in zip(argss, tids, strict=True)]
            out.device.extend([list(map(_TS, evs)), list(map(_DUR, evs)), cats, list(map(_NAME, evs)), devs, streams,
                               list(map(_CORRELATION, argss)),
                               [None if v is None else _int(v) for v in map(_BYTES, argss)]])
            self._launches(self.lanes.device_launch, first, argss)

    @staticmethod
    def _launches(column: RowLaunches, first: int, argss: list[_OtherArgs]) -> None:
        """The NPU launch ids of rows first.. (their args, in order), where they have one (as `launch_of` reads)."""
        launches = list(map(_LAUNCH, argss))
        if launches.count(None) < len(launches):
            launches = [v if type(v) is int and 0 <= v < 2**63 else None for v in launches]
            column.set_many([first + i for i, launch in enumerate(launches) if launch is not None],
                            [launch for launch in launches if launch is not None])

    def _not_spans(self, events: list[_Event]) -> list[tuple[str, _Event, Any]]:
        """(phase, event, args or (flow id, binding point)) of the metadata events and the ``ac2g`` flows (their ids
        read only while flows are kept); raises _Redo where only the general path can tell (a flow without a time,
        bad JSON)."""
        rest = []
        others = [ev for ev in events if ev.ph != "X"]
        said = {id(ev): _args(bytes(ev.args)) for ev in others if ev.ph == "M"}  # few: a process's or thread's name
        if not self.npu_hint and any(names_npu_row(ev.name, said[id(ev)]) for ev in others if ev.ph == "M"):
            self.hint()  # before this slice's flows: they are kept
        for ev in others:
            if ev.ph == "M":
                rest.append(("M", ev, said[id(ev)]))
            elif ev.ph in _INSTANT and ev.name == MEMORY_EVENT:
                rest.append(("i", ev, _args(bytes(ev.args))))
            elif ev.ph in _BEGIN_END:
                rest.append((ev.ph, ev, _args(bytes(ev.args))))
            elif ev.ph in _FLOW_PHASES and ev.cat == "ac2g":
                if not self.lanes.collecting:
                    self.lanes.skipped += 1  # (a flag: a slice read again may count its flows twice)
                    continue
                if ev.ts is None:
                    raise _Redo()
                raw, bp = bytes(ev.id), bytes(ev.bp)
                try:
                    rest.append((ev.ph, ev, (int(raw) if raw.isdigit() else orjson.loads(raw) if raw else None,
                                             None if not bp else "e" if bp == b'"e"' else orjson.loads(bp))))
                except orjson.JSONDecodeError:
                    raise _Redo() from None
        return rest

    def hint(self) -> None:
        """Some slice holds a word of an NPU device row: keep flows from now on."""
        self.npu_hint = self.lanes.collecting = True

    def decode(self, text: bytes) -> _Typed | list[Any] | None:
        """A slice of the events array: typed events, orjson dicts where types differ, None if not JSON. A launch id
        says NPU lanes here (the typed path finds the rest of their words in the metadata events it decodes)."""
        if not self.npu_hint and _LAUNCH_ID in text:
            self.hint()
        try:
            return _Typed(_DECODER.decode(text), text)
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError:
            if not may_hold_non_finite(text):
                return None
        try:
            return json_loads(text)
        except orjson.JSONDecodeError:
            return None

    def finish(self) -> KinetoEvents:
        """The events, or one TraceFormatError listing every problem."""
        if self._early:
            self._pair_by_time()
        out, index, bad, problems = self.out, self.index, self.bad, self.problems
        out.events = index
        out.unpaired += sum(map(len, self._open.values()))  # begun, never ended
        if bad:
            more = f" (and {bad - len(problems)} more)" if bad > len(problems) else ""
            raise TraceFormatError(self.path, [f"{bad} of {index} events are malformed{more}", *problems])
        if not index:
            raise TraceFormatError(self.path, "'traceEvents' is empty: nothing to convert")
        if not (out.ops or out.device or out.annotations or out.runtime or out.memory):
            raise TraceFormatError(self.path, f"no cpu_op, user_annotation, runtime, memory or GPU events among {index} "
                                              "events: not a PyTorch profiler trace")  # fmt: skip
        return out


def collect_file(path: Path, caps: SizeCaps = DEFAULT_CAPS) -> tuple[KinetoEvents, NpuLayout | None]:
    """(the events, the NPU layout or None) of a Kineto file, read in one streaming pass (and a second
    one, of dicts, only when some slice holds a word of an NPU device row)."""
    collector = Collector(path, {})
    metadata, batches = event_batches(path, caps, collector.decode)
    collector.out.metadata = metadata  # gains the keys after the events when the batches are exhausted
    report = progress.current().events_read
    for batch in batches:
        if type(batch) is _Typed:
            collector.add_typed(batch)
            report(len(batch.events))
        else:  # dicts: types the typed decoder refused, an object's last events, or a document read whole
            if not collector.npu_hint and may_hold_device_rows(orjson.dumps(batch)):
                collector.hint()
            collector.add(batch)
            report(len(batch))
    events = collector.finish()
    lanes = npu_layout_of(collector.lanes) if collector.npu_hint else None
    if lanes is not None and collector.lanes.skipped:  # flows met before the first word of an NPU row: read them again
        collector.lanes.restart_flows()
        for batch in event_batches(path, caps)[1]:
            for ev in batch:
                if type(ev) is dict and ev.get("ph") in _FLOW_PHASES and ev.get("cat") == "ac2g":
                    collector.lanes.flow(ev["ph"], ev.get("pid"), ev.get("tid"), ev.get("ts"), ev.get("id"), ev.get("bp"))
    elif lanes is None:
        collector.lanes.close()
    return events, lanes


def _other_args(events: list[_Event]) -> list[_OtherArgs]:
    """The args of runtime calls and device rows, decoded in one call (absent args: no field); raises _Redo where
    some args is not an object (the general path reads it as none)."""
    if not events:
        return []
    try:
        return _OTHER_ARGS.decode(b"[" + b",".join([bytes(ev.args) or b"{}" for ev in events]) + b"]")
    except msgspec.ValidationError:
        raise _Redo() from None


_OTHER_FIELDS = tuple(f.encode_name for f in msgspec.structs.fields(_OtherArgs))


def _as_dict(args: _OtherArgs) -> dict[str, Any]:
    """The fields given, named as the file names them (what :meth:`Collector._other` reads of a dict)."""
    return {name: v for name, v in zip(_OTHER_FIELDS, msgspec.structs.astuple(args), strict=True) if v is not None}


def _int(value: Any) -> int | None:
    """A non-negative int64 from an int, a digit string or a float; None for anything else."""
    if type(value) is str and value.isdigit():
        value = int(value)
    elif type(value) is float and 0 <= value < 2**63:
        value = int(value)
    return value if type(value) is int and 0 <= value < 2**63 else None


def _why_bad(ts: Any, dur: Any, name: Any) -> str:
    if type(name) is not str:
        return f"'name' is {type(name).__name__}, expected a string"
    if type(ts) not in (float, int):
        return "'ts' is missing" if ts is None else f"'ts' is {type(ts).__name__}, expected a number"
    if type(dur) not in (float, int):
        return f"'dur' is {type(dur).__name__}, expected a number"
    return f"'dur' is negative ({dur})"


def _signed(value: Any) -> int | None:
    """An int64 from an int, an integral float (a file rewritten by a tool that keeps every number a float) or a digit
    string (negative too: a free's bytes); None for anything else."""
    if type(value) is str and value.lstrip("-").isdigit():
        value = int(value)
    elif type(value) is float and value.is_integer() and abs(value) < 2**63:
        value = int(value)
    return value if type(value) is int and -(2**63) < value < 2**63 else None


def _hashable(value: Any) -> bool:
    return value is None or type(value) in (int, str, float, bool)


def _whole(value: Any) -> Any:
    """A device or stream number as the int it is where written as a float (a tool that writes every number as
    one), None where that float is not a whole number (unreadable: as absent); any other value as it is."""
    if type(value) is float:
        return int(value) if value.is_integer() and abs(value) < 2**62 else None
    return value


def _lane_of(value: Any, fallback: Any) -> Any:
    """A device row's device (stream) from its args, else its pid (tid): null, a float not a whole number or another
    JSON type reads as absent."""
    value = _whole(value)
    return _whole(fallback) if value is None or not _hashable(value) else value


__all__ = ["Collector", "collect_file"]

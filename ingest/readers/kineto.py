"""PyTorch profiler / Kineto Chrome JSON -> events (`events.EventColumns`) -> Trace.

One streaming pass (``kineto_stream``) decodes the events in bounded batches and keeps what the converter needs
as compact columns; `translate` turns them into the one event model (times in ns from the first event, operators,
runtime calls with their copy kind and size, device work, Python frames, annotations, allocator instants), and
`assemble` links them and applies the rules. Nothing here decides what a signal is.
"""

from __future__ import annotations

import datetime
import gc
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..assemble import assemble
from ..errors import TraceFormatError
from ..events import KIND_CODES, NONE, EventColumns, EventKind, Translated
from ..kineto_vocabulary import KINETO_READ_CATEGORIES, is_compiler_span
from ..run_metadata import run_labels, scrub_secrets
from ..schema import EngineKind, SliceKind, Source
from ..spill import release_memory
from ..trace import RunInfo, Trace
from ._kineto_events import FORMAT, KinetoEvents
from .chrome_json import ChromeDocument, SplitFailed, whole
from .kineto_rows import ASIDE, NONE_INT, Field, RowColumns
from .source import DEFAULT_CAPS, SizeCaps

__all__ = ["FORMAT", "KinetoEvents", "collect", "read_kineto", "translate"]

_DEVICE_KIND = {"kernel": EventKind.KERNEL, "gpu_memcpy": EventKind.COPY, "gpu_memset": EventKind.MEMSET,
                "privateuse1_driver": EventKind.WAIT, "cuda_sync": EventKind.WAIT}  # fmt: skip
_HOST_DEVICE_TYPE = 0  # c10::DeviceType::CPU in a [memory] event's "Device Type"
SLICE_ROWS = 1 << 20  # runtime calls and device rows translated at a time (tests make it tiny)
# A trace of this many runtime calls, device rows and Python frames (a GPU trace of ~1 GB, a trace with NPU lanes of
# ~0.25 GB, a with_stack trace of ~0.3 GB) keeps
# its events in temporary files while linked: 2 GB GPU 0.48 GB peak against 0.56 GB held, 51.2 s against 50.7 s;
# 0.5 GB NPU lanes 0.56 against 0.68 GB, 38.7 s against 40.8 s (2026-12-03, since the rules read files by blocks).
SPILL_EVENTS = 1_000_000


def read_kineto(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, infer_fallback: bool = False,
                sliced: bool = False) -> Trace:
    """Convert a PyTorch profiler Chrome trace (.json or .json.gz) into a Trace, streaming the input.

    infer_fallback: mark leaf operators of a GPU trace that launched no GPU work as cpu_fallback (Kineto records no
    tensor devices, so this is a guess: host-side bookkeeping ops count too). sliced: give the operators table as
    `Trace.slices`, made as it is written (converting never holds it whole)."""
    from . import npu_kineto
    from .kineto_stream import collect_file

    path = Path(path)
    collecting = gc.isenabled()
    gc.disable()  # many small tuples, no cycles: the collector would only rescan them
    try:
        events, lanes = collect_file(path, caps)
        translated = translate(path, events, infer_fallback=infer_fallback, lanes=lanes)
        del events  # the collector's columns: the events hold what they said
        release_memory()
        trace = assemble(translated, sliced=sliced)
        return npu_kineto.finish(trace, lanes) if lanes is not None else trace
    finally:
        if collecting:
            gc.enable()


def collect(path: Path, doc: ChromeDocument) -> KinetoEvents:
    """Validate and keep what the converter uses from every event of a parsed document (one dict per
    event: the general path of the streaming reader); one TraceFormatError lists the problems."""
    from .kineto_stream import Collector

    def read(batches: Iterator[list]) -> KinetoEvents:
        collector = Collector(path, dict(doc.metadata))
        for batch in batches:
            collector.add(batch)
        return collector.finish()

    try:
        return read(doc.batches())
    except SplitFailed:
        return read(whole(doc).batches())


class _Ids:
    """Correlation ids as int64: an int64 as it is (an integral float or a digit string read as one), any other hashable
    value a code of its own (both sides share it)."""

    def __init__(self) -> None:
        self.codes: dict[tuple[type, Any], int] = {}

    def column(self, rows: Rows, k: int) -> np.ndarray:
        raw = rows.int_column(k) if not isinstance(rows, list) else None
        if raw is not None:
            return raw
        out = np.full(len(rows), NONE, dtype=np.int64)
        for i, row in enumerate(rows):
            v = row[k]
            if type(v) is float and v.is_integer() or type(v) is str and v.strip().lstrip("-").isdigit():
                v = int(v)  # one side's 11.0 or "11" is the other side's 11
            if type(v) is int and -(2**62) <= v < 2**62:
                out[i] = v
            elif type(v) in (str, float, bool, int):
                out[i] = self.codes.setdefault((type(v), v), 2**62 + len(self.codes))
        return out


class _Slice:
    """Rows first.. of a RowColumns none of whose values is kept aside, as the columns `RowColumns.chunks` reads back:
    what `_times`, `_coded`, `_ints` and `_Ids.column` read of a RowColumns, for that slice only."""

    def __init__(self, rows: RowColumns, columns: list[np.ndarray]) -> None:
        self.fields, self.values, self._columns = rows.fields, rows.values, columns

    def __len__(self) -> int:
        return len(self._columns[0])

    def kept_aside(self) -> bool:
        return False

    def numpy(self, k: int) -> np.ndarray:
        return self._columns[k]

    def int_column(self, k: int) -> np.ndarray | None:
        return self._columns[k] if self.fields[k] is Field.INT else None


Rows = RowColumns | _Slice | list[tuple]


def _parts(rows: RowColumns | list[tuple]) -> Iterator[tuple[int, Rows]]:
    """(first row, rows) a slice of `SLICE_ROWS` at a time where the rows are columns that hold every value, else the
    rows whole (a value kept aside is read row by row)."""
    if not isinstance(rows, RowColumns) or rows.kept_aside() or len(rows) <= SLICE_ROWS:
        yield 0, rows
        return
    for first, columns in rows.chunks(SLICE_ROWS):
        yield first, _Slice(rows, columns)


def _ns(ts: np.ndarray, t0: float) -> np.ndarray:
    out = np.asarray(ts, dtype=np.float64) - t0
    out *= 1000.0
    np.rint(out, out=out)
    return out.astype(np.int64)


def _span(ts: np.ndarray, dur: np.ndarray, t0: float) -> tuple[np.ndarray, np.ndarray]:
    """Start and duration in integer ns, each rounded from the file's own figure (a duration from the
    difference of two rounded instants could be 1 ns off what the file says)."""
    return _ns(ts, t0), _ns(dur, 0.0)


def _coded(rows: Rows, k: int) -> tuple[list, np.ndarray]:
    """(values, codes) of column k: a RowColumns' own coding, or one made from tuples."""
    if not isinstance(rows, list) and not rows.kept_aside():
        return rows.values, rows.numpy(k).astype(np.int64)
    values: dict[tuple[type, Any], int] = {}
    codes = np.fromiter((values.setdefault((type(r[k]), r[k]), len(values)) for r in rows), dtype=np.int64, count=len(rows))
    return [v for _, v in values], codes


def _times(rows: Rows, t0: float, ts_k: int = 0, dur_k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(rows, list):
        return _span(rows.numpy(ts_k), rows.numpy(dur_k), t0)
    return _span(np.array([r[ts_k] for r in rows], dtype=np.float64), np.array([r[dur_k] for r in rows], dtype=np.float64), t0)


def _ints(rows: Rows, k: int) -> np.ndarray:
    if not isinstance(rows, list):
        raw = rows.numpy(k).astype(np.int64)
        return np.where(raw == ASIDE, NONE, raw)
    return np.array([v if type(v) is int and NONE < v < 2**63 else NONE for v in (r[k] for r in rows)], dtype=np.int64)


def translate(path: Path, ev: KinetoEvents, *, infer_fallback: bool = False, lanes: Any = None) -> Translated:
    """The events of one collected Kineto trace in the one event model (`lanes`: an ``npu_kineto.NpuLayout``: the
    NPU rows' lanes, launch ids and ``ac2g`` flows, translated by ``npu_kineto``)."""
    from . import npu_kineto

    t0 = ev.t_min if ev.t_min != float("inf") else min((m[0] for m in ev.memory), default=0.0)
    t_max = ev.t_max if ev.t_max != float("-inf") else max((m[0] for m in ev.memory), default=t0)
    if not (math.isfinite(t0) and math.isfinite(t_max)) or (t_max - t0) * 1000.0 >= 2**62:
        raise TraceFormatError(path, f"timestamps span {t_max - t0:g} us: not a profile (ts/dur out of range)")
    out = EventColumns(spill=len(ev.runtime) + len(ev.device) + len(ev.python) >= SPILL_EVENTS)  # see SPILL_EVENTS
    ids = _Ids()
    ops = ev.ops
    first = 0
    for part in ops.slices():  # a spilled slice at a time: the operators' columns are never all read back at once
        start, dur = _span(part["ts"], part["dur"], t0)
        comm = {}
        rows, comms = ops.comms_in(first, first + len(start))
        if len(rows):  # communication arguments (record_param_comms): a code into `out.comms`
            comm["comm"] = np.full(len(start), NONE, dtype=np.int64)
            comm["comm"][rows] = [out.comm(c) for c in comms]
        out.extend(EventKind.OP, len(start), start_ns=start, dur_ns=dur, arguments=(ops.signatures, part["signature"]),
                   texts={"name": (ops.names, part["name"])}, threads=(ops.threads, part["thread"]), **comm)  # fmt: skip
        first += len(start)
        del start, dur, part
    for _, part in _parts(ev.python):  # Python frames, a slice at a time (a with_stack trace holds millions)
        if len(part):
            start, dur = _times(part, t0)
            out.extend(EventKind.PYTHON, len(start), start_ns=start, dur_ns=dur, texts={"name": _coded(part, 2)},
                       lanes={"pid": _coded(part, 3), "tid": _coded(part, 4)})
            del start, dur
    operators = None
    if lanes is not None:
        operators = npu_kineto.OperatorThreads.of(ops.threads, ops.code_counts()["thread"] if ops.threads else np.zeros(0))
    has_runtime = has_device = False
    for first, part in _parts(ev.runtime):  # a slice of the calls at a time: no whole column of millions of calls
        calls = _runtime_columns(part, t0, ids)
        if lanes is not None:  # the calls on NPU rows are device slices: added after the device work, below
            calls, _ = npu_kineto.runtime_calls(calls, lanes, operators, first=first)
        if len(calls["start_ns"]):
            has_runtime = True
            out.extend(EventKind.RUNTIME, len(calls["start_ns"]), start_ns=calls["start_ns"], dur_ns=calls["dur_ns"],
                       correlation=calls["correlation"], bytes=calls["bytes"], copy_kind=calls["copy_kind"],
                       texts={"name": calls["name"]}, lanes={"pid": calls["pid"], "tid": calls["tid"]})  # fmt: skip
        del calls
    for a in ev.annotations:  # the compiler's phases are spans of their own, not regions (the rules count compiles)
        s, d = int(round((a[0] - t0) * 1000.0)), int(round((a[0] + a[1] - t0) * 1000.0))
        if is_compiler_span(a[2]):  # drawn on a lane of the compiler's
            out.add(EventKind.SPAN, a[2], a[3], a[4], s, d - s, lane=COMPILER_LANE, engine_kind=EngineKind.COMPILER.value)
        else:
            out.add(EventKind.ANNOTATION, a[2], a[3], a[4], s, d - s)
    devices: set = set()
    unnamed = [0]  # device rows naming no device number (read as device 0)
    for first, part in _parts(ev.device):
        work = _device_columns(part, t0, ids)
        if lanes is not None:
            work["correlation"] = npu_kineto.device_ids(work, lanes, first=first)
        has_device = has_device or len(work["start_ns"]) > 0
        devices.update(_device_work(out, work, lanes, unnamed))
        del work
    if lanes is not None:  # the runtime calls on NPU rows, read again
        for first, part in _parts(ev.runtime):
            _, moved = npu_kineto.runtime_calls(_runtime_columns(part, t0, ids), lanes, operators, first=first, count=False)
            has_device = has_device or len(moved["start_ns"]) > 0
            devices.update(_device_work(out, moved, lanes, unnamed))
            del moved
    devices = sorted(devices, key=str)
    if lanes is not None:
        npu_kineto.flow_events(out, lanes, t0, operators, slice_rows=SLICE_ROWS)
    for ts, pid, tid, nbytes, total, reserved, device_type, device_id in ev.memory:
        on_host = device_type in (None, _HOST_DEVICE_TYPE) or device_id is None or device_id < 0
        out.add(EventKind.MEMORY, "[memory]", pid, tid, int(round((ts - t0) * 1000.0)), bytes=nbytes,
                total_allocated=total, total_reserved=reserved, device=-1 if on_host else device_id)  # fmt: skip
    gpus = [d for d in devices if not lanes or d not in lanes.processes]
    root_device = ((lanes.device_name(devices[0]) if lanes else f"cuda:{devices[0]}") if devices else "cpu")
    info = _run_info(path, ev, t0, gpus, infer_fallback, has_device=has_device, has_runtime=has_runtime)
    names = {d: lanes.device_name(d) for d in devices} if lanes else {}
    if unnamed[0]:
        info.missing_signals.append(f"device numbers of {unnamed[0]:,} device event{'s' if unnamed[0] > 1 else ''} "
                                    "(no device, no process named: read as device 0)")
    return Translated(out, info, root_name=path.name, root_device=root_device, infer_fallback=infer_fallback,
                      device_names=names)  # fmt: skip


COMPILER_LANE = "compiler"  # the lane of the compiler's phases and markers a trace records as annotations


def _runtime_columns(rows: Rows, t0: float, ids: _Ids) -> dict[str, Any]:
    """The runtime calls as columns: start_ns, dur_ns, correlation, bytes, copy_kind, and name, pid, tid as (values,
    codes)."""
    if not len(rows):
        empty = np.zeros(0, dtype=np.int64)
        return {"start_ns": empty, "dur_ns": empty, "correlation": empty, "bytes": empty, "copy_kind": empty,
                "name": ([], empty), "pid": ([], empty), "tid": ([], empty)}  # fmt: skip
    start, dur = _times(rows, t0)
    return {"start_ns": start, "dur_ns": dur, "correlation": ids.column(rows, 5), "bytes": _ints(rows, 7),
            "copy_kind": _ints(rows, 8), "name": _coded(rows, 2), "pid": _coded(rows, 3), "tid": _coded(rows, 4)}


def _device_columns(rows: Rows, t0: float, ids: _Ids) -> dict[str, Any]:
    """The device work as columns: start_ns, dur_ns, correlation, bytes, and cat, name, dev, stream as (values,
    codes)."""
    if not len(rows):
        empty = np.zeros(0, dtype=np.int64)
        return {"start_ns": empty, "dur_ns": empty, "correlation": empty, "bytes": empty, "cat": ([], empty),
                "name": ([], empty), "dev": ([], empty), "stream": ([], empty)}  # fmt: skip
    start, dur = _times(rows, t0)
    return {"start_ns": start, "dur_ns": dur, "correlation": ids.column(rows, 6), "bytes": _ints(rows, 7),
            "cat": _coded(rows, 2), "name": _coded(rows, 3), "dev": _coded(rows, 4), "stream": _coded(rows, 5)}


def _device_work(out: EventColumns, work: dict[str, Any], lanes: Any, unnamed: list[int]) -> list:
    """Add the device work (kernels, copies, memsets, driver waits; on NPU rows, runtime work drawn on a device
    lane as a dispatch span); the distinct devices. A device given as a digit string is its number; one not given
    (nor a process) is device 0, counted in unnamed[0]."""
    n = len(work["start_ns"])
    if not n:
        return []
    (cats, cat_codes), (names, name_codes) = work["cat"], work["name"]
    (dev_values, dev_codes), (stream_values, stream_codes) = work["dev"], work["stream"]
    kinds = np.array([KIND_CODES[_DEVICE_KIND.get(c, EventKind.KERNEL)] for c in cats] or [0], dtype=np.int8)[cat_codes]
    if lanes is None:  # GPU rows: the device's number; NPU rows name their lanes by the values as written
        numbers = [_device_number(v) for v in dev_values]
        unnamed[0] += int(np.isin(dev_codes, [c for c, v in enumerate(numbers) if v is None]).sum())
        dev_values = [0 if v is None else v for v in numbers]
    dev_int = np.array([v if type(v) is int and -(2**62) < v < 2**62 else -1 for v in dev_values] or [0], dtype=np.int64)
    stream_int = np.array([v if type(v) is int and -(2**62) < v < 2**62 else NONE for v in stream_values] or [0], dtype=np.int64)
    texts = {"name": work["name"]}
    if lanes is not None:  # NPU rows: the plugin's lane names and kinds, per distinct (category, copy name, lane)
        copy = np.array([c == "gpu_memcpy" for c in cats] or [False], dtype=bool)[cat_codes]
        keys = np.stack([cat_codes, np.where(copy, name_codes, -1), dev_codes, stream_codes]).astype(np.int64)
        distinct, inverse = np.unique(keys, axis=1, return_inverse=True)
        inverse = inverse.reshape(-1) + 1
        lane_of = [lanes.lane(cats[c], names[m] if m >= 0 else "", dev_values[d], stream_values[s])
                   for c, m, d, s in distinct.T.tolist()]  # fmt: skip
        texts["lane"] = ([None, *(lane.engine if lane else None for lane in lane_of)], inverse)
        texts["engine_kind"] = ([None, *(_engine_kind(lane) for lane in lane_of)], inverse)
        dispatch = np.array([False, *(lane is not None and lane.slice_kind is SliceKind.DISPATCH for lane in lane_of)])
        kinds = np.where(dispatch[inverse], KIND_CODES[EventKind.SPAN], kinds).astype(np.int8)
    out.extend(kinds, n, start_ns=work["start_ns"], dur_ns=work["dur_ns"], correlation=work["correlation"],
               bytes=work["bytes"], device=dev_int[dev_codes], stream=stream_int[stream_codes], texts=texts,
               lanes={"pid": work["dev"], "tid": work["stream"]})  # fmt: skip
    return sorted({dev_values[c] for c in np.unique(dev_codes).tolist()}, key=str)


def _device_number(value: Any) -> int | None:
    """A GPU row's device number: an int, or a digit string's ("0"); None where there is none."""
    if type(value) is str and value.strip().isdigit():
        return int(value)
    return value if type(value) is int else None


def _engine_kind(lane: Any) -> str | None:
    return lane.engine_kind.value if lane is not None else None


def _run_info(path: Path, ev: KinetoEvents, t0: float, devices: list, infer_fallback: bool, *, has_device: bool,
              has_runtime: bool) -> RunInfo:  # fmt: skip
    """What the trace says of its run (has_device, has_runtime: whether device work and runtime calls were read)."""
    meta = ev.metadata
    base = meta.get("baseTimeNanoseconds")
    start_ns = int(base) + int(t0 * 1000) if isinstance(base, int) else int(t0 * 1000)
    start_time = None
    if 10**17 < start_ns < 10**19:  # plausibly epoch nanoseconds
        start_time = datetime.datetime.fromtimestamp(start_ns / 1e9, datetime.UTC).isoformat()
    kept = scrub_secrets({str(k): v for k, v in meta.items() if k != "traceEvents"})
    missing = ["dispatch/recompile (not in profiler traces)", "host_bounce/* (Kineto records no tensor devices)"]
    if not len(ev.python):
        missing.append("call sites (recorded without with_stack=True)")
    if not any(s[0] for s in ev.ops.signatures):
        missing.append("shapes and dtypes (recorded without record_shapes=True)")
    unread = {k: n for k, n in ev.categories.items() if k not in KINETO_READ_CATEGORIES}
    if not has_device:
        if has_runtime:
            missing.append("device work (no device activity recorded: transfers and syncs from runtime calls only)")
        else:
            missing.append("transfers, syncs and cpu_fallback " + ("(no device activity in the categories read)" if unread
                                                                   else "(CPU-only trace: no device activity)"))
    else:
        missing.append("dispatch/cpu_fallback " + ("inferred from operators that launched no GPU work" if infer_fallback
                       else "(Kineto records no tensor devices; operators that launched no GPU work are placed on the host)"))
        memcpy = [c for c, v in enumerate(ev.device.values) if type(v) is str and v == "gpu_memcpy"]
        unsized = ev.device.count_rows(lambda c: np.isin(c[2], memcpy) & (c[7] == NONE_INT)) if memcpy else 0
        if unsized and not ev.runtime.any_row(lambda c: (c[7] != NONE_INT) & (c[7] != 0)):  # sizes are ints or None
            copies = ev.device.count_rows(lambda c: np.isin(c[2], memcpy))
            missing.append("transfer bytes (memcpy events carry no size)" if unsized == copies else
                           f"transfer bytes of {unsized:,} of {copies:,} copies (their memcpy events carry no size, or "
                           "one past 2^63)")
    if not ev.memory:
        missing.append("memory (recorded without profile_memory=True)")
    elif all(m[4] is None for m in ev.memory):  # an older PyTorch's events: each allocation's bytes, no running total
        missing.append(f"memory peaks (its {len(ev.memory):,} [memory] events carry no 'Total Allocated')")
    if ev.unpaired:
        missing.append(f"spans of {ev.unpaired:,} begin/end (B/E) events without their pair (not read)")
    if unread:
        listed = sorted(unread.items(), key=lambda kv: (-kv[1], str(kv[0])))
        missing.append("events of categories this reader does not read: " + ", ".join(f"{k} ({n:,})" for k, n in listed))
    return RunInfo(
        source=Source.CONVERTED,
        devices=["cpu", *(f"cuda:{d}" for d in devices)],
        start_time=start_time,
        producer="portscope convert",
        converted_from=FORMAT,
        missing_signals=missing,
        torch_version=run_labels(kept, path.name)["torch_version"],
        extra={
            "metadata": kept,  # the file's own keys besides its events, secrets scrubbed
            "trace_name": meta.get("traceName"),
            "events": ev.events,
            "categories": {str(k): v for k, v in sorted(ev.categories.items(), key=lambda kv: str(kv[0]))},
            "base_time_ns": base if isinstance(base, int) else None,
        },
    )

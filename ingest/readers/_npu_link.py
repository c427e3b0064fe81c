"""Launch links of a Kineto trace with NPU lanes (``npu_kineto``), made in bounded memory.

What `link_launches` promises, event by event:

* a launch marker (a runtime call named ``rbln_run``) with a ``launch_id`` of its own takes it as correlation; one
  on a thread where no operator runs (e.g. an NPU lane) moves to the main operator thread (most operators), where
  the operator open around it claims it;
* other runtime and driver calls on an NPU process become device slices of their lane (categories
  ``privateuse1_runtime`` / ``privateuse1_driver``), after the device work; then every device slice is put in
  start order (a stable sort);
* a device slice on an NPU process takes its own ``launch_id`` as correlation; one without either, the launch of
  the first ``ac2g`` flow end on its lane (pid, tid) at or after its start and not after its end: the ``launch_id``
  of the marker at the thread and time of the flow's start (the last start of that id), else the flow id (an id
  that is no int64 links the slice without a correlation).

The events' columns are rewritten a chunk at a time; the joins (flow start -> marker by thread and time, flow end
-> start by id, device slice -> flow end by lane and time) and the sort go through `Buckets` on disk, so what is
held is a bucket, a chunk, and what grows with distinct values (names, threads, odd ids).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from ..spill import DiskColumn
from ._kineto_events import KinetoEvents
from ._npu_flows import END, INT, START, NpuCollect
from .kineto_rows import ASIDE, NONE_INT, RowColumns

if TYPE_CHECKING:
    from .npu_kineto import NpuLayout

BUCKET_EVENTS = 1 << 20  # records joined at a time
CHUNK_ROWS = 1 << 18  # runtime calls or device slices rewritten at a time
HOLD_ROWS = 1 << 20  # values of a per-row link held in memory before it spills
WINDOW_ROWS = 1 << 21  # values of a spilled column read at a time by a gather or a scatter

LINKED_NO_ID = NONE_INT + 1  # the launch of a flow whose id is no int64: linked, without a correlation
_R_NAME, _R_PID, _R_TID, _R_CORR, _R_SIZE = 2, 3, 4, 5, 7
_R_TO_D = {0: 0, 1: 1, 2: 3, 3: 4, 4: 5, 5: 6, 7: 7}  # a runtime call's field -> the device slice's field it becomes
_FIELDS = ("ts", "dur", "cat", "name", "dev", "stream", "corr", "bytes")
_ROW = np.dtype([("ts", "<f8"), ("dur", "<f8"), ("cat", "<i4"), ("name", "<i4"), ("dev", "<i4"), ("stream", "<i4"),
                 ("corr", "<i8"), ("bytes", "<i8"), ("src", "<i8"), ("launch", "<i8")])  # fmt: skip
_MARK = np.dtype([("lane", "<i8"), ("ts", "<f8"), ("side", "<i1"), ("row", "<i8"), ("launch", "<i8"), ("kind", "<i1"),
                  ("id", "<i8")])  # fmt: skip
_FLOW = np.dtype([("kind", "<i1"), ("id", "<i8"), ("side", "<i1"), ("row", "<i8"), ("launch", "<i8"), ("lane", "<i8"),
                  ("ts", "<f8")])  # fmt: skip
_QUERY = np.dtype([("lane", "<i8"), ("ts", "<f8"), ("end", "<f8"), ("side", "<i1"), ("row", "<i8"), ("launch", "<i8")])


class _Rows:
    """The device slices to be: the device work, then the runtime calls that move to the device (source index src)."""

    def __init__(self, ev: KinetoEvents, layout: NpuLayout) -> None:
        from .npu_kineto import LAUNCH_MARKERS

        self.runtime, self.device, self.collected = ev.runtime, ev.device, layout.collected
        assert isinstance(self.runtime, RowColumns) and isinstance(self.device, RowColumns)
        processes = layout.processes
        rv = self.runtime.values
        self.marker_name = np.array([type(v) is str and v in LAUNCH_MARKERS for v in rv] + [False], dtype=bool)  # [-1]: aside
        self.npu_r = np.array([_is_key(v, processes) for v in rv] + [False], dtype=bool)
        self.remap = np.array([self.device.code(v) for v in rv] + [-1], dtype=np.int32)  # runtime code -> device code
        self.cats = np.array([self.device.code("privateuse1_runtime"), self.device.code("privateuse1_driver")], dtype=np.int32)
        self.memcpy = self.device.code("gpu_memcpy")
        self.npu_d = np.array([_is_key(v, processes) for v in self.device.values] + [False], dtype=bool)  # [-1]: aside
        self.n_dev = len(self.device)
        self.total = self.n_dev + self.moved_count()
        self._thread_codes: dict[tuple[int, int], int] = {}

    def moved(self, part: list[np.ndarray]) -> np.ndarray:
        """Which runtime calls of a chunk move to the device: calls (not markers) on an NPU process."""
        return ~self.marker_name[part[_R_NAME]] & self.npu_r[part[_R_PID]]

    def moved_count(self) -> int:
        return sum(int(self.moved(part).sum()) for _, part in self.runtime.chunks(CHUNK_ROWS))

    def chunks(self) -> Iterator[np.ndarray]:
        """The rows as _ROW records (launch: the row's own launch id), a chunk at a time, src in order."""
        collected = self.collected
        for lo, part in self.device.chunks(CHUNK_ROWS):
            rec = np.empty(len(part[0]), dtype=_ROW)
            for name, column in zip(_FIELDS, part, strict=True):
                rec[name] = column
            rec["src"] = np.arange(lo, lo + len(rec))
            rec["launch"] = collected.device_launch.read(lo, lo + len(rec))
            yield rec
        first = self.n_dev
        for lo, part in self.runtime.chunks(CHUNK_ROWS):
            at = np.flatnonzero(self.moved(part))
            if not len(at):
                continue
            rec = np.empty(len(at), dtype=_ROW)
            rec["ts"], rec["dur"] = part[0][at], part[1][at]
            rec["cat"] = self.cats[(collected.runtime_driver.read(lo, lo + len(part[0]))[at] == 1).astype(np.int64)]
            rec["name"], rec["dev"], rec["stream"] = (self.remap[part[k][at]] for k in (_R_NAME, _R_PID, _R_TID))
            rec["corr"], rec["bytes"] = part[_R_CORR][at], part[_R_SIZE][at]
            rec["src"] = np.arange(first, first + len(at))
            rec["launch"] = collected.runtime_launch.read(lo, lo + len(part[0]))[at]
            first += len(at)
            yield rec

    def queries(self, rec: np.ndarray) -> np.ndarray:
        """Which rows look for a flow: on an NPU process, without a launch id or a correlation of their own."""
        return self.npu_d[rec["dev"]] & (rec["launch"] == NONE_INT) & (rec["corr"] == NONE_INT)

    def lanes(self, dev: np.ndarray, stream: np.ndarray) -> np.ndarray:
        """The flows' lane code (pid code << 32 | tid code among the flows' values) of device codes."""
        values, out = self.device.values, np.empty(len(dev), dtype=np.int64)
        pairs = dev.astype(np.int64) << 32 | (stream.astype(np.int64) & 0xFFFFFFFF)
        distinct, inverse = np.unique(pairs, return_inverse=True)
        codes = []
        for p in distinct.tolist():
            d, s = p >> 32, p & 0xFFFFFFFF
            key = (d, s)
            if key not in self._thread_codes:
                self._thread_codes[key] = (self.collected.code(values[d]) << 32 | self.collected.code(values[s])
                                           if d >= 0 and s != 0xFFFFFFFF else -1)  # fmt: skip
            codes.append(self._thread_codes[key])
        out[:] = np.array(codes, dtype=np.int64)[inverse.reshape(-1)] if len(codes) else 0
        return out

    def samples(self) -> np.ndarray:
        step = max(1, self.total // (1 << 16))
        parts = [part[0][::step] for rows in (self.device, self.runtime) for _, part in rows.chunks(CHUNK_ROWS)]
        return np.concatenate(parts) if parts else np.zeros(1)

    def aside(self) -> dict[int, list[tuple[int, Any]]]:
        """src -> [(device field, value)] of the values kept aside (few: odd JSON types)."""
        out: dict[int, list[tuple[int, Any]]] = {}
        for (row, k), value in self.device.aside().items():
            out.setdefault(row, []).append((k, value))
        r_aside = _by_row(self.runtime)
        if r_aside:
            first = self.n_dev
            for lo, part in self.runtime.chunks(CHUNK_ROWS):
                at = np.flatnonzero(self.moved(part))
                for j, row in enumerate((lo + at).tolist()):
                    for k, value in r_aside.get(row, ()):
                        if k in _R_TO_D:
                            out.setdefault(first + j, []).append((_R_TO_D[k], value))
                first += len(at)
        return out


def link_launches(ev: KinetoEvents, layout: NpuLayout) -> None:
    """Rewrite ev.runtime and ev.device (RowColumns) as `link_launches` promises; count into layout."""
    rows = _Rows(ev, layout)
    kept, layout.markers = _runtime_calls(ev, rows)
    flow_link = _flow_links(rows) if layout.collected.flows else None
    ev.device = _device_slices(rows, layout, flow_link)
    ev.runtime = kept
    if flow_link is not None:
        flow_link.close()


def _runtime_calls(ev: KinetoEvents, rows: _Rows) -> tuple[RowColumns, int]:
    """(the runtime calls that stay, markers with their launch and on an operator thread; how many markers)."""
    runtime, launches = rows.runtime, rows.collected.runtime_launch
    threads = ev.ops.threads
    counts = ev.ops.code_counts()["thread"] if threads else np.zeros(0, dtype=np.int64)
    main = threads[int(np.argmax(counts))] if len(counts) else None
    op_threads = set(threads)
    off_thread: dict[int, bool] = {}  # pid code << 32 | tid code -> no operator runs there
    aside = _by_row(runtime)
    kept = runtime.sharing()
    markers = 0
    for lo, part in runtime.chunks(CHUNK_ROWS):
        marker = rows.marker_name[part[_R_NAME]]
        markers += int(marker.sum())
        keep = np.flatnonzero(~rows.moved(part))
        columns = [column[keep].copy() for column in part]
        is_marker = marker[keep]
        launch = launches.read(lo, lo + len(part[0]))[keep]
        own = is_marker & (launch != NONE_INT)
        columns[_R_CORR][own] = launch[own]
        at = np.flatnonzero(is_marker) if main is not None else np.zeros(0, dtype=np.int64)
        if len(at):  # markers where no operator runs move to the main thread
            pairs = columns[_R_PID][at].astype(np.int64) << 32 | (columns[_R_TID][at].astype(np.int64) & 0xFFFFFFFF)
            distinct, inverse = np.unique(pairs, return_inverse=True)
            for pair in distinct.tolist():
                if pair not in off_thread:
                    pid, tid = pair >> 32, pair & 0xFFFFFFFF
                    off_thread[pair] = pid < 0 or tid == 0xFFFFFFFF or _not_in((runtime.values[pid], runtime.values[tid]), op_threads)
            move = at[np.array([off_thread[pair] for pair in distinct.tolist()], dtype=bool)[inverse.reshape(-1)]]
            columns[_R_PID][move], columns[_R_TID][move] = runtime.code(main[0]), runtime.code(main[1])
        kept.extend_raw(columns, _aside_of(aside, lo + keep, columns, None))
    return kept, markers


def _device_slices(rows: _Rows, layout: NpuLayout, flow_link: DiskColumn | None) -> RowColumns:
    """The device slices, correlations set, in start order (a stable sort by time buckets on disk)."""
    device = rows.device
    memcpy = rows.memcpy
    aside = rows.aside()
    out = device.sharing()
    buckets = Buckets(rows.total, rows.samples, _ROW, max(1, BUCKET_EVENTS // 4))  # 1/4: 64-byte records
    by_launch = linked = sizeless = 0
    for rec in rows.chunks():
        on_npu = rows.npu_d[rec["dev"]]
        own = on_npu & (rec["launch"] != NONE_INT)
        by_launch += int(own.sum())
        if flow_link is not None:
            want = np.flatnonzero(rows.queries(rec))
            found = flow_link.take(rec["src"][want], WINDOW_ROWS) if len(want) else np.zeros(0, dtype=np.int64)
            hit = found != NONE_INT
            linked += int(hit.sum())
            rec["corr"][want[hit]] = np.where(found[hit] == LINKED_NO_ID, NONE_INT, found[hit])
        rec["corr"][own] = rec["launch"][own]
        sizeless += int(np.count_nonzero(on_npu & (rec["cat"] == memcpy) & (rec["bytes"] == NONE_INT)))
        buckets.add(rec, rec["ts"])
    for rec in buckets:
        rec = rec[np.argsort(rec["ts"], kind="stable")]  # added in src order: the stable sort of the whole
        columns = [rec[name] for name in _FIELDS]
        out.extend_raw(columns, _aside_of(aside, rec["src"], columns, None) if aside else None)
    layout.by_launch_id, layout.linked, layout.copies_without_bytes = by_launch, linked, sizeless
    return out


def _flow_links(rows: _Rows) -> DiskColumn | None:
    """Per device slice to be (src), the launch of the flow end that links it (NONE_INT: none, LINKED_NO_ID: a flow
    id that is no int64); None when no slice looks for a flow."""
    wanted = sum(int(rows.queries(rec).sum()) for rec in rows.chunks())
    if not wanted:
        return None
    collected = rows.collected
    ends = _end_launches(rows)
    queries = Buckets(wanted + collected.flows, lambda: _flow_ts(collected), _QUERY)
    for rec in rows.chunks():
        at = np.flatnonzero(rows.queries(rec))
        q = np.zeros(len(at), dtype=_QUERY)
        q["lane"] = rows.lanes(rec["dev"][at], rec["stream"][at])
        q["ts"], q["end"], q["row"], q["launch"] = rec["ts"][at], rec["ts"][at] + rec["dur"][at], rec["src"][at], NONE_INT
        queries.add(q, q["ts"])
    for e in ends:
        queries.add(e, e["ts"])
    link = DiskColumn("q", HOLD_ROWS)
    for lo in range(0, rows.total, HOLD_ROWS):
        link.extend(np.full(min(HOLD_ROWS, rows.total - lo), NONE_INT, dtype=np.int64))
    carried = np.zeros(0, dtype=_QUERY)
    for k, rec in enumerate(queries):
        rec = np.concatenate([carried, rec])
        order = np.lexsort((rec["row"], rec["side"], rec["ts"], rec["lane"]))
        rec = rec[order]
        is_end = rec["side"] == END
        # the next flow end at or after each row (same lane checked below)
        position = np.where(is_end, np.arange(len(rec)), len(rec))
        following = np.minimum.accumulate(position[::-1])[::-1]
        q = np.flatnonzero(~is_end)
        nxt = following[q]
        found = nxt < len(rec)
        same = np.zeros(len(q), dtype=bool)
        same[found] = rec["lane"][nxt[found]] == rec["lane"][q[found]]
        answer = q[same]
        ok = rec["ts"][nxt[same]] <= rec["end"][answer]
        link.put(rec["row"][answer[ok]], rec["launch"][nxt[same][ok]], WINDOW_ROWS)
        bound = queries.bounds[k] if k < len(queries.bounds) else None
        open_q = q[~same]
        carried = rec[open_q[rec["end"][open_q] >= bound]] if bound is not None else np.zeros(0, dtype=_QUERY)
    return link


def _end_launches(rows: _Rows) -> list[np.ndarray]:
    """The flow ends as _QUERY records (side END: lane, time, launch), a bucket of ids at a time: the launch of the
    marker at the thread and time of the id's last start, else the id."""
    collected = rows.collected
    markers = Buckets(collected.flows + len(rows.runtime), lambda: _flow_ts(collected), _MARK)
    runtime, launches = rows.runtime, collected.runtime_launch
    for lo, part in runtime.chunks(CHUNK_ROWS):
        launch = launches.read(lo, lo + len(part[0]))
        at = np.flatnonzero(rows.marker_name[part[_R_NAME]] & (launch != NONE_INT))
        m = np.zeros(len(at), dtype=_MARK)
        m["lane"] = _runtime_lanes(rows, part[_R_PID][at], part[_R_TID][at])
        m["ts"], m["side"], m["row"], m["launch"] = part[0][at], 0, lo + at, launch[at]
        markers.add(m, m["ts"])
    for lo, flow in _flow_blocks(collected):
        at = np.flatnonzero(flow["side"] == START)
        s = np.zeros(len(at), dtype=_MARK)
        s["lane"], s["ts"], s["side"], s["row"] = flow["lane"][at], flow["ts"][at], 1, lo + at
        s["kind"], s["id"], s["launch"] = flow["kind"][at], flow["id"][at], NONE_INT
        markers.add(s, s["ts"])
    by_id = Buckets(collected.flows, lambda: _flow_ids(collected), _FLOW)
    for rec in markers:  # each start: the launch of the last marker at its thread and time
        rec = rec[np.lexsort((rec["row"], rec["side"], rec["ts"], rec["lane"]))]
        group = np.r_[0, np.cumsum((rec["lane"][1:] != rec["lane"][:-1]) | (rec["ts"][1:] != rec["ts"][:-1]))]
        last_marker = np.maximum.accumulate(np.where(rec["side"] == 0, np.arange(len(rec)), -1)) if len(rec) else rec["row"]
        starts = np.flatnonzero(rec["side"] == 1)
        m = last_marker[starts]
        hit = (m >= 0) & (group[np.maximum(m, 0)] == group[starts])
        f = np.zeros(len(starts), dtype=_FLOW)
        f["kind"], f["id"], f["side"], f["row"] = rec["kind"][starts], rec["id"][starts], START, rec["row"][starts]
        f["launch"] = np.where(hit, rec["launch"][np.maximum(m, 0)], NONE_INT)
        by_id.add(f, f["id"])
    for lo, flow in _flow_blocks(collected):
        at = np.flatnonzero(flow["side"] == END)
        e = np.zeros(len(at), dtype=_FLOW)
        e["kind"], e["id"], e["side"], e["row"] = flow["kind"][at], flow["id"][at], END, lo + at
        e["lane"], e["ts"] = flow["lane"][at], flow["ts"][at]
        by_id.add(e, e["id"])
    out = []
    for rec in by_id:  # each end: the last start of its id
        rec = rec[np.lexsort((rec["row"], rec["side"], rec["id"], rec["kind"]))]
        group = np.r_[0, np.cumsum((rec["kind"][1:] != rec["kind"][:-1]) | (rec["id"][1:] != rec["id"][:-1]))]
        last_start = np.maximum.accumulate(np.where(rec["side"] == START, np.arange(len(rec)), -1)) if len(rec) else rec["row"]
        ends = np.flatnonzero(rec["side"] == END)
        s = last_start[ends]
        hit = (s >= 0) & (group[np.maximum(s, 0)] == group[ends])
        from_marker = np.where(hit, rec["launch"][np.maximum(s, 0)], NONE_INT)
        own = np.where(rec["kind"][ends] == INT, rec["id"][ends], LINKED_NO_ID)
        q = np.zeros(len(ends), dtype=_QUERY)
        q["lane"], q["ts"], q["side"], q["row"] = rec["lane"][ends], rec["ts"][ends], END, rec["row"][ends]
        q["launch"] = np.where(from_marker != NONE_INT, from_marker, own)
        out.append(q)
    return out


def _runtime_lanes(rows: _Rows, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """The flows' lane code of runtime (pid, tid) codes."""
    return rows.lanes(rows.remap[pid], rows.remap[tid])


def _flow_blocks(collected: NpuCollect) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(first flow, its columns: side, lane, ts, kind, id) a block at a time."""
    side, pid, tid, ts, kind, ids = collected.flow_columns()
    for lo, s in side.blocks(CHUNK_ROWS):
        hi = lo + len(s)
        lane = pid.read(lo, hi).astype(np.int64) << 32 | tid.read(lo, hi).astype(np.int64)
        yield lo, {"side": s, "lane": lane, "ts": ts.read(lo, hi), "kind": kind.read(lo, hi), "id": ids.read(lo, hi)}


def _flow_ts(collected: NpuCollect) -> np.ndarray:
    step = max(1, collected.flows // (1 << 16))
    parts = [ts[::step] for _, ts in collected.flow_columns()[3].blocks(CHUNK_ROWS)]
    return np.concatenate(parts) if parts else np.zeros(1)


def _flow_ids(collected: NpuCollect) -> np.ndarray:
    step = max(1, collected.flows // (1 << 16))
    parts = [ids[::step] for _, ids in collected.flow_columns()[5].blocks(CHUNK_ROWS)]
    return np.concatenate(parts) if parts else np.zeros(1, dtype=np.int64)


def _is_key(value: Any, processes: dict) -> bool:
    try:
        return value in processes
    except TypeError:
        return False


def _not_in(thread: tuple, threads: set) -> bool:
    try:
        return thread not in threads
    except TypeError:
        return True


def _by_row(rows: RowColumns) -> dict[int, list[tuple[int, Any]]]:
    """row -> [(field, value)] of the values a RowColumns keeps aside (few: odd JSON types)."""
    out: dict[int, list[tuple[int, Any]]] = {}
    for (row, k), value in rows.aside().items():
        out.setdefault(row, []).append((k, value))
    return out


def _aside_of(aside: dict[int, list[tuple[int, Any]]], src: np.ndarray, columns: list[np.ndarray],
              fields: dict[int, int] | None) -> dict[tuple[int, int], Any]:  # fmt: skip
    """(row in a new part, field) -> value, for the new rows (sources src) whose raw field is still the aside mark
    (fields: a source field -> the new one; None: the same)."""
    if not aside:
        return {}
    out = {}
    for j, row in enumerate(src.tolist()):
        for k, value in aside.get(row, ()):
            t = k if fields is None else fields.get(k)
            if t is not None and int(columns[t][j]) in (-1, ASIDE):
                out[(j, t)] = value
    return out



class Buckets:
    """Records distributed by a key (start time, correlation id): one array in memory when they fit in one bucket,
    else one temporary file a bucket, bounds at quantiles of a sample of the keys (~BUCKET_EVENTS records a bucket)."""

    def __init__(self, total: int, samples: Callable[[], np.ndarray], dtype: np.dtype, per_bucket: int | None = None) -> None:
        self.dtype = dtype
        self.count = max(1, -(-total // (per_bucket or BUCKET_EVENTS)))  # per_bucket: records a bucket, if not BUCKET_EVENTS
        self.bounds = np.zeros(0)
        if self.count > 1:
            self.bounds = np.unique(np.quantile(samples(), np.linspace(0, 1, self.count + 1)[1:-1], method="lower"))
        self.count = len(self.bounds) + 1
        self._held: list[np.ndarray] = []
        self._files: list[BinaryIO] = []
        if self.count > 1:
            self._files = [tempfile.TemporaryFile(prefix="portscope-sweep-") for _ in range(self.count)]  # noqa: SIM115

    def add(self, rec: np.ndarray, key: np.ndarray) -> None:
        """Add records (of the buckets' dtype), each to the bucket of its key."""
        if not self._files:
            self._held.append(rec)
            return
        which = np.searchsorted(self.bounds, key, side="right")
        order = np.argsort(which, kind="stable")
        cuts = np.searchsorted(which[order], np.arange(self.count + 1))
        for k in range(self.count):
            if cuts[k] < cuts[k + 1]:
                rec[order[cuts[k] : cuts[k + 1]]].tofile(self._files[k])

    def __iter__(self) -> Iterator[np.ndarray]:
        """Each bucket's records in the order they were added, bucket by bucket in key order (each read once)."""
        if not self._files:
            yield np.concatenate(self._held) if self._held else np.zeros(0, dtype=self.dtype)
            self._held = []
            return
        for f in self._files:
            f.seek(0)
            rec = np.fromfile(f, dtype=self.dtype)
            f.close()
            yield rec
        self._files = []

__all__ = ["LINKED_NO_ID", "link_launches"]

"""Points (flow endpoints, calls) bound to the spans of their threads in bounded memory.

Chrome's rules (unchanged from the whole-trace binder they replace): a point that binds to the enclosing
slice (``s``, ``t``, ``f`` with ``"bp": "e"``) goes to the innermost span open at its time on its thread;
other points, and enclosing points that no span covers, go to the first span of their
thread starting at or after them (ties in start: the longest first). Spans are sorted by (thread, start,
longest first) within time buckets, not whole: bucket bounds are quantiles of a sample of the start
times (about BUCKET_ROWS spans a bucket); spans and points are distributed to their bucket's
temporary files (`DiskColumn`), then each bucket is sorted and swept in time order, carrying the spans
still open at its end (they may enclose the next bucket's points) and the points still waiting for a
span that starts after them (their thread has one later). What is resident is one bucket and what is
carried (a few spans a thread: the open ones), whatever the trace's length. Results go to disk too
(`Scatter`: values put at indices in any order, assembled one range of indices at a time).

One difference from sorting every span at once: looking back for the innermost open span walks at most
64 spans of the bucket (as the whole sort did over all spans); spans closed in an earlier bucket are no
longer in the way, so a point after more than 64 closed siblings may now find its open parent.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..spill import DiskColumn
from .chrome_events import ChromeEvents, blocks, lane_keys

BUCKET_ROWS = 1 << 20  # spans of the points' threads per time bucket, about (tests make it tiny)
SAMPLE_ROWS = 1 << 16  # start times sampled for the bucket bounds, about
RANGE_ROWS = 1 << 20  # indices a `Scatter` assembles at a time
SPILL_HOLD = 1 << 13  # values held per column of a bucket before they go to its file
_WALK = 64  # spans looked back at for the innermost open one
_NONE = np.iinfo(np.int64).min

PointReader = Callable[[int, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


class Scatter:
    """Values put at indices 0..n-1 in any order, assembled into one `DiskColumn` in index order (-1 where
    none was put). Kept on disk by ranges of RANGE_ROWS indices, each range assembled alone."""

    def __init__(self, n: int, typecode: str = "q") -> None:
        self.n, self.typecode, self.rows = n, typecode, max(1, RANGE_ROWS)
        parts = (n + self.rows - 1) // self.rows
        self._at = [DiskColumn("q", SPILL_HOLD) for _ in range(parts)]
        self._value = [DiskColumn(typecode, SPILL_HOLD) for _ in range(parts)]

    def put(self, index: np.ndarray, values: np.ndarray) -> None:
        index = np.asarray(index, dtype=np.int64)
        if not len(index):
            return
        part = index // self.rows
        sort = np.argsort(part, kind="stable")
        part = part[sort]
        cuts = (np.flatnonzero(np.diff(part)) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(sort)], strict=True):
            p, pick = int(part[lo]), sort[lo:hi]
            self._at[p].extend(index[pick])
            self._value[p].extend(values[pick])

    def column(self, hold: int | None = None) -> DiskColumn:
        """The values in index order (the parts put are dropped as they are assembled)."""
        from . import chrome_events

        out = DiskColumn(self.typecode, chrome_events.HOLD_ROWS if hold is None else hold)
        for p, (at_col, value_col) in enumerate(zip(self._at, self._value, strict=True)):
            lo = p * self.rows
            dense = np.full(min(self.rows, self.n - lo), -1, dtype=out.dtype)
            dense[at_col.read(0, len(at_col)) - lo] = value_col.read(0, len(value_col))
            at_col.close()
            value_col.close()
            out.extend(dense)
        return out


def bind(ev: ChromeEvents, count: int, points: PointReader) -> DiskColumn:
    """Per point 0..count-1 (`points(lo, hi)`: pid codes, tid codes, times in ns, enclosing flags of points
    lo..hi-1): the span it binds to, or -1."""
    result = Scatter(count)
    if not len(ev) or not count:
        return result.column()
    lanes = np.unique(np.concatenate([np.unique(_lane(*points(lo, hi)[:2])) for lo, hi in blocks(count)]))
    n = len(ev)
    step = max(1, n // max(1, SAMPLE_ROWS))
    first, last, hits = None, None, 0
    last_start = np.full(len(lanes), _NONE, dtype=np.int64)  # per lane: its latest span start
    sample = []
    for lo, hi in blocks(n):  # spans of the points' threads: how many, their extent, a sample of starts
        rank, hit = _ranks(lanes, lane_keys(ev, lo, hi))
        if not hit.any():
            continue
        start = ev.read("start", lo, hi)[hit]
        hits += len(start)
        first = int(start.min()) if first is None else min(first, int(start.min()))
        last = int(start.max()) if last is None else max(last, int(start.max()))
        np.maximum.at(last_start, rank[hit], start)
        sample.append(start[(lo + np.flatnonzero(hit)) % step == 0])
    if first is None or last is None:
        return result.column()
    base = first - 1
    width = (last - base + 1) * 2  # room for points past the last start
    if width * (len(lanes) + 1) >= 2**62:  # times too far apart to combine with lanes: no bindings rather than wrong ones
        return result.column()
    bounds = time_bounds(sample, hits)
    del sample
    spans = [[DiskColumn("q", SPILL_HOLD) for _ in range(3)] for _ in range(len(bounds) + 1)]  # key, end, span number
    for lo, hi in blocks(n):
        rank, hit = _ranks(lanes, lane_keys(ev, lo, hi))
        if not hit.any():
            continue
        start, dur = ev.read("start", lo, hi)[hit], ev.read("dur", lo, hi)[hit]
        key = rank[hit].astype(np.int64) * width + (start - base)
        spread(spans, np.searchsorted(bounds, start, "right"), key, start + dur, lo + np.flatnonzero(hit))
    waiting = [[DiskColumn(t, SPILL_HOLD) for t in "qqqb"] for _ in range(len(bounds) + 1)]  # number, key, time, enclosing
    for lo, hi in blocks(count):
        pid, tid, ts, enclosing = points(lo, hi)
        rank, present = _ranks(lanes, _lane(pid, tid))
        ts = np.asarray(ts, dtype=np.int64)
        key = rank.astype(np.int64) * width + np.clip(ts - base, 0, width - 1)  # before or after every span: at the ends
        number = np.arange(lo, hi, dtype=np.int64)
        spread(waiting, np.searchsorted(bounds, ts[present], "right"), number[present], key[present], ts[present],
                np.asarray(enclosing)[present])  # fmt: skip
    carried = [np.zeros(0, dtype=np.int64)] * 3  # spans open at the previous bucket's end
    pending = [np.zeros(0, dtype=np.int64)] * 3  # points waiting for their thread's next span: number, key, time
    for b, (span_cols, point_cols) in enumerate(zip(spans, waiting, strict=True)):
        key, end, span = (np.concatenate([c, col.read(0, len(col))]) for c, col in zip(carried, span_cols, strict=True))
        for col in span_cols:
            col.close()
        order = np.lexsort((-(end - (key % width + base)), key))  # by thread and start, the longest first
        key, end, span = key[order], end[order], span[order]
        del order
        number, q, ts, enclosing = (col.read(0, len(col)) for col in point_cols)
        for col in point_cols:
            col.close()
        found = _enclosing(key, end, span, q, ts, enclosing != 0, width)
        result.put(number[found >= 0], found[found >= 0])
        after = found < 0
        number, q, ts = (np.concatenate([p, v[after]]) for p, v in zip(pending, (number, q, ts), strict=True))
        lane_lo = q - q % width
        nxt = np.zeros(len(q), dtype=np.int64) - 1
        if len(key):  # the first span of the thread starting at or after the point
            at = np.searchsorted(key, q, "left")
            ok = at < len(key)
            ok[ok] = key[at[ok]] < lane_lo[ok] + width
            nxt[ok] = span[at[ok]]
        result.put(number[nxt >= 0], nxt[nxt >= 0])
        later = (nxt < 0) & (last_start[lane_lo // width] >= ts)  # the thread has a span starting later
        pending = [number[later], q[later], ts[later]]
        if b < len(bounds):
            still = end >= bounds[b]
            carried = [key[still], end[still], span[still]]
    return result.column()


def time_bounds(sample: list[np.ndarray], count: int) -> np.ndarray:
    """Bucket bounds for `count` times of which `sample` is an even sample: about BUCKET_ROWS times a bucket
    (bucket of t: searchsorted(bounds, t, "right"); equal times share a bucket)."""
    buckets = max(1, -(-count // max(1, BUCKET_ROWS)))
    if buckets == 1 or not sample:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.quantile(np.concatenate(sample), np.arange(1, buckets) / buckets, method="lower")).astype(np.int64)


def _lane(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    return (np.asarray(pid).astype(np.int64) << 32) | np.asarray(tid).astype(np.int64)


def _ranks(lanes: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position of each key in `lanes`, whether it is there)."""
    if not len(lanes):
        return np.zeros(len(keys), dtype=np.int64), np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(lanes, keys), len(lanes) - 1)
    return at, lanes[at] == keys


def spread(columns: list[list[DiskColumn]], bucket: np.ndarray, *values: np.ndarray) -> None:
    """Append each row of `values` to the columns of its bucket."""
    if not len(bucket):
        return
    order = np.argsort(bucket, kind="stable")
    bucket = bucket[order]
    cuts = (np.flatnonzero(np.diff(bucket)) + 1).tolist()
    for lo, hi in zip([0, *cuts], [*cuts, len(order)], strict=True):
        pick = order[lo:hi]
        for col, v in zip(columns[int(bucket[lo])], values, strict=True):
            col.extend(v[pick])


def _enclosing(key: np.ndarray, end: np.ndarray, span: np.ndarray, q: np.ndarray, ts: np.ndarray,
               enclosing: np.ndarray, width: int) -> np.ndarray:  # fmt: skip
    """Per enclosing point: the innermost span open at its time on its thread (the latest start at or before it
    that still covers it: the first candidate almost always, a short walk back after a nested span that
    closed already), or -1."""
    found = np.full(len(q), -1, dtype=np.int64)
    if not len(key) or not len(q):
        return found
    lane_lo = q - q % width
    k = np.searchsorted(key, q, "right") - 1
    k_safe = np.maximum(k, 0)
    candidate = enclosing & (k >= 0) & (key[k_safe] >= lane_lo)
    hit = candidate & (end[k_safe] >= ts)
    found[hit] = span[k_safe[hit]]
    for j in np.flatnonzero(candidate & ~hit).tolist():
        for kk in range(int(k[j]) - 1, max(int(k[j]) - _WALK, -1), -1):
            if key[kk] < lane_lo[j]:
                break
            if end[kk] >= ts[j]:
                found[j] = span[kk]
                break
    return found


def bind_flows(ev: ChromeEvents) -> DiskColumn:
    """Per flow endpoint: the span it binds to, or -1 (on disk past HOLD_ROWS values)."""
    f = ev.flows
    return bind(ev, len(f), lambda lo, hi: (f.read("pid", lo, hi), f.read("tid", lo, hi), f.read("ts", lo, hi),
                                            f.read("enclosing", lo, hi)))  # fmt: skip


__all__ = ["BUCKET_ROWS", "RANGE_ROWS", "SAMPLE_ROWS", "SPILL_HOLD", "Scatter", "bind", "bind_flows", "spread", "time_bounds"]

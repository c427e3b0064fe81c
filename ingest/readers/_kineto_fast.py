"""A fast path for Kineto's own layout: one regex over the bytes instead of a JSON parse per event.

Kineto writes every complete ("X") event with its keys in a fixed order
(``ph, cat, name, pid, tid, ts, dur, args``) and flat args. One ``findall`` reads
those fields straight from the bytes; args are parsed with orjson only where the
converter needs them, and an operator's tensor arguments once per distinct
signature (a generation loop repeats a few hundred). Other events (metadata,
flows) are not needed, except thread names, read by their own regex.

The result must account for every "X" event of the document; when it does not
(another layout, args holding braces as kernel names do, a negative duration),
this returns None and the caller takes the general JSON path, which also words
the errors.
"""

from __future__ import annotations

import collections
import operator
import re
from typing import Any

import orjson

from .chrome_json import ChromeDocument
from .kineto import _DEVICE_CATS, _RUNTIME_CATS, KinetoEvents, _int, _tensor_args

_NUM = rb"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"
_EVENT = re.compile(
    rb'\{\s*"ph":\s*"X",\s*"cat":\s*"([^"\\]*)",\s*"name":\s*"([^"\\]*(?:\\.[^"\\]*)*)",\s*'
    rb'"pid":\s*(-?\d+|"[^"\\]*"),\s*"tid":\s*(-?\d+|"[^"\\]*"),\s*'
    rb'"ts":\s*(' + _NUM + rb'),\s*"dur":\s*(' + _NUM + rb')\s*'
    rb'(?:,\s*"args":\s*\{\s*(?:"External id":\s*(-?\d+)\s*,?)?([^{}]*)\})?\s*\}'
)
_X = re.compile(rb'"ph":\s*"X"')
_TRACE_SPAN = re.compile(rb'"ph":\s*"X",\s*"cat":\s*"Trace"')
_ANY_EVENT = re.compile(rb'"ph":\s*"')
_THREAD_NAME = re.compile(
    rb'"name":\s*"thread_name",\s*"ph":\s*"M",[^{}]*?"pid":\s*(-?\d+),\s*"tid":\s*(-?\d+),\s*'
    rb'"args":\s*\{\s*"name":\s*"([^"\\]*)"\s*\}'
    rb'|"ph":\s*"M",\s*"name":\s*"thread_name",[^{}]*?"pid":\s*(-?\d+),\s*"tid":\s*(-?\d+),\s*'
    rb'"args":\s*\{\s*"name":\s*"([^"\\]*)"\s*\}'
)


def _signature(rest: bytes) -> bytes:
    """The args of a cpu_op less a trailing "Ev Idx" (the External id is already cut off by the regex)."""
    j = rest.rfind(b'"Ev Idx"')
    return rest[:j] if j >= 0 and b'"Input' not in rest[j:] else rest


_NO_TENSORS: tuple = (None, None, None, 0)


def _id(value: bytes) -> int | str:
    return int(value) if value[:1] != b'"' else value[1:-1].decode()


def _args(rest: bytes) -> dict:
    rest = rest.strip(b" \t\r\n,")
    return orjson.loads(b"{" + rest + b"}") if rest else {}


def fast_collect(doc: ChromeDocument) -> KinetoEvents | None:
    """The events of a Kineto-layout document, or None when the fast path cannot vouch for them."""
    if doc.span is None:
        return None
    raw = doc.raw
    start, end = doc.span
    matches = _EVENT.findall(raw, start, end)
    x_events = len(_X.findall(raw, start, end))
    traces = len(_TRACE_SPAN.findall(raw, start, end))
    out = KinetoEvents(metadata=dict(doc.metadata))
    if not matches:
        return None
    # column by column: C-level loops (map, zip, itemgetter) instead of one Python iteration per event
    cat_c, name_c, pid_c, tid_c, ts_c, dur_c, ext_c, rest_c = zip(*matches, strict=True)
    del matches
    counts = collections.Counter(cat_c)
    categories: dict[Any, int] = {c.decode(): n for c, n in counts.items()}
    if len(cat_c) + traces - categories.get("Trace", 0) != x_events:
        return None  # some X event is in a layout the regex does not read
    if traces:
        categories["Trace"] = traces
    by_cat: dict[bytes, list[int]] = {c: [] for c in counts}
    for i, c in enumerate(cat_c):
        by_cat[c].append(i)
    names = {n: orjson.loads(b'"' + n + b'"') if b"\\" in n else n.decode() for n in set(name_c)}
    ids = {v: _id(v) for v in set(pid_c) | set(tid_c)}
    ts_all = list(map(float, ts_c))
    dur_all = list(map(float, dur_c))
    if min(dur_all) < 0:
        return None
    live = [i for c, idx in by_cat.items() if c != b"Trace" for i in idx]
    if not live:
        return None
    t_min = min(ts_all[i] for i in live)
    t_max = max(ts_all[i] + dur_all[i] for i in live)

    def column(values: tuple | list, idx: list[int]) -> list:
        return [values[idx[0]]] if len(idx) == 1 else list(operator.itemgetter(*idx)(values))

    def common(idx: list[int]) -> tuple[list, ...]:
        return (column(ts_all, idx), column(dur_all, idx), [names[n] for n in column(name_c, idx)],
                [ids[p] for p in column(pid_c, idx)], [ids[t] for t in column(tid_c, idx)])  # fmt: skip

    for cat_b, idx in by_cat.items():
        cat = cat_b.decode()
        if cat == "cpu_op":
            rest = column(rest_c, idx)
            keys = list(map(_signature, rest))
            signatures = {}
            for key, r in zip(keys, rest, strict=True):
                if key not in signatures:
                    signatures[key] = _tensor_args(_args(r)) if (b'"Input' in r or b'"input_shapes"' in r) else _NO_TENSORS
            sig = [signatures[k] for k in keys]
            ext = [int(e) if e else _args(r).get("External id") if b'"External id"' in r else None
                   for e, r in zip(column(ext_c, idx), rest, strict=True)]  # fmt: skip
            shapes, strides, dtypes, nbytes = zip(*sig, strict=True)
            out.ops.extend(zip(*common(idx), ext, shapes, strides, dtypes, nbytes, strict=True))
        elif cat == "user_annotation":
            out.annotations.extend(zip(*common(idx), strict=True))
        elif cat == "python_function":
            out.python.extend(zip(*common(idx), strict=True))
    runtime_idx = sorted(i for c, idx in by_cat.items() if c.decode() in _RUNTIME_CATS for i in idx)
    device_idx = sorted(i for c, idx in by_cat.items() if c.decode() in _DEVICE_CATS for i in idx)
    for i in runtime_idx:
        a = _args(rest_c[i])
        if ext_c[i]:
            a["External id"] = int(ext_c[i])
        size = a.get("bytes", a.get("size"))
        out.runtime.append((ts_all[i], dur_all[i], names[name_c[i]], ids[pid_c[i]], ids[tid_c[i]], a.get("correlation"),
                            a.get("External id"), _int(size)))  # fmt: skip
    for i in device_idx:
        a = _args(rest_c[i])
        pid, tid = ids[pid_c[i]], ids[tid_c[i]]
        out.device.append((ts_all[i], dur_all[i], cat_c[i].decode(), names[name_c[i]], a.get("device", pid),
                           a.get("stream", tid), a.get("correlation"), _int(a.get("bytes"))))  # fmt: skip
    for m in _THREAD_NAME.finditer(raw, start, end):
        pid_b, tid_b, label = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(4), m.group(5), m.group(6))
        out.thread_names[(int(pid_b), int(tid_b))] = label.decode()
    if not (out.ops or out.device or out.annotations):
        return None
    out.t_min, out.t_max = t_min, t_max
    out.events = len(_ANY_EVENT.findall(raw, start, end))
    out.categories = categories
    return out

"""A fast path for Kineto's own layout: one regex over the bytes instead of a JSON parse per event.

Kineto writes every complete ("X") event with its keys in a fixed order
(``ph, cat, name, pid, tid, ts, dur, args``) and flat args. One ``findall`` reads
those fields straight from the bytes; args are parsed with orjson only where the
converter needs them, and an operator's tensor arguments once per distinct
signature (a generation loop repeats a few hundred). Other events (metadata,
flows) are not needed.

The result must account for every "X" event of the document; when it does not
(another layout, args holding braces as kernel names do, a negative duration),
this returns None and the caller takes the general JSON path, which also words
the errors.
"""

from __future__ import annotations

import collections
import operator
import re

import orjson

from ..catalog import KINETO_DEVICE_CATEGORIES, KINETO_RUNTIME_CATEGORIES
from ._kineto_events import KinetoEvents, _int, _tensor_args
from .chrome_json import ChromeDocument

# Narrow classes ([^"]*, [^,]*, [^}]*) run twice as fast as exact JSON grammar in `re`; what they let
# through is checked below (float(), int(), orjson) and a name with an escaped quote or args holding
# braces simply do not match, which the count check turns into the general path.
_EVENT = re.compile(
    rb'\{\s*"ph":\s*"X",\s*"cat":\s*"([^"]*)",\s*"name":\s*"([^"]*)",\s*"pid":\s*([^,]*),\s*"tid":\s*([^,]*),\s*'
    rb'"ts":\s*([^,]*),\s*"dur":\s*([-\d.eE+]*)\s*(?:,\s*"args":\s*\{\s*([^}]*)\})?\s*\}'
)
_X = re.compile(rb'"ph":\s*"X"')
_TRACE_SPAN = re.compile(rb'"ph":\s*"X",\s*"cat":\s*"Trace"')
_ANY_EVENT = re.compile(rb'"ph":\s*"')


_NO_TENSORS: tuple = (None, None, None, 0)


def _id(value: bytes) -> int | str:
    value = value.strip()
    if value[:1] == b'"' and value[-1:] == b'"' and len(value) >= 2:
        return value[1:-1].decode()
    return int(value)


class _NotKineto(Exception):
    """Something the fast path cannot read: the caller takes the general path."""


def _args(rest: bytes | None) -> dict:
    rest = (rest or b"").strip(b" \t\r\n,")
    try:
        value = orjson.loads(b"{" + rest + b"}") if rest else {}
    except orjson.JSONDecodeError:
        raise _NotKineto() from None
    if type(value) is not dict:
        raise _NotKineto()
    return value


def fast_collect(doc: ChromeDocument) -> KinetoEvents | None:
    """The events of a Kineto-layout document, or None when the fast path cannot vouch for them."""
    try:
        return _collect(doc)
    except (_NotKineto, ValueError, UnicodeDecodeError):
        return None


CHUNK_BYTES = 16 << 20  # events are read this many bytes at a time: memory stays near the file's size


class _State:
    """What the chunks share: caches of decoded names, ids and tensor signatures, and running totals."""

    def __init__(self) -> None:
        self.names: dict[bytes, str] = {}
        self.ids: dict[bytes, int | str] = {}
        self.signatures: dict[bytes, tuple] = {}
        self.categories: dict[str, int] = {}
        self.matched = 0
        self.t_min = float("inf")
        self.t_max = float("-inf")


def _collect(doc: ChromeDocument) -> KinetoEvents | None:
    if doc.span is None or doc.separator is None:
        return None
    raw = doc.raw
    start, end = doc.span
    out = KinetoEvents(metadata=dict(doc.metadata))
    state = _State()
    pos = start
    while pos < end:
        nxt = raw.find(doc.separator, pos + CHUNK_BYTES, end)
        nxt = end if nxt < 0 else nxt
        _chunk(_EVENT.findall(raw, pos, nxt), out, state)
        pos = nxt
    x_events = raw.count(b'"ph": "X"', start, end)  # Kineto's spacing; the regexes below cover any other
    if x_events != state.matched:
        x_events = len(_X.findall(raw, start, end))
    traces = raw.count(b'"cat": "Trace"', start, end) and len(_TRACE_SPAN.findall(raw, start, end))
    if state.matched + traces - state.categories.get("Trace", 0) != x_events:
        return None  # some X event is in a layout the regex does not read
    if traces:
        state.categories["Trace"] = traces
    if not (out.ops or out.device or out.annotations):
        return None
    out.t_min, out.t_max = state.t_min, state.t_max
    out.events = raw.count(b'"ph": "', start, end) or len(_ANY_EVENT.findall(raw, start, end))
    out.categories = state.categories
    return out


def _chunk(matches: list[tuple], out: KinetoEvents, state: _State) -> None:
    """Add one chunk's matched events, column by column (C-level map/zip/itemgetter, not a loop per event)."""
    if not matches:
        return
    state.matched += len(matches)
    cat_c, name_c, pid_c, tid_c, ts_c, dur_c, rest_c = zip(*matches, strict=True)
    del matches
    counts = collections.Counter(cat_c)
    for c, n in counts.items():
        key = c.decode()
        state.categories[key] = state.categories.get(key, 0) + n
    by_cat: dict[bytes, list[int]] = {c: [] for c in counts}
    for i, c in enumerate(cat_c):
        by_cat[c].append(i)
    names, ids = state.names, state.ids
    for n in set(name_c).difference(names):
        try:
            names[n] = orjson.loads(b'"' + n + b'"') if b"\\" in n else n.decode()
        except orjson.JSONDecodeError:
            raise _NotKineto() from None
    for v in (set(pid_c) | set(tid_c)).difference(ids):
        ids[v] = _id(v)
    ts_all = list(map(float, ts_c))
    dur_all = list(map(float, dur_c))
    if min(dur_all) < 0:
        raise _NotKineto()
    live = [i for c, idx in by_cat.items() if c != b"Trace" for i in idx]
    if live:
        state.t_min = min(state.t_min, min(ts_all[i] for i in live))
        state.t_max = max(state.t_max, max(ts_all[i] + dur_all[i] for i in live))

    def column(values: tuple | list, idx: list[int]) -> list:
        return [values[idx[0]]] if len(idx) == 1 else list(operator.itemgetter(*idx)(values))

    def common(idx: list[int]) -> tuple[list, ...]:
        return (column(ts_all, idx), column(dur_all, idx), [names[n] for n in column(name_c, idx)],
                [ids[p] for p in column(pid_c, idx)], [ids[t] for t in column(tid_c, idx)])  # fmt: skip

    for cat_b, idx in by_cat.items():
        cat = cat_b.decode()
        if cat == "cpu_op":
            rest = column(rest_c, idx)
            # "External id" first and "Ev Idx" last (Kineto's order) differ between calls with the same arguments
            keys = [r[r.find(b",") + 1 : j] if r.startswith(b'"External id"') and (j := r.rfind(b'"Ev Idx"')) > r.rfind(b'"Input')
                    else r for r in rest]  # fmt: skip
            signatures = state.signatures
            for k, r in dict(zip(keys, rest, strict=True)).items():
                if k not in signatures:
                    signatures[k] = _tensor_args(_args(r)) if (b'"Input' in r or b'"input_shapes"' in r) else _NO_TENSORS
            sig = [signatures[k] for k in keys]
            shapes, strides, dtypes, nbytes = zip(*sig, strict=True)
            out.ops.extend(zip(*common(idx), [None] * len(idx), shapes, strides, dtypes, nbytes, strict=True))
        elif cat == "user_annotation":
            out.annotations.extend(zip(*common(idx), strict=True))
        elif cat == "python_function":
            out.python.extend(zip(*common(idx), strict=True))
    runtime_idx = sorted(i for c, idx in by_cat.items() if c.decode() in KINETO_RUNTIME_CATEGORIES for i in idx)
    device_idx = sorted(i for c, idx in by_cat.items() if c.decode() in KINETO_DEVICE_CATEGORIES for i in idx)
    for i in runtime_idx:
        a = _args(rest_c[i])
        size = a.get("bytes", a.get("size"))
        out.runtime.append((ts_all[i], dur_all[i], names[name_c[i]], ids[pid_c[i]], ids[tid_c[i]], a.get("correlation"),
                            a.get("External id"), _int(size)))  # fmt: skip
    for i in device_idx:
        a = _args(rest_c[i])
        pid, tid = ids[pid_c[i]], ids[tid_c[i]]
        out.device.append((ts_all[i], dur_all[i], cat_c[i].decode(), names[name_c[i]], a.get("device", pid),
                           a.get("stream", tid), a.get("correlation"), _int(a.get("bytes"))))  # fmt: skip

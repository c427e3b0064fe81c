"""A fast path for Kineto's own layout: one regex over the bytes instead of a JSON parse per event.

Kineto writes every complete event with its keys in a fixed order
(``ph, cat, name, pid, tid, ts, dur, args``) and args without nested objects.
The regex reads those fields straight from the bytes; args are parsed with orjson
only where the converter needs them, and an operator's tensor arguments are
parsed once per distinct signature (a generation loop repeats a few hundred).
Anything the regex does not match — other events, other layouts — is parsed
as JSON between the matches. When the result is in doubt (a count that does not
add up, a value out of range) this returns None and the caller takes the
general path, which also words the errors.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from .chrome_json import ChromeDocument
from .kineto import _DEVICE_CATS, _RUNTIME_CATS, KinetoEvents, _int, _tensor_args

_NUM = rb"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"
_EVENT = re.compile(
    rb'\{\s*"ph":\s*"X",\s*"cat":\s*"([^"\\]*)",\s*"name":\s*"((?:[^"\\]|\\.)*)",\s*'
    rb'"pid":\s*(-?\d+|"[^"\\]*"),\s*"tid":\s*(-?\d+|"[^"\\]*"),\s*'
    rb'"ts":\s*(' + _NUM + rb'),\s*"dur":\s*(' + _NUM + rb')\s*'
    rb'(?:,\s*"args":\s*\{([^{}]*)\})?\s*\}'
)
_X = re.compile(rb'"ph":\s*"X"')
_EXTERNAL = re.compile(rb'"External id":\s*(-?\d+)')
# Fields that differ between two calls of the same operator with the same arguments.
_VOLATILE = re.compile(rb'"(?:External id|Ev Idx|Record function id|Sequence number|Fwd thread id)":\s*-?\d+\s*,?')
_GAP = b" \t\r\n,"


def fast_collect(doc: ChromeDocument) -> KinetoEvents | None:
    """The events of a Kineto-layout document, or None when the fast path cannot vouch for them."""
    if doc.span is None:
        return None
    raw = doc.raw
    start, end = doc.span
    out = KinetoEvents(metadata=dict(doc.metadata))
    ops, annotations, python, runtime, device = out.ops, out.annotations, out.python, out.runtime, out.device
    categories: dict[Any, int] = {}
    names: dict[bytes, str] = {}
    cats: dict[bytes, str] = {}
    signatures: dict[bytes, tuple] = {}
    gaps: list[bytes] = []
    t_min, t_max = float("inf"), float("-inf")
    matched = 0
    pos = start
    for m in _EVENT.finditer(raw, start, end):
        gap = raw[pos : m.start()]
        if gap.strip(_GAP):
            gaps.append(gap.strip(_GAP))
        pos = m.end()
        matched += 1
        cat_b, name_b, pid_b, tid_b, ts_b, dur_b, args = m.groups()
        cat = cats.get(cat_b)
        if cat is None:
            cat = cats[cat_b] = cat_b.decode()
        name = names.get(name_b)
        if name is None:
            name = names[name_b] = orjson.loads(b'"' + name_b + b'"') if b"\\" in name_b else name_b.decode()
        ts = float(ts_b)
        dur = float(dur_b)
        if dur < 0:
            return None
        categories[cat] = categories.get(cat, 0) + 1
        if cat == "Trace":
            continue
        if ts < t_min:
            t_min = ts
        if ts + dur > t_max:
            t_max = ts + dur
        pid = int(pid_b) if pid_b[:1] != b'"' else pid_b[1:-1].decode()
        tid = int(tid_b) if tid_b[:1] != b'"' else tid_b[1:-1].decode()
        if cat == "cpu_op":
            ext = None
            shapes = strides = dtypes = None
            nbytes = 0
            if args:
                e = _EXTERNAL.search(args)
                ext = int(e.group(1)) if e else None
                if b'"Input' in args:
                    key = _VOLATILE.sub(b"", args)
                    sig = signatures.get(key)
                    if sig is None:
                        sig = signatures[key] = _tensor_args(orjson.loads(b"{" + args + b"}"))
                    shapes, strides, dtypes, nbytes = sig
            ops.append((ts, dur, name, pid, tid, ext, shapes, strides, dtypes, nbytes))
        elif cat == "user_annotation":
            annotations.append((ts, dur, name, pid, tid))
        elif cat == "python_function":
            python.append((ts, dur, name, pid, tid))
        elif cat in _RUNTIME_CATS or cat in _DEVICE_CATS:
            a = orjson.loads(b"{" + args + b"}") if args else {}
            if cat in _RUNTIME_CATS:
                size = a.get("bytes", a.get("size"))
                runtime.append((ts, dur, name, pid, tid, a.get("correlation"), a.get("External id"), _int(size)))
            else:
                device.append((ts, dur, cat, name, a.get("device", pid), a.get("stream", tid), a.get("correlation"),
                               _int(a.get("bytes"))))  # fmt: skip
    tail = raw[pos:end].strip(_GAP)
    if tail:
        gaps.append(tail)
    others = 0
    for gap in gaps:  # metadata, instant and flow events (and any X event the regex did not take)
        try:
            events = orjson.loads(b"[" + gap + b"]")
        except orjson.JSONDecodeError:
            return None
        for ev in events:
            if type(ev) is not dict or ev.get("ph") == "X":
                return None  # let the general path read (and judge) it
            others += 1
            if ev.get("ph") == "M" and ev.get("name") == "thread_name":
                a = ev.get("args")
                if isinstance(a, dict) and isinstance(a.get("name"), str):
                    out.thread_names[(ev.get("pid"), ev.get("tid"))] = a["name"]
    if len(_X.findall(raw, start, end)) != matched:
        return None  # an X event hid where the regex could not see it
    if not (ops or device or annotations):
        return None
    out.t_min, out.t_max, out.events, out.categories = t_min, t_max, matched + others, categories
    return out

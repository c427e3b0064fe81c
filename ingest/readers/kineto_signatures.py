"""The cache key of a Kineto operator's tensor arguments: its raw ``args`` without the fields Kineto numbers per
call, so that equal keys mean equal tensors (`kineto_stream` decodes each distinct signature once)."""

from __future__ import annotations

import re

__all__ = ["signature_key", "signature_keys"]

_WS = b" \t\r\n"
# Fields Kineto numbers per call (no tensor field is among them): cut from a key, equal keys mean equal tensors.
_NUMBERED = re.compile(rb'"(?:External id|Profiler Event Index|Ev Idx|Sequence number|Record function id|Fwd thread id)"'
                       rb"\s*:\s*-?\d+\s*,?")
_KINETO_HEAD, _KINETO_TAIL, _KINETO_END = b'{\n      "External id": ', b', "Ev Idx": ', b"\n    }"


def signature_keys(raws: list[bytes]) -> list[bytes]:
    """`signature_key` of each of a slice's operator args; where the first is not in Kineto's own layout (an older
    Kineto's: its numbered fields anywhere), the numbered fields cut by one regex pass over the slice (each key is
    then `signature_key`'s older-layout key: any of the forms is a valid key, none equal to another form's)."""
    if not raws or _kineto_own(raws[0]) is not None:
        return list(map(signature_key, raws))
    joined = b"\0".join(raws)  # a NUL byte is no JSON text's: the keys split where the args were joined
    if joined.count(b"\0") != len(raws) - 1:
        return list(map(signature_key, raws))
    return _NUMBERED.sub(b"", joined).split(b"\0")


def _kineto_own(raw: bytes) -> bytes | None:
    """The key of args in Kineto's own layout (``{"External id": N, ..., "Ev Idx": M}``: both numbers cut), else None."""
    head, _, rest = raw.partition(b",")
    key, cut, tail = rest.rpartition(_KINETO_TAIL)
    if (cut and head.startswith(_KINETO_HEAD) and head[len(_KINETO_HEAD) :].isdigit()
            and tail.endswith(_KINETO_END) and tail[: -len(_KINETO_END)].isdigit()):  # fmt: skip
        return key
    return None


def signature_key(raw: bytes) -> bytes:
    """Kineto's cpu_op args ``{"External id": N, ...tensor fields..., "Ev Idx": M}`` without the two numbered
    fields (equal keys: equal tensor fields, since what is cut is only those numbers); other args as they are."""
    key = _kineto_own(raw)
    if key is not None:  # Kineto's own layout: quick
        return key
    head = raw.partition(b",")[0]
    comma = len(head)
    head = head.split(b":")
    if len(head) != 2 or head[0].lstrip(b"{ \t\r\n") != b'"External id"' or not head[1].strip(_WS).lstrip(b"-").isdigit():
        return _NUMBERED.sub(b"", raw)  # an older layout: its per-call numbers out, wherever they are
    tail = raw.rfind(b', "Ev Idx": ')
    if tail > comma and raw[tail + 12 :].rstrip(b" \t\r\n}").isdigit():
        return raw[comma + 1 : tail]
    return raw[comma + 1 :]

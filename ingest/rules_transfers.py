"""The transfer rule and the copies' directions (`copy_directions`, `call_directions`).

The rule's statement is in `rules`. The sync rule and the engine lanes read the directions too.
"""

from __future__ import annotations

import numpy as np

from .events import NONE, EventKind
from .kineto_vocabulary import copy_direction, is_host_copy
from .linked import DIRECTIONS, EventRule, Findings, Linked
from .schema import Direction, SignalKind

# cudaMemcpyKind, hipMemcpyKind and aclrtMemcpyKind share their numbering (4: default / unified: not a direction)
COPY_KINDS = {1: Direction.H2D, 2: Direction.D2H, 3: Direction.D2D}  # cuda/hipMemcpyKind
HOST_TO_HOST = 0
DEFAULT_KIND = 4  # cuda/hipMemcpyDefault: the runtime tells the direction from the pointers (unified addressing)
COPY_CALL_PREFIXES = ("cudaMemcpy", "hipMemcpy", "aclrtMemcpy", "cuMemcpy", "hipMemcpyDtoH", "hipMemcpyHtoD")


def is_copy_call(name: str) -> bool:
    """A runtime call that copies (``cudaMemcpyAsync``, ``hipMemcpyWithStream``, ``aclrtMemcpy``...)."""
    return name.startswith(COPY_CALL_PREFIXES)


def is_sync_copy_call(name: str) -> bool:
    """A copy call that returns only once the copy is done (no ``Async`` in its name)."""
    return is_copy_call(name) and "Async" not in name


def copy_directions(linked: Linked) -> tuple[np.ndarray, np.ndarray]:
    """(COPY rows, their `Direction` index into list(Direction)): the launching call's kind argument, else the
    copy's own kind argument, else its label; a label that says nothing reads as d2d (what a device-side copy is).
    A default kind (`DEFAULT_KIND`: the runtime chose the direction from the pointers) leaves a label that says
    host->device or device->host as it is, and makes any other unknown (roctracer labels such copies "DtoD").
    Worked out once per run (the transfer and sync rules and the lanes all ask)."""
    if linked.copies is None:
        linked.copies = _copy_directions(linked)
    return linked.copies


def _copy_directions(linked: Linked) -> tuple[np.ndarray, np.ndarray]:
    rows = linked.rows(EventKind.COPY)
    directions = list(Direction)
    by_label = np.array([directions.index(copy_direction(t) or Direction.D2D) if t else directions.index(Direction.D2D)
                         for t in linked.texts], dtype=np.int64)  # fmt: skip
    kinds = _copy_kinds(linked, rows)
    out = _kind_says(kinds, by_label[linked.a["name"][rows]])
    return rows, np.where((kinds == DEFAULT_KIND) & (out == directions.index(Direction.D2D)),
                          directions.index(Direction.UNKNOWN), out)


def _copy_kinds(linked: Linked, rows: np.ndarray) -> np.ndarray:
    """The kind argument of each copy: its launching call's, else its own (NONE when neither has one)."""
    a, launcher = linked.a, linked.links.launcher[rows]
    kind = np.where(launcher >= 0, a["copy_kind"][np.maximum(launcher, 0)], NONE)
    return np.where(kind == NONE, a["copy_kind"][rows], kind)


def _kind_says(kind: np.ndarray, otherwise: np.ndarray) -> np.ndarray:
    """Direction indices (into `DIRECTIONS`): what a copy kind argument says (`COPY_KINDS`), else `otherwise`."""
    for code, direction in COPY_KINDS.items():
        otherwise = np.where(kind == code, DIRECTIONS.index(direction), otherwise)
    return otherwise


def _transfers(linked: Linked, out: Findings) -> None:
    a, links = linked.a, linked.links
    directions = list(Direction)
    rows, where = copy_directions(linked)
    launcher = links.launcher[rows]
    nbytes = np.where(a["bytes"][rows] != NONE, a["bytes"][rows],
                      np.where(launcher >= 0, a["bytes"][np.maximum(launcher, 0)], NONE))  # fmt: skip
    nbytes = np.where(nbytes == NONE, 0, np.maximum(nbytes, 0))
    # a host-to-host copy crosses no device boundary: its kind argument says so, or, without a copy kind, its label
    kind = _copy_kinds(linked, rows)
    host_only = (kind == HOST_TO_HOST) | (~np.isin(kind, list(COPY_KINDS)) & linked.names_where(is_host_copy)[a["name"][rows]])
    keep = ~host_only
    rows, where, nbytes, call = rows[keep], where[keep], nbytes[keep], launcher[keep]
    del launcher, host_only, keep
    # the reason, once per distinct (label, call's name, the call's kind when it is a copy kind, direction): one int64
    # key a copy (codes < len(texts) + 1, kinds < 4, directions < 8), its words made in row order
    n_texts, kinds = len(linked.texts) + 1, sorted(COPY_KINDS)
    kind = np.where(call >= 0, np.asarray(a["copy_kind"][np.maximum(call, 0)]), NONE)
    key = np.where(call >= 0, np.asarray(a["name"][np.maximum(call, 0)]) + 1, 0).astype(np.int64)
    del call
    key += np.asarray(a["name"][rows]).astype(np.int64) * n_texts
    key *= len(kinds) + 1
    for i, k in enumerate(kinds):
        key += np.where(kind == k, i + 1, 0)
    del kind
    key = key * len(directions) + where
    keys, first, which = np.unique(key, return_index=True, return_inverse=True)
    del key
    reasons = np.zeros(len(keys), dtype=np.int32)
    for k in np.argsort(first, kind="stable").tolist():
        rest, d = divmod(int(keys[k]), len(directions))
        rest, kind_at = divmod(rest, len(kinds) + 1)
        label_code, call_code = divmod(rest, n_texts)
        label = linked.texts[label_code] or ""
        said = copy_direction(label)
        # where the call's kind argument overrode what the label says, the reason says both
        reasons[k] = out.word(f"{label}; {linked.texts[call_code - 1] or ''} kind {kinds[kind_at - 1]}: {directions[d].value}"
                              if kind_at and said is not None and said is not directions[d] else label)
    out.transfers.extend(len(rows), event=rows, direction=where, bytes=nbytes, reason=reasons[which.reshape(-1)])
    # runtime copy calls that launched nothing the trace shows (no device activity recorded, or Ascend's aclrtMemcpy)
    calls = linked.rows(EventKind.RUNTIME)
    copy_call = linked.names_where(is_copy_call)[a["name"][calls]]
    launched = np.zeros(len(a["kind"]), dtype=bool)
    launched[links.launcher[links.launcher >= 0]] = True
    for row in calls[copy_call & ~launched[calls]].tolist():
        kind = int(a["copy_kind"][row])
        if kind == HOST_TO_HOST:
            continue
        direction = COPY_KINDS.get(kind) or copy_direction(linked.name(row)) or Direction.UNKNOWN
        out.transfer(row, direction, max(int(a["bytes"][row]), 0),
                     linked.name(row) + (f" kind {kind}" if kind in COPY_KINDS else ""))



def call_directions(linked: Linked, calls: np.ndarray) -> np.ndarray:
    """Per copy call: its direction as an index into `DIRECTIONS`: its kind argument, else the device copy it
    launched (the last one), else its name, else unknown."""
    a = linked.a
    out = np.full(len(calls), DIRECTIONS.index(Direction.UNKNOWN), dtype=np.int8)
    if not len(calls):
        return out
    names, at = np.unique(np.asarray(a["name"][calls]), return_inverse=True)
    said = [copy_direction(linked.texts[c] or "") for c in names.tolist()]
    by_name = np.array([DIRECTIONS.index(d) if d is not None else -1 for d in said], dtype=np.int8)[at.reshape(-1)]
    out = np.where(by_name >= 0, by_name, out)
    rows, where = copy_directions(linked)
    launcher = np.asarray(linked.links.launcher[rows]).astype(np.int64)
    launcher, where = launcher[launcher >= 0], where[launcher >= 0]
    if len(launcher):
        order = np.argsort(launcher, kind="stable")  # a call's copies in file order: its last one found
        launcher, where = launcher[order], where[order]
        pos = np.maximum(np.searchsorted(launcher, calls, side="right") - 1, 0)
        out = np.where(launcher[pos] == calls, where[pos], out)
    return _kind_says(np.asarray(a["copy_kind"][calls]), out).astype(np.int8)



TRANSFER_RULE = EventRule(
    "transfer", "device copies, direction from the launching call's kind argument, else the label; runtime copy calls "
    "without device work", (SignalKind.TRANSFER_H2D, SignalKind.TRANSFER_D2H, SignalKind.TRANSFER_D2D,
                            SignalKind.TRANSFER_UNKNOWN), _transfers)  # fmt: skip

__all__ = ["COPY_CALL_PREFIXES", "COPY_KINDS", "DEFAULT_KIND", "HOST_TO_HOST", "TRANSFER_RULE", "call_directions",
           "copy_directions", "is_copy_call", "is_sync_copy_call"]

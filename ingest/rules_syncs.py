"""The sync rule: the host waited for the device, blamed on the operator that caused it.

The rule's statement is in `rules`. A wait in the compiler's time (`rules_compile.while_compiling`) is the
compiler's, not a sync.
"""

from __future__ import annotations

import numpy as np

from .catalog import BOOL_INDEX_OPS, SYNC_OPS, Cause, OpCall, cause_hint, sync_cause
from .events import EventKind
from .kineto_vocabulary import SYNC_RUNTIME_CALLS
from .linked import DIRECTIONS, SIGNAL_KINDS, EventRule, Findings, Linked
from .rules_compile import while_compiling
from .rules_transfers import call_directions, copy_directions, is_sync_copy_call
from .schema import Direction, SignalKind


def _syncs(linked: Linked, out: Findings) -> None:
    """Device evidence (a waiting runtime call, a synchronous d2h copy call, a device wait no such call launched, a d2h
    copy inside a sync operator), taken by start: the outermost sync operator around it (or the indexing operator
    around that one, when a boolean mask indexes) is the signal, its name the reason, once per operator; evidence in
    no sync operator (or in one no sync rule names) is a sync call in its operator, once per operator. Over arrays:
    a trace of a device wait per operator holds millions."""
    a, links = linked.a, linked.links
    calls = linked.rows(EventKind.RUNTIME)
    call_names = np.asarray(a["name"][calls])
    waits = calls[linked.names_where(lambda t: t in SYNC_RUNTIME_CALLS)[call_names]]
    sync_copies = calls[linked.names_where(is_sync_copy_call)[call_names]]
    del calls, call_names
    d2h = sync_copies[call_directions(linked, sync_copies) == DIRECTIONS.index(Direction.D2H)]
    device_waits = linked.rows(EventKind.WAIT)
    device_waits = device_waits[~np.isin(np.asarray(links.launcher[device_waits]), np.concatenate([waits, d2h]))]
    sync_op = linked.names_where(lambda t: t in SYNC_OPS)
    rows = np.concatenate([waits, d2h, device_waits, _reads_back(linked, sync_op)]).astype(np.int64)
    del waits, d2h, device_waits
    rows = rows[~while_compiling(linked, rows)]  # the compiler's own waits (autotuning): part of its compile
    if not len(rows):
        return
    rows = rows[np.lexsort((rows, np.asarray(a["start_ns"][rows])))]  # by start, then row
    op = np.asarray(links.op[rows]).astype(np.int64)
    at = _outermost(linked, op, sync_op)
    parent = np.where(at >= 0, np.asarray(links.op[np.maximum(at, 0)]), -1).astype(np.int64)
    bool_index = linked.names_where(lambda t: t in BOOL_INDEX_OPS)
    index = (parent >= 0) & bool_index[np.asarray(a["name"][np.maximum(parent, 0)])]
    subject = np.where(index, parent, at)
    # the sync rule of each subject, per distinct (name, boolean index); -1: no subject
    subject_key = np.where(at >= 0, np.asarray(a["name"][np.maximum(subject, 0)]).astype(np.int64) * 2 + index, -1)
    pairs, pair = np.unique(subject_key, return_inverse=True)
    rules = [None if k < 0 else sync_cause(OpCall(linked.texts[k // 2] or "", bool_index=bool(k % 2))) for k in pairs.tolist()]
    pair = pair.reshape(-1)
    named = np.array([r is not None for r in rules])[pair]
    del parent, index, subject_key
    key = np.where(named, subject, op)  # what each claims, in order: one signal an operator (-1: none, each signals)
    claimed = np.flatnonzero(key >= 0)
    emit = key < 0
    emit[claimed[np.unique(key[claimed], return_index=True)[1]]] = True
    emit = np.flatnonzero(emit)
    named, rows, op, subject, pair = named[emit], rows[emit], op[emit], subject[emit], pair[emit]
    del key, claimed, emit
    # what each says: a named one its rule's words, a call its name's and its operator's (one key per distinct saying)
    texts = len(linked.texts) + 1
    row_name = np.asarray(a["name"][rows]).astype(np.int64)
    op_name = np.where(op >= 0, np.asarray(a["name"][np.maximum(op, 0)]), -1).astype(np.int64)
    sayings, which = np.unique(np.where(named, pair, len(pairs) + row_name * texts + op_name + 1), return_inverse=True)
    which = which.reshape(-1)
    words = np.zeros((len(sayings), 3), dtype=np.int32)
    for w in np.argsort(np.unique(which, return_index=True)[1], kind="stable").tolist():  # as first said: words in order
        k = int(sayings[w])
        if k < len(pairs):
            rule = rules[k]
            said = (rule.cause.value, linked.texts[int(pairs[k]) // 2] or "", rule.hint)  # type: ignore[union-attr]
        else:
            name, op_code = divmod(k - len(pairs), texts)
            call = linked.texts[name] or ""
            said = (call, (linked.texts[op_code - 1] or "") if op_code else call, f"{call}: " + cause_hint(Cause.SYNC_CALL))
        words[w] = [out.word(t) for t in said]
    words = words[which]
    out.signals.extend(len(rows), event=np.where(named, subject, rows), op=np.where(named, subject, op),
                       kind=SIGNAL_KINDS.index(SignalKind.SYNC), reason=words[:, 0], name_text=0, name_word=words[:, 1],
                       note=words[:, 2], bytes=0)  # fmt: skip


def _outermost(linked: Linked, op: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Per operator row of `op` (-1: none): the outermost operator around it, itself included, whose name `flag`
    marks (-1: none), walking all of them out a level at a time."""
    a, links = linked.a, linked.links
    found = np.full(len(op), -1, dtype=np.int64)
    at = np.array(op, dtype=np.int64)
    live = np.flatnonzero(at >= 0)
    while len(live):
        cur = at[live]
        hit = flag[np.asarray(a["name"][cur])]
        found[live[hit]] = cur[hit]
        at[live] = np.asarray(links.op[cur])
        live = live[at[live] >= 0]
    return found


def _reads_back(linked: Linked, sync_op: np.ndarray) -> np.ndarray:
    """Device->host copies inside an operator of a sync kind (``.item()`` copies the scalar back and returns it: the
    host waits for that copy even where the trace holds no synchronize call)."""
    rows, where = copy_directions(linked)
    d2h = rows[where == DIRECTIONS.index(Direction.D2H)]
    return d2h[_outermost(linked, np.asarray(linked.links.op[d2h]), sync_op) >= 0]



SYNC_RULE = EventRule("sync", "the host waited for the device: a waiting runtime call, a synchronous d2h copy or a "
                      "device wait, inside the operator that caused it", (SignalKind.SYNC,), _syncs)

__all__ = ["SYNC_RULE"]

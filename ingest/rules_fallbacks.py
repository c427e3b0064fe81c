"""The fallback and host-bounce rules: work and data the host took from the device.

The rules' statements are in `rules`: ai-cpu, inferred fallback (`inferred_fallback_ops`), logged fallback, and the
host bounces an explain dump counts (`HOST_BOUNCE_SITES`, `bounce_kind`).
"""

from __future__ import annotations

import re

import numpy as np

from .catalog import NO_WORK_OPS, Cause, cause_hint, logged_cause
from .events import KIND_CODES, EventKind
from .linked import EventRule, Findings, Linked
from .rules_compile import while_compiling
from .schema import SignalKind

AI_CPU = "AI_CPU"
AI_CPU_NOTE = "the device ran this kernel on its AI CPU (no AI Core kernel for its dtype or shape): try another dtype or shape"
# the records of an explain dump (a backend's counts, no timeline) that rules read, as the dump's keys name them
COUNTED_FALLBACK_RECORD = "cpu_fallback_by_op"  # fallbacks counted by operator, the reason as the backend names it
BOUNCE_RECORD = "hidden_host_bounce"  # data moved through the host, counted by site
HOST_BOUNCE_SITES: dict[str, SignalKind] = {  # a dump's bounce site -> its kind (any other site: host_bounce/other)
    "copy_d2d_host_bounce": SignalKind.BOUNCE_DTYPE,  # a device->device copy the device cannot do (a dtype change)
    "strided_v2v_cpu_fallback": SignalKind.BOUNCE_STRIDED,
    "op_arg_through_host": SignalKind.BOUNCE_OTHER,
    "copy_h2d_staging": SignalKind.BOUNCE_OTHER,
    "copy_h2d_noncontig_dst": SignalKind.BOUNCE_OTHER,
}
EXCLUDED_SITE_SUFFIX = "_batch_to_per_entry"  # v2v_/host_batch_to_per_entry: bookkeeping, not part of the totals
_ALIGN = re.compile(r"(?:multiple of|aligned to|alignment of)\s*(\d+)")


def bounce_kind(site: str) -> SignalKind | None:
    """The signal kind of a host-bounce site a dump counts (None: bookkeeping, not a bounce)."""
    if site.endswith(EXCLUDED_SITE_SUFFIX):
        return None
    return HOST_BOUNCE_SITES.get(site, SignalKind.BOUNCE_OTHER)


def _ai_cpu(linked: Linked, out: Findings) -> None:
    a, links = linked.a, linked.links
    on_ai_cpu = linked.names_where(lambda t: t == AI_CPU)
    kernels = linked.rows(EventKind.KERNEL)
    rows = kernels[on_ai_cpu[a["unit"][kernels]]]
    op = np.asarray(links.op[rows], dtype=np.int64)
    out.signals_of(rows, op, SignalKind.CPU_FALLBACK, "ai-cpu", a["name"][np.where(op >= 0, op, rows)], AI_CPU_NOTE)
    placed = linked.rows(EventKind.PLACEMENT)  # operators a profile's totals place on the AI CPU (op_statistic)
    placed = placed[on_ai_cpu[a["unit"][placed]]]
    out.signals_of(placed, np.full(len(placed), -1, dtype=np.int64), SignalKind.CPU_FALLBACK, "ai-cpu",
                   a["name"][placed], AI_CPU_NOTE)  # fmt: skip


def _inferred_fallbacks(linked: Linked, out: Findings) -> None:
    if not linked.infer_fallback:
        return
    for op in inferred_fallback_ops(linked).tolist():
        out.signal(op, op, SignalKind.CPU_FALLBACK, Cause.NO_DEVICE_WORK.value, linked.name(op),
                   cause_hint(Cause.NO_DEVICE_WORK), linked.arguments[linked.a["args"][op]][3])  # fmt: skip


def _logged_fallbacks(linked: Linked, out: Findings) -> None:
    device = linked.a["device"]
    for row, logged in linked.logged(EventKind.PLACEMENT):
        if int(device[row]) != -1 or logged.record not in (None, COUNTED_FALLBACK_RECORD):
            continue  # the log says it ran on a device, or the record is not about an operator
        if logged.record == COUNTED_FALLBACK_RECORD:  # the backend's own classing, as it names it
            out.signal(row, -1, SignalKind.CPU_FALLBACK, logged.reason, linked.given_name(row), logged.fix)
            continue
        cause = logged_cause(logged.reason)
        reason = f"{cause.value} ({logged.reason})" if cause is not None else None
        out.signal(row, -1, SignalKind.CPU_FALLBACK, reason, linked.name(row),
                   logged.fix or _fallback_note(cause, logged.reason))  # fmt: skip


def _host_bounces(linked: Linked, out: Findings) -> None:
    nbytes = linked.a["bytes"]
    for row, logged in linked.logged(EventKind.PLACEMENT):
        if logged.record != BOUNCE_RECORD or (kind := bounce_kind(site := linked.name(row))) is None:
            continue
        out.signal(row, -1, kind, site, None, logged.fix, max(int(nbytes[row]), 0))



def _fallback_note(cause: Cause | None, text: str | None) -> str | None:
    """The fix a logged fallback reason points to, where its words say enough (an alignment's multiple, a dtype)."""
    if cause is Cause.UNALIGNED and text and (m := _ALIGN.search(text)):
        return cause_hint(Cause.UNALIGNED, multiple_of=m.group(1))
    if cause is Cause.DTYPE_NOT_SUPPORTED:
        return cause_hint(Cause.DTYPE_NOT_SUPPORTED, dtype="the device's dtype (e.g. float16)")
    return None


def inferred_fallback_ops(linked: Linked) -> np.ndarray:
    """Leaf operators that launched no device work, on a thread whose operators launch some, that take tensors and
    are not of a kind that never computes, outside the compiler's phases (its tracing runs operators on fake tensors):
    a guess, as Kineto records no tensor devices."""
    a, links = linked.a, linked.links
    ops = linked.rows(EventKind.OP)
    if not len(ops):
        return ops
    has_child = np.zeros(len(a["kind"]), dtype=bool)
    parents = links.op[ops]
    has_child[parents[parents >= 0]] = True
    launched = launched_ops(linked)
    calls = linked.rows(EventKind.RUNTIME)
    launching = np.zeros(max(len(linked.threads), 1), dtype=bool)  # threads whose operators launch device work
    launching[a["thread"][calls[links.op[calls] >= 0]]] = True
    on_thread = launching[a["thread"][ops]]
    computes = linked.names_where(lambda t: t not in NO_WORK_OPS)[a["name"][ops]]
    typed = np.array([bool(args[2]) and any(args[2].split(";")) for args in linked.arguments], dtype=bool)[a["args"][ops]]
    return ops[~has_child[ops] & ~launched[ops] & on_thread & computes & typed & ~while_compiling(linked, ops)]


def launched_ops(linked: Linked) -> np.ndarray:
    """A flag per event row: an operator that launched device work itself or through an operator inside it."""
    links = linked.links
    flag = np.zeros(len(linked.kind), dtype=bool)
    device = np.isin(linked.kind, [KIND_CODES[k] for k in (EventKind.KERNEL, EventKind.COPY, EventKind.MEMSET)])
    up = links.op[device]
    del device
    pending = np.zeros(len(flag), dtype=bool)  # operators to flag next, one level up at a time (flags: no sort)
    pending[up[up >= 0]] = True
    while pending.any():
        pending &= ~flag
        flag |= pending
        up = links.op[pending]
        pending[:] = False
        pending[up[up >= 0]] = True
    return flag


AI_CPU_RULE = EventRule("ai-cpu", "a kernel the device ran on its AI CPU", (SignalKind.CPU_FALLBACK,), _ai_cpu)
INFERRED_FALLBACK_RULE = EventRule("inferred-fallback", "a leaf operator that launched no device work (asked for: a "
                                   "guess)", (SignalKind.CPU_FALLBACK,), _inferred_fallbacks)  # fmt: skip
HOST_BOUNCE_RULE = EventRule("host-bounce", "data a backend's dump counts by site as moved through the host; the site "
                             "names the kind", (SignalKind.BOUNCE_DTYPE, SignalKind.BOUNCE_STRIDED,
                                                SignalKind.BOUNCE_OTHER), _host_bounces)  # fmt: skip
LOGGED_FALLBACK_RULE = EventRule("logged-fallback", "an operator a backend's log places on the host; its cause from "
                                 "the logged words", (SignalKind.CPU_FALLBACK,), _logged_fallbacks)  # fmt: skip

__all__ = ["AI_CPU", "AI_CPU_NOTE", "AI_CPU_RULE", "BOUNCE_RECORD", "COUNTED_FALLBACK_RECORD", "EXCLUDED_SITE_SUFFIX",
           "HOST_BOUNCE_RULE", "HOST_BOUNCE_SITES", "INFERRED_FALLBACK_RULE", "LOGGED_FALLBACK_RULE", "bounce_kind",
           "inferred_fallback_ops", "launched_ops"]

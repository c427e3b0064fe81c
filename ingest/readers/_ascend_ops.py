"""The torch_npu trace view's spans split by role, kernels paired with the operators that launched them, and the
operators' nesting, each a block, a key partition or a time bucket at a time (bounded memory, issue 19).

Per-span and per-operator results are `DiskColumn`s (on disk past HOLD_ROWS values). Launches: the
``torch_to_npu`` flow endpoints that bound to a span are partitioned by flow id on disk and each partition
paired alone (a flow's ``s`` and ``f`` share a partition). Nesting: operators are distributed to time
buckets by start (bounds from a sample, as `_chrome_bind` does) and each bucket is swept sorted by
(thread, start, longest first) with each thread's stack of open operators carried to the next bucket:
an operator's parent is the top of its thread's stack once the operators that ended by its start are
popped; an operator is marked launched when it or one inside it launched a kernel.
"""

from __future__ import annotations

import numpy as np

from ..schema import SliceKind
from . import _chrome_events
from ._chrome_bind import SAMPLE_ROWS, SPILL_HOLD, Scatter, spread, time_bounds
from ._chrome_events import PHASES, ChromeEvents, blocks
from ._chrome_slices import KINDS
from ._spill import DiskColumn

ROLES = ("other", "python", "cann", "hardware", "overlap")
SWEEP_ROWS = 1 << 16  # operators of a sorted time bucket swept at a time (as Python objects)


class Spans:
    """The spans split by what they are, in one pass a block at a time, each a `DiskColumn`: operators (span
    numbers), each span's operator number (-1: none), queue spans and device-side spans, the CANN calls that
    sync or compile online and the AI CPU kernels (span numbers), each span's slice kind where it is not its
    lane's (position in `_chrome_slices.KINDS`, -1: its lane's); the kernel count and the host's main thread."""

    def __init__(self) -> None:
        hold = _chrome_events.HOLD_ROWS
        self.ops, self.queue, self.device = DiskColumn("q", hold), DiskColumn("q", hold), DiskColumn("q", hold)
        self.op_of_span = DiskColumn("i", hold)
        self.calls, self.ai_cpu = DiskColumn("q", SPILL_HOLD), DiskColumn("q", SPILL_HOLD)
        self.kinds = DiskColumn("b", hold)
        self.kernels, self.main_tid = 0, -1

    @classmethod
    def split(cls, ev: ChromeEvents, role_of: np.ndarray, aten: np.ndarray, cpu_op: int, sync_call: np.ndarray,
              compile_call: np.ndarray, ai_cpu_args: np.ndarray) -> Spans:  # fmt: skip
        out = cls()
        sync, compile_, fallback = (KINDS.index(k.value) for k in (SliceKind.SYNC, SliceKind.COMPILE, SliceKind.FALLBACK))
        op_tids: dict[int, int] = {}
        for lo, hi in blocks(len(ev)):
            name, role = ev.read("name", lo, hi), role_of[ev.read("pid", lo, hi)]
            number = np.arange(lo, hi, dtype=np.int64)
            python = role == ROLES.index("python")
            is_op = python & (aten[name] | (ev.read("cat", lo, hi) == cpu_op))
            first = len(out.ops)
            out.ops.extend(number[is_op])
            op_id = np.full(hi - lo, -1, dtype=np.int32)
            op_id[is_op] = np.arange(first, len(out.ops), dtype=np.int32)
            out.op_of_span.extend(op_id)
            out.queue.extend(number[python & ~is_op])
            out.device.extend(number[~python])
            cann = role == ROLES.index("cann")
            syncs, compiles = cann & sync_call[name], cann & compile_call[name]
            out.calls.extend(number[syncs | compiles])
            hardware = role == ROLES.index("hardware")
            ai_cpu = hardware & ai_cpu_args[ev.read("args", lo, hi) + 1]
            out.ai_cpu.extend(number[ai_cpu])
            kinds = np.full(hi - lo, -1, dtype=np.int8)  # an AI CPU kernel's kind wins, then a compile's
            kinds[syncs], kinds[compiles], kinds[ai_cpu] = sync, compile_, fallback
            out.kinds.extend(kinds)
            out.kernels += int(np.count_nonzero(hardware))
            tids, counts = np.unique(ev.read("tid", lo, hi)[is_op], return_counts=True)
            for t, c in zip(tids.tolist(), counts.tolist(), strict=True):
                op_tids[t] = op_tids.get(t, 0) + c
        if op_tids:  # the thread with the most operators (the lowest code of those tied)
            out.main_tid = max(sorted(op_tids), key=lambda t: op_tids[t])
        return out


def launches(ev: ChromeEvents, bound: DiskColumn, op_of_span: DiskColumn, ops: int) -> tuple[DiskColumn, DiskColumn, dict[int, int]]:
    """(per span: the operator that launched it through a torch_to_npu flow, or -1; per operator: 1 if it launched
    a kernel; per flow name code: how many flows start with it). A kernel two flows end at: the later one's."""
    from . import _chrome_bind

    codes, flows = ev.values.codes, ev.flows
    to_npu, async_npu = codes.get("torch_to_npu", -1), codes.get("async_npu", -1)
    parts = max(1, -(-len(flows) // max(1, _chrome_bind.BUCKET_ROWS)))
    by_key = [[DiskColumn(t, SPILL_HOLD) for t in "qqbq"] for _ in range(parts)]  # key, span, starts, endpoint number
    flow_starts: dict[int, int] = {}
    for lo, hi in blocks(len(flows)):
        name, phase, span = flows.read("name", lo, hi), flows.read("phase", lo, hi), bound.read(lo, hi)
        names, counts = np.unique(name[phase == PHASES.index("s")], return_counts=True)
        for c, k in zip(names.tolist(), counts.tolist(), strict=True):
            flow_starts[c] = flow_starts.get(c, 0) + k
        launch = np.flatnonzero(((name == to_npu) | (flows.read("cat", lo, hi) == async_npu)) & (span >= 0))
        key = flows.read("key", lo, hi)[launch]
        spread(by_key, np.mod(key, parts), key, span[launch], phase[launch] != PHASES.index("f"), launch + lo)
    kernel_op, launcher = Scatter(len(ev), "i", ordered=True), Scatter(ops, "b")
    for columns in by_key:
        key, span, starts, number = (c.read(0, len(c)) for c in columns)
        for c in columns:
            c.close()
        starts = starts != 0
        s_key, s_span = key[starts], span[starts]
        order = np.argsort(s_key, kind="stable")  # equal ids: the first start in the file
        s_key, s_span = s_key[order], s_span[order]
        f_key, f_span, f_number = key[~starts], span[~starts], number[~starts]
        if not len(s_key) or not len(f_key):
            continue
        at = np.minimum(np.searchsorted(s_key, f_key), len(s_key) - 1)
        paired = s_key[at] == f_key
        op = op_of_span.take(s_span[at[paired]]).astype(np.int64)
        kernel_op.put(f_span[paired], op, f_number[paired])
        launcher.put(op[op >= 0], np.ones(int(np.count_nonzero(op >= 0)), dtype=np.int8))
    return kernel_op.column(), launcher.column(), flow_starts


def nest(ev: ChromeEvents, ops: DiskColumn, launcher: DiskColumn) -> tuple[DiskColumn, DiskColumn]:
    """(per operator: the operator enclosing it on its thread, or -1; per operator: 1 if it or an operator inside it
    launched a kernel)."""
    n = len(ops)
    parents, launched = Scatter(n), Scatter(n, "b")
    step = max(1, n // max(1, SAMPLE_ROWS))
    sample = [ev.gather("start", ops.read(lo, hi))[np.arange(lo, hi) % step == 0] for lo, hi in blocks(n)]
    bounds = time_bounds(sample, n)
    del sample
    buckets = [[DiskColumn(t, SPILL_HOLD) for t in "qqqqb"] for _ in range(len(bounds) + 1)]  # thread, start, end, op, launcher
    for lo, hi in blocks(n):
        index = ops.read(lo, hi)
        start = ev.gather("start", index)
        thread = (ev.gather("pid", index).astype(np.int64) << 32) | ev.gather("tid", index)
        spread(buckets, np.searchsorted(bounds, start, "right"), thread, start, start + ev.gather("dur", index),
               np.arange(lo, hi, dtype=np.int64), launcher.read(lo, hi))  # fmt: skip
    stacks: dict[int, list[list[int]]] = {}  # per thread: [end, op, launched] of its open operators, outermost first
    for columns in buckets:
        thread, start, end, op, launches = (c.read(0, len(c)) for c in columns)
        for c in columns:
            c.close()
        order = np.lexsort((-(end - start), start, thread))
        swept = [x[order] for x in (thread, start, end, op, launches)]
        del thread, start, end, op, launches, order
        for lo in range(0, len(swept[0]), SWEEP_ROWS):  # Python objects for SWEEP_ROWS operators at a time
            thread, start, end, op, launches = (x[lo : lo + SWEEP_ROWS].tolist() for x in swept)
            parent = [-1] * len(op)
            closed: list[int] = []
            closed_launched: list[int] = []
            for j in range(len(op)):
                stack = stacks.get(thread[j])
                if stack is None:
                    stack = stacks[thread[j]] = []
                while stack and stack[-1][0] <= start[j]:
                    _, o, flag = stack.pop()
                    closed.append(o)
                    closed_launched.append(flag)
                if stack:
                    parent[j] = stack[-1][1]
                stack.append([end[j], op[j], 0])
                if launches[j] > 0:
                    for entry in reversed(stack):  # it and the operators open around it
                        if entry[2]:
                            break
                        entry[2] = 1
            parents.put(np.array(op, dtype=np.int64), np.array(parent, dtype=np.int64))
            launched.put(np.array(closed, dtype=np.int64), np.array(closed_launched, dtype=np.int8))
    rest = [entry for stack in stacks.values() for entry in stack]
    launched.put(np.array([e[1] for e in rest], dtype=np.int64), np.array([e[2] for e in rest], dtype=np.int8))
    return parents.column(), launched.column()


__all__ = ["ROLES", "Spans", "launches", "nest"]

"""Predicted engine schedules: a list scheduler placing a region's recorded operators on a target's engines.

Pure (no torch). Input: the region's decoded operators with their predicted
placement, transfers, program compiles and data dependencies (tensor identity,
recorded by the predictor), and a Target. Output: engine slices (what each
engine does when, and what it idled on before) and a summary.

The model. Eager: one host thread issues operators one at a time; each device
operator costs `dispatch_ns` on the dispatch lane (and `compile_ns` on the
compiler lane when its program is new: the host stalls); the device then runs
it on its engine once the engine is free, its inputs are computed and its h2d
transfers are done. A fallback waits for its d2h transfers (and the device
work they copy), then runs on the host lane. A compiled graph is one launch
(one dispatch, one compile when new); the operators inside start as soon as
their engine and inputs allow, with no dispatch each. Every engine runs its
work in issue order. Times are ns; time = latency + max(flops/flops_per_ns,
bytes/bytes_per_ns), with the figures of the operator's kind where its engine
has them ([engines.NAME.kinds.KIND]); a host read of a device value (.item())
adds `sync_ns` after its d2h copy; after a device operator whose result's size
depends on its data (nonzero, masked_select, boolean indexing) the host waits
for it to finish, then `sync_ns`.

A compiled graph's inside is what its compile logged (aot_graph.py: the ATen operators
of its AOT graph) when the recorder kept it; else the operators the graph's code
dispatched at run time (under inductor only its extern kernels: matrix products,
attention). Each ATen operator is costed and placed like an eager device operator, on
the engine its name maps to; fusion is not modelled (each operator moves its own
operands and results: an upper bound on the graph's vector time).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from portscope.ingest.catalog import MATMUL_OPS, SCALAR_READ_OPS
from portscope.ingest.op_categories import operator_category
from portscope.ingest.schema import EngineKind, Placement, SignalKind, SliceKind

from .aot_graph import BoundNode
from .events import OpEvent, TensorInfo, TransferRecord
from .targets import Engine, Target, matches

DISPATCH, FALLBACK, TRANSFER, COMPILE, DEPENDENCY = "dispatch", "fallback", "transfer", "compile", "dependency"
_LANE_KINDS = (EngineKind.HOST, EngineKind.DISPATCH, EngineKind.COMPILER, EngineKind.DMA_H2D, EngineKind.DMA_D2H,
               EngineKind.DMA_D2D)  # fmt: skip


def estimate_flops(packet: str, inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo]) -> int:
    """FLOPs of one operator from its shapes: 2*M*N*K for matrix products, q/k/v for attention, else numel."""
    ts = [t for t in inputs if t is not None and t.shape]
    out = outputs[0] if outputs else None
    if packet in MATMUL_OPS and ts and out is not None:
        a = ts[-2] if len(ts) >= 2 else ts[0]
        return 2 * out.numel * a.shape[-1]
    if packet == "aten::linear" and len(ts) >= 2:
        return 2 * ts[0].numel * ts[1].shape[0]
    if "scaled_dot_product" in packet and len(ts) >= 3 and len(ts[0].shape) >= 2:
        q, k, v = ts[0], ts[1], ts[2]
        batch = math.prod(q.shape[:-2])
        return 2 * batch * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])
    if packet == "aten::convolution" and len(ts) >= 2 and out is not None:
        return 2 * out.numel * math.prod(ts[1].shape[1:])
    if outputs:
        return sum(t.numel for t in outputs)
    return ts[0].numel if ts else 0


@dataclasses.dataclass
class ScheduleOps:
    """A region's operators as the scheduler reads them: columns aligned by op index.

    deps[i]: indices of earlier ops whose outputs op i reads (None: a view, no work).
    transfers[i]: (direction value, bytes) copies op i needs before it runs.
    compile_ns[i]: a new program compiles at op i (a graph call: the graph's program).
    is_call[i]: op i is the call of a compiled graph; the ops after it that carry
    its graph_id and start inside its measured span are its inside (the graph's ATen
    operators, when captured, carry the call's op id).
    """

    op_id: list[int]
    name: list[str]
    placement: list[str]
    module: list[str | None]
    flops: list[int]
    bytes: list[int]
    start_ns: list[int]
    dur_ns: list[int]
    deps: list[tuple[int, ...] | None]
    graph_id: list[int | None]
    is_call: list[bool]
    transfers: dict[int, list[tuple[str, int]]] = dataclasses.field(default_factory=dict)
    compile_ns: dict[int, int] = dataclasses.field(default_factory=dict)
    syncs: set[int] = dataclasses.field(default_factory=set)  # device ops the host waits for (data-dependent shapes)

    def __len__(self) -> int:
        return len(self.name)


def ops_from_events(
    events: Sequence[OpEvent],
    outcomes: Mapping[int, tuple[Placement, Any, list[TransferRecord]]] | Sequence[Any],
    deps: Mapping[int, tuple[int, ...] | None] | None,
    compiles: Sequence[tuple[int, str, int]] = (),
    *,
    insides: Mapping[int, Sequence[BoundNode]] | None = None,
) -> ScheduleOps:
    """Scheduler input from a predicted region: decoded events, the predictor's outcomes, deps and compiles.

    insides: event index of a graph call -> its captured ATen operators; they follow the call as its inside,
    and the operators its code dispatched (carrying its graph id) are then left out (no work of their own)."""
    deps = deps or {}
    insides = insides or {}
    n = len(events)
    ops = ScheduleOps([], [], [], [], [], [], [], [], [], [], [])
    a_id, a_name, a_place, a_module, a_flops, a_bytes, a_start, a_dur, a_deps, a_graph, a_call = (
        c.append for c in (ops.op_id, ops.name, ops.placement, ops.module, ops.flops, ops.bytes, ops.start_ns,
                           ops.dur_ns, ops.deps, ops.graph_id, ops.is_call))
    row_of = [0] * n  # event index -> row
    shift = 0  # rows of captured insides so far: row = event index + shift
    call_end = -1
    call_graph = None
    replaced = False  # the open graph call's inside is its captured operators
    for i, ev in enumerate(events):
        where, _signals, transfers = outcomes[i]
        row = row_of[i] = i + shift
        gid = ev.graph_id
        inside = gid is not None and gid == call_graph and ev.start_ns < call_end
        call = gid is not None and not inside
        d = deps[i] if i in deps else ()
        if d is not None and (inside and replaced):
            d = None
        elif d and shift:
            d = tuple(row_of[j] for j in d)
        a_id(ev.op_id), a_name(ev.name), a_place(where.value), a_module(ev.module)
        a_flops(estimate_flops(ev.packet, ev.inputs, ev.outputs)), a_bytes(ev.bytes_in + ev.bytes_out)
        a_start(ev.start_ns), a_dur(max(ev.dur_ns, 1) if call else ev.dur_ns), a_deps(d), a_graph(gid), a_call(call)
        if transfers:
            ops.transfers[row] = [(t.direction.value, t.bytes) for t in transfers]
        if where is Placement.DEVICE and any(sig.kind is SignalKind.SYNC for sig in _signals):
            ops.syncs.add(row)
        if call:
            call_graph, call_end = gid, ev.start_ns + max(ev.dur_ns, 1)
            nodes = insides.get(i)
            replaced = nodes is not None
            for node in nodes or ():
                _append(ops, ev.op_id, node.name, Placement.GRAPH.value, ev.module,
                        estimate_flops(node.name.split(".", 1)[0], node.inputs, node.outputs),
                        sum(t.nbytes for t in node.inputs) + sum(t.nbytes for t in node.outputs), ev.start_ns, 0,
                        tuple(row + 1 + r for r in node.reads), gid, False)
            shift += len(nodes or ())
    for index, _key, ns in compiles:
        if 0 <= index < n:
            row = row_of[index]
            ops.compile_ns[row] = ops.compile_ns.get(row, 0) + int(ns)
    return ops


def _append(ops: ScheduleOps, op_id: int, name: str, placement: str, module: str | None, flops: int, nbytes: int,
            start_ns: int, dur_ns: int, deps: tuple[int, ...] | None, graph_id: int | None, is_call: bool) -> None:
    ops.op_id.append(op_id)
    ops.name.append(name)
    ops.placement.append(placement)
    ops.module.append(module)
    ops.flops.append(flops)
    ops.bytes.append(nbytes)
    ops.start_ns.append(start_ns)
    ops.dur_ns.append(dur_ns)
    ops.deps.append(deps)
    ops.graph_id.append(graph_id)
    ops.is_call.append(is_call)


def compiled_view(ops: ScheduleOps, *, compile_ns: int = 0, name: str = "compiled graph (what-if)") -> ScheduleOps:
    """The same work as one compiled program: every op inside one graph call, no fallback, data crosses only
    at the graph's inputs (h2d copies of ops that read nothing computed on the host)."""
    n = len(ops)
    work = [i for i in range(n) if ops.deps[i] is not None]
    host_made = {i for i in work if ops.placement[i] in (Placement.FALLBACK.value, Placement.HOST.value)}
    shift = {i: k + 1 for k, i in enumerate(work)}
    out = ScheduleOps([-1], [name], [Placement.GRAPH.value], [None], [0], [0], [0], [2**62], [()], [0], [True])
    for i in work:
        _append(out, ops.op_id[i], ops.name[i], Placement.GRAPH.value, ops.module[i], ops.flops[i], ops.bytes[i], 0, 0,
                tuple(shift[j] for j in ops.deps[i] or () if j in shift), 0, False)
        reads_host = any(j in host_made for j in ops.deps[i] or ())
        inputs = [t for t in ops.transfers.get(i, ()) if t[0] == "h2d" and not reads_host]
        if inputs:
            out.transfers.setdefault(0, []).extend(inputs)
    if compile_ns:
        out.compile_ns[0] = compile_ns
    return out


class _Lanes:
    """Lane index -> engine (name, kind, figures); which engine runs which operator."""

    def __init__(self, target: Target) -> None:
        self.engines: list[Engine] = []
        self.index: dict[EngineKind, int] = {}
        for e in target.engines:
            self.index.setdefault(e.kind, len(self.engines))
            self.engines.append(e)
        for kind in _LANE_KINDS:
            if kind not in self.index:
                self.index[kind] = len(self.engines)
                self.engines.append(Engine(kind.value, kind))
        self.patterned = [(k, e.ops) for k, e in enumerate(self.engines) if e.ops and e.kind not in _LANE_KINDS]
        compute = [k for k, e in enumerate(self.engines) if e.kind not in _LANE_KINDS and not e.ops]
        if not compute:
            compute = [len(self.engines)]
            self.engines.append(Engine("vector", EngineKind.VECTOR))
        vector = [k for k in compute if self.engines[k].kind is EngineKind.VECTOR]
        self.default = (vector or compute)[0]
        self._by_name: dict[str, int] = {}
        self.kinds = any(e.kinds for e in self.engines)  # per-operator-kind figures (a calibrated target)
        self._figures: dict[tuple[int, str], tuple[float, float, float]] = {}

    def figures(self, lane: int, name: str) -> tuple[float, float, float]:
        """(latency_ns, flops_per_ns, bytes_per_ns) of operator `name` on `lane`: its kind's, else the engine's."""
        key = (lane, name)
        out = self._figures.get(key)
        if out is None:
            f = self.engines[lane].figures(operator_category(name).value)
            out = self._figures[key] = (f.latency_ns, f.flops_per_ns, f.bytes_per_ns)
        return out

    def of(self, name: str) -> int:
        lane = self._by_name.get(name)
        if lane is None:
            lane = next((k for k, pats in self.patterned if matches(name, pats)), self.default)
            self._by_name[name] = lane
        return lane


@dataclasses.dataclass
class Schedule:
    """Engine slices of one region's predicted schedule (columns; `op` is the op index)."""

    engines: list[str]
    engine_kinds: list[str]
    lane: list[int]
    kind: list[str]
    name: list[str]
    start: list[int]
    dur: list[int]
    op: list[int]
    bytes: list[int | None]
    waited_on: list[str | None]
    start_ns: int
    end_ns: int
    op_starts: dict[int, int] = dataclasses.field(default_factory=dict)  # op id -> its first slice's start (when scheduled)

    def __len__(self) -> int:
        return len(self.lane)

    @property
    def total_ns(self) -> int:
        """Predicted time of the region: from its start to the end of the last slice."""
        return self.end_ns - self.start_ns

    def columns(self, ops: ScheduleOps, region_id: int | None = None) -> dict[str, list]:
        """Columns for TraceBuilder.engine_slices.extend (op ids and modules from `ops`)."""
        op_ids, modules, names, kinds = ops.op_id, ops.module, self.engines, self.engine_kinds
        return {
            "region_id": [region_id] * len(self.lane),
            "engine": [names[k] for k in self.lane],
            "engine_kind": [kinds[k] for k in self.lane],
            "kind": self.kind,
            "name": self.name,
            "start": self.start,
            "dur": self.dur,
            "op_id": [op_ids[i] if op_ids[i] >= 0 else None for i in self.op],
            "bytes": self.bytes,
            "module": [modules[i] for i in self.op],
            "waited_on": self.waited_on,
        }

    def to_table(self, ops: ScheduleOps, region_id: int | None = None) -> Any:
        """The engine_slices Arrow table of this schedule, built without per-row Python strings."""
        import pyarrow as pa

        from portscope.ingest.schema import ENGINE_SLICES

        n = len(self.lane)
        lane = pa.array(self.lane, pa.int32())

        def dict_of(values: list) -> pa.Array:
            return pa.array(values, pa.string()).dictionary_encode()

        op_ids = pa.array(ops.op_id, pa.int64()).take(pa.array(self.op, pa.int64()))
        modules = dict_of(ops.module).take(pa.array(self.op, pa.int64()))
        arrays = [
            pa.array([region_id] * n, pa.int32()),
            pa.DictionaryArray.from_arrays(lane, pa.array(self.engines, pa.string())),
            pa.DictionaryArray.from_arrays(lane, pa.array(self.engine_kinds, pa.string())),
            dict_of(self.kind), dict_of(self.name), pa.array(self.start, pa.int64()), pa.array(self.dur, pa.int64()),
            op_ids, pa.array(self.bytes, pa.int64()), pa.nulls(n, pa.int64()), modules, dict_of(self.waited_on),
        ]
        return pa.Table.from_arrays(arrays, schema=ENGINE_SLICES)

    def summary(self, ops: ScheduleOps, name: str = "") -> Any:
        """The per-engine summary (ingest.schedule_summary.ScheduleSummary) of this schedule."""
        import pyarrow as pa

        from portscope.ingest.schedule_summary import summarize_slices

        cols = self.columns(ops)
        table = pa.table({k: cols[k] for k in ("engine", "engine_kind", "kind", "start", "dur", "waited_on")})
        return summarize_slices(table, origin=self.start_ns, name=name)


def schedule(ops: ScheduleOps, target: Target, *, start_ns: int = 0) -> Schedule:
    """List-schedule `ops` on `target`'s engines, from `start_ns`."""
    lanes = _Lanes(target)
    engines = lanes.engines
    ix = lanes.index
    HOST, DISP, COMP = ix[EngineKind.HOST], ix[EngineKind.DISPATCH], ix[EngineKind.COMPILER]
    dma = {"h2d": ix[EngineKind.DMA_H2D], "d2h": ix[EngineKind.DMA_D2H], "d2d": ix[EngineKind.DMA_D2D]}
    fpn = [e.flops_per_ns for e in engines]
    bpn = [e.bytes_per_ns for e in engines]
    lat = [e.latency_ns for e in engines]
    dispatch_ns = int(target.dispatch_ns)
    host_fpn = target.host_flops_per_ns or 1.0
    sync_ns, SYNC_KIND = int(target.sync_ns), SliceKind.SYNC.value  # a host read of the device: its wait's own cost
    by_kind, figures = lanes.kinds, lanes.figures  # per-operator-kind figures (a calibrated target)
    n = len(ops)
    end = [start_ns] * n
    host_made = bytearray(n)
    free = [start_ns] * len(engines)
    # one list per column: rows of tuples would keep the cyclic GC busy (millions of tracked objects)
    cols: list[list] = [[] for _ in range(8)]
    a_lane, a_kind, a_name, a_start, a_dur, a_op, a_bytes, a_wait = (c.append for c in cols)

    def add_row(row: tuple) -> None:
        lane, kind, name, t, d, i, nbytes, wait = row
        a_lane(lane)
        a_kind(kind)
        a_name(name)
        a_start(t)
        a_dur(d)
        a_op(i)
        a_bytes(nbytes)
        a_wait(wait)

    def emit(lane: int, kind: str, name: str, t: int, d: int, i: int, nbytes: int | None, wait: str | None) -> None:
        add_row((lane, kind, name, t, d, i, nbytes, wait if t > free[lane] else None))
        free[lane] = t + d

    def cost(lane: int, flops: int, nbytes: int, name: str | None = None) -> int:
        la, f, b = figures(lane, name) if name is not None and by_kind else (lat[lane], fpn[lane], bpn[lane])
        return int(la + max(flops / f if f else 0.0, nbytes / b if b else 0.0))

    def copies(i: int, issue: int, ready: int, cause: str | None, why: str) -> tuple[int, str | None]:
        for direction, nbytes in ops.transfers[i]:
            lane = dma.get(direction, dma["d2d"])
            t = max(issue, free[lane], ready if direction == "d2h" else issue)
            wait = cause if direction == "d2h" and ready >= issue else why
            d = cost(lane, 0, nbytes)
            emit(lane, TRANSFER, f"{direction} {ops.name[i]}", t, d, i, nbytes, wait)
            if t + d > ready:
                ready, cause = t + d, TRANSFER
        return ready, cause

    names, placement, deps, flops, nbytes_of = ops.name, ops.placement, ops.deps, ops.flops, ops.bytes
    transfers, compile_ns, graph_id, is_call, syncs = ops.transfers, ops.compile_ns, ops.graph_id, ops.is_call, ops.syncs
    device, graph, fallback = Placement.DEVICE.value, Placement.GRAPH.value, Placement.FALLBACK.value
    COMPUTE, DISPATCH_KIND = SliceKind.COMPUTE.value, SliceKind.DISPATCH.value
    lane_of = lanes._by_name
    host_t, host_cause = start_ns, None
    call, call_gid, call_end_ns, launch, launch_cause, graph_ready, graph_end, inside_count = -1, None, 0, 0, None, 0, 0, 0

    def close_graph() -> None:
        if inside_count == 0:  # a graph call whose inside was not recorded: one slice of its own
            lane = lanes.of(names[call])
            t = max(launch, graph_ready, free[lane])
            emit(lane, SliceKind.COMPUTE.value, names[call], t, cost(lane, flops[call], nbytes_of[call], names[call]), call, None,
                 launch_cause)
            end[call] = free[lane]
        else:
            end[call] = graph_end

    for i in range(n):
        d = deps[i]
        if call >= 0 and not (graph_id[i] == call_gid and not is_call[i] and ops.start_ns[i] < call_end_ns):
            close_graph()
            call = -1
        if d is None:  # a view: metadata only
            continue
        ready, rcause = start_ns, None
        for j in d:
            if end[j] > ready:
                ready, rcause = end[j], (FALLBACK if host_made[j] else DEPENDENCY)
        where = placement[i]
        name = names[i]
        if call >= 0 and where != fallback:  # inside a compiled graph: no dispatch, overlaps where dependencies allow
            inside_count += 1
            lane = lanes.of(name)
            if graph_ready > ready:
                ready, rcause = graph_ready, TRANSFER
            t = max(launch, ready, free[lane])
            emit(lane, SliceKind.COMPUTE.value, name, t, cost(lane, flops[i], nbytes_of[i], name), i, None,
                 rcause if ready >= launch else launch_cause)
            end[i] = free[lane]
            if end[i] > graph_end:
                graph_end = end[i]
            continue
        if where == device or where == graph:
            t = host_t
            a_lane(DISP), a_kind(DISPATCH_KIND), a_name(name), a_start(t), a_dur(dispatch_ns), a_op(i), a_bytes(None)
            a_wait(host_cause if t > free[DISP] else None)
            free[DISP] = t + dispatch_ns
            host_t = t + dispatch_ns
            issue_cause = DISPATCH
            c = compile_ns.get(i)
            if c:
                emit(COMP, SliceKind.COMPILE.value, f"compile {name}", host_t, c, i, None, DISPATCH)
                host_t += c
                issue_cause = COMPILE
            host_cause = issue_cause
            if i in transfers:
                why = FALLBACK if rcause == FALLBACK else issue_cause
                ready, rcause = copies(i, host_t, ready, rcause, why)
            if where == graph and is_call[i]:
                call, call_gid, call_end_ns = i, graph_id[i], ops.start_ns[i] + ops.dur_ns[i]
                launch, launch_cause, graph_ready, graph_end, inside_count = host_t, issue_cause, ready, host_t, 0
                continue
            lane = lane_of.get(name) or lanes.of(name)
            f = free[lane]
            t = host_t if host_t > ready else ready
            if f > t:
                t = f
            if by_kind:
                la, f_, b_ = figures(lane, name)
            else:
                la, f_, b_ = lat[lane], fpn[lane], bpn[lane]
            fl, nb = flops[i], nbytes_of[i]
            d = int(la + max(fl / f_ if f_ else 0.0, nb / b_ if b_ else 0.0))
            a_lane(lane), a_kind(COMPUTE), a_name(name), a_start(t), a_dur(d), a_op(i), a_bytes(None)
            a_wait((rcause if ready >= host_t else issue_cause) if t > f else None)
            end[i] = free[lane] = t + d
            if i in syncs:  # the host needs the result (its size): it waits for the device, then wakes
                t = end[i] if end[i] > host_t else host_t
                emit(HOST, SYNC_KIND, name, t, sync_ns, i, None, DEPENDENCY if t > host_t else host_cause)
                host_t, host_cause = t + sync_ns, DEPENDENCY
            continue
        # on the host: a fallback (or a host op) waits for its inputs to be computed and copied out
        if i in transfers:
            ready, rcause = copies(i, host_t, ready, rcause, DISPATCH)
        t = max(host_t, ready)
        kind = SliceKind.SYNC.value if name in SCALAR_READ_OPS else (
            SliceKind.FALLBACK.value if where == Placement.FALLBACK.value else SliceKind.COMPUTE.value)
        d_host = dispatch_ns + int(flops[i] / host_fpn)
        if sync_ns and kind == SYNC_KIND and i in transfers:  # a read of a device value waits, then wakes
            d_host += sync_ns
        emit(HOST, kind, name, t, d_host, i, None, rcause if t > host_t else (host_cause or DISPATCH))
        host_t = end[i] = t + d_host
        host_made[i] = 1
        host_cause = FALLBACK
        if call >= 0:  # a fallback inside a graph (a target whose graphs can fall back): the graph ends after it
            inside_count += 1
            graph_end = max(graph_end, end[i])
    if call >= 0:
        close_graph()
    end_ns = max(free) if n else start_ns
    return Schedule([e.name for e in engines], [e.kind.value for e in engines], *cols, start_ns, end_ns)




def graph_insides(region: Any, events: Sequence[OpEvent], target: Target) -> dict[int, list[BoundNode]]:
    """Event index of each graph call whose compile logged its ATen operators -> those operators, bound to the
    call's input shapes. Empty on a target whose graphs can fall back ([compiled] fallbacks): there the operators
    dispatched inside the graph keep the placements the predictor gave them."""
    if target.graph_fallbacks:
        return {}
    insides = {}
    for i, ev in enumerate(events):
        if ev.graph_id is not None:
            graph = getattr(region.raw[i][0], "inside", None)
            if graph is not None:
                insides[i] = graph.bind(ev.inputs)
    return insides


def add_region_schedule(builder: Any, region_id: int, region: Any, events: Sequence[OpEvent], start_ns: int,
                        target: Target) -> Schedule:
    """Schedule a predicted region's operators and append the slices to builder.engine_slices."""
    prediction = region.prediction
    ops = ops_from_events(events, prediction.outcomes, prediction.deps, prediction.compiles,
                          insides=graph_insides(region, events, target))
    sched = schedule(ops, target, start_ns=start_ns)
    builder.engine_slices.extend(sched.columns(ops, region_id))
    for start, op in sorted(zip(sched.start, sched.op, strict=True), reverse=True):  # the earliest start wins
        if ops.op_id[op] >= 0:
            sched.op_starts[ops.op_id[op]] = start
    return sched


__all__ = ["Schedule", "ScheduleOps", "add_region_schedule", "compiled_view", "estimate_flops", "graph_insides",
           "ops_from_events", "schedule"]

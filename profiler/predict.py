"""Predict what a target device would have to do, while the program runs on the CPU for real.

Every storage the program touches has a residency: which copies (host, device)
are valid. A device operator needs device copies of its inputs (an h2d transfer
where only the host copy is valid) and leaves its outputs valid on the device
only; a fallback needs host copies (a d2h transfer where only the device copy
is valid), runs on the host and leaves its outputs valid on the host only.
The program runs as its port would (``model.to(device)`` and the inputs moved):
parameters, buffers and every tensor first seen in a region (made before it) are
held on the device, as the tensors the region's own factories make are. Every
rule is judged on the operands as the target holds them, so a region predicts
the same signals whichever region made its inputs.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import torch

from portscope.ingest.catalog import (
    COPY_OPS,
    SCALAR_READ_OPS,
    Cause,
    OpCall,
    OpRule,
    cause_hint,
    copy_ends,
    dtype_agnostic,
    dtype_fallback_cause,
    dtype_hint,
    sync_cause,
)
from portscope.ingest.schema import Direction, Placement, SignalKind

from . import recorder
from .events import RegionPrediction, SignalRecord, TransferRecord, copy_signals, sync_signals
from .targets import CopyWhere, Target, load_target, matches

HOST, DEVICE = 1, 2
_Tensor = torch.Tensor
_SEQ = (list, tuple)

# Both caches are keyed by the Target itself (its whole content): two target files that share a name
# but differ share nothing.
# Programs compiled in this process, per target: keys seen for the first time compile.
_PROGRAMS: dict[Target, set[tuple]] = {}
# What a target does with an (operator, input metadata) key depends only on the target: shared by regions.
_DECISIONS: dict[Target, dict[tuple, _Decision]] = {}


def reset_program_cache(target: str | None = None) -> None:
    """Forget compiled programs (a fresh process), for the targets of one name or all."""
    for key in [t for t in _PROGRAMS if target is None or t.name == target]:
        del _PROGRAMS[key]


class _Decision:
    """What a target does with one (operator, input metadata) key; cached.

    signal: None when the operator runs on the device; else the host-side signal it becomes
    (CPU_FALLBACK, BOUNCE_DTYPE, BOUNCE_STRIDED). sync: the catalogue's sync rule it matches.
    copy: the copy signals of a copy that runs on the device (dtype change, non-contiguous end).
    """

    __slots__ = ("signal", "cause", "note", "program", "broadcast", "sync", "copy")

    def __init__(self, signal: SignalKind | None = None, cause: Cause | str | None = None, note: str | None = None,
                 program: tuple | None = None, broadcast: bool = False) -> None:
        self.signal = signal
        self.cause = cause  # a Cause, or the text of a dtype change ("float16->float32")
        self.note = note
        self.program = program
        self.broadcast = broadcast
        self.sync: OpRule | None = None
        self.copy: list[SignalRecord] = []

    @property
    def reason(self) -> str | None:
        return self.cause.value if isinstance(self.cause, Cause) else self.cause


def tensor_operands(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an operator call reads, in the recorder's order: positional (lists flattened), then keyword."""
    ins = []
    for a in args:
        if isinstance(a, _Tensor):
            ins.append(a)
        elif type(a) in _SEQ:
            ins.extend(x for x in a if isinstance(x, _Tensor))
    ins.extend(a for a in kwargs.values() if isinstance(a, _Tensor))
    return ins


class Predictor:
    """Residency tracking and target rules for the regions of one `explain(target=...)`."""

    # where a storage first seen in a region (made before it) is held: an eager port moved it to the device
    first_seen = DEVICE

    def __init__(self, target: str | Path | Target) -> None:
        self.target = load_target(target)
        self.device = self.target.device
        self._state: dict[int, list] = {}  # id(storage) -> [state, weakref]
        self._producers: dict[int, tuple[int, int]] = {}  # schedules: id(storage) -> (id(region), op index)
        self._decisions = _DECISIONS.setdefault(self.target, {})
        self._names: dict[Any, str] = {}
        self._programs = _PROGRAMS.setdefault(self.target, set())
        self._attached = 0
        self.device_bytes = 0  # bytes of the storages valid on the device now (the residency model's memory)
        self._dtype = sorted(self.target.dtypes)[0]  # what a dtype note suggests computing in

    # ---- session wiring -----------------------------------------------------------------

    def attach(self, region: Any, session: recorder.Session) -> None:
        """Predict `region` (its `prediction` field holds the outcome) with this predictor."""
        region.prediction = RegionPrediction()
        if self._attached == 0:
            session.hooks.append(self.on_op)
            session.root_hooks.append(self.on_root)
            session.graph_hooks.append(self.on_graph)
        self._attached += 1

    def detach(self, region: Any, session: recorder.Session) -> None:
        self._attached -= 1
        if self._attached == 0:
            session.hooks.remove(self.on_op)
            session.root_hooks.remove(self.on_root)
            session.graph_hooks.remove(self.on_graph)
            self._producers.clear()

    def on_graph(self, call: Any, ins: list[torch.Tensor], outs: list[torch.Tensor], index: int) -> None:
        """A compiled graph is one device program keyed by its input shapes; data crosses only at its boundary."""
        region = recorder.session().regions[-1]
        state: RegionPrediction = region.prediction
        in_st = [t.untyped_storage() for t in ins]
        self._record_deps(state, region, index, {id(st) for st in in_st}, [t.untyped_storage() for t in outs], view=False)
        signals: list[SignalRecord] = []
        transfers: list[TransferRecord] = []
        self._need(ins, in_st, DEVICE, transfers, "graph-input")
        signals.extend(_crossing(tr) for tr in transfers)
        if self.target.graph_fallbacks:  # an output a fallback inside the graph left on the host goes back
            back: list[TransferRecord] = []
            self._need(outs, [t.untyped_storage() for t in outs], DEVICE, back, "graph-output")
            signals.extend(_crossing(tr) for tr in back)
            transfers += back
        else:
            for t in outs:
                self._set(t, DEVICE)
        key = (f"graph {call.func.compile_id}", tuple(tuple(t.shape) for t in ins), None, tuple(_dt(t.dtype) for t in ins))
        if key not in self._programs and self.target.programs:
            self._programs.add(key)
            state.compiles.append((index, _key_text(key), int(self.target.compile_ns)))
        state.outcomes[index] = (Placement.GRAPH, signals, transfers)
        self._remember(index)

    def on_root(self, module: torch.nn.Module) -> None:
        """The model's parameters and buffers live on the device."""
        for t in list(module.parameters()) + list(module.buffers()):
            self._set(t, DEVICE, only_if_new=True)

    # ---- residency ----------------------------------------------------------------------

    def _entry(self, t: torch.Tensor, storage: Any = None) -> list:
        """[state, weakref, nbytes] of a tensor's storage (created on first sight)."""
        if storage is None:
            storage = t.untyped_storage()
        key = id(storage)
        entry = self._state.get(key)
        if entry is None:  # made before the region
            state = DEVICE if isinstance(t, torch.nn.Parameter) else self.first_seen
            entry = self._state[key] = [state, weakref.ref(storage, self._forget(key)), storage.nbytes()]
            if state & DEVICE:
                self.device_bytes += entry[2]
        return entry

    def _forget(self, key: int):  # noqa: ANN202
        states, producers = self._state, self._producers

        def callback(_: Any) -> None:
            entry = states.pop(key, None)
            producers.pop(key, None)
            if entry is not None and entry[0] & DEVICE:
                self.device_bytes -= entry[2]

        return callback

    def _set(self, t: torch.Tensor, state: int, *, only_if_new: bool = False, storage: Any = None) -> None:
        if storage is None:
            storage = t.untyped_storage()
        key = id(storage)
        entry = self._state.get(key)
        if entry is None:
            entry = self._state[key] = [state, weakref.ref(storage, self._forget(key)), storage.nbytes()]
            if state & DEVICE:
                self.device_bytes += entry[2]
        elif not only_if_new:
            if (state & DEVICE) != (entry[0] & DEVICE):
                self.device_bytes += entry[2] if state & DEVICE else -entry[2]
            entry[0] = state

    def tracked(self) -> int:
        """Number of storages whose residency is tracked (bounded by live tensors)."""
        return len(self._state)

    # ---- the hot path -------------------------------------------------------------------

    def on_op(self, func: Any, args: tuple, kwargs: dict, out: Any, index: int) -> None:
        """Predict one operator; the device-resident bytes after it join the region's memory when they changed."""
        self._predict(func, args, kwargs, out, index)
        self._remember(index)

    def _remember(self, index: int) -> None:
        memory = recorder.session().regions[-1].prediction.memory
        if not memory or memory[-1][1] != self.device_bytes:
            memory.append((index, self.device_bytes))

    def _predict(self, func: Any, args: tuple, kwargs: dict, out: Any, index: int) -> None:
        session = recorder.session()
        region = session.regions[-1]
        state: RegionPrediction = region.prediction
        ins = tensor_operands(args, kwargs)
        if isinstance(out, _Tensor):
            outs = [out]
        elif type(out) in _SEQ:
            outs = [x for x in out if isinstance(x, _Tensor)]
        else:
            outs = []
        in_st = [t.untyped_storage() for t in ins]
        out_st = [t.untyped_storage() for t in outs]
        in_keys = {id(st) for st in in_st}
        name = self._name(func)
        view = (bool(outs) and all(id(st) in in_keys for st in out_st)
                and not name.split(".", 1)[0].endswith("_") and "out" not in kwargs)
        self._record_deps(state, region, index, in_keys, out_st, view=view)
        inside_graph = session.graph is not None
        if inside_graph and not self.target.graph_fallbacks:  # part of one device program
            state.outcomes[index] = (Placement.GRAPH, [], [])
            return
        signals: list[SignalRecord] = []
        transfers: list[TransferRecord] = []
        if view:
            where = Placement.DEVICE if ins and self._entry(ins[0], in_st[0])[0] & DEVICE else Placement.HOST
            state.outcomes[index] = (Placement.GRAPH if inside_graph else where, signals, transfers)
            return
        raw = region.raw[index]  # the recorder's metadata of this op: reuse it for the rule cache key
        key = (func, tuple(m[:3] for m in raw[1] if m is not None), tuple(m[2] for m in raw[2]))
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decisions[key] = self._rules(name, ins, outs, bool_index=raw[7])
        if decision.sync is not None:
            # as the target holds the operands: on the device when the operator runs there, else where they are
            runs_on_device = decision.signal is None and decision.sync.cause is not Cause.ITEM
            on_device = [t for t, st in zip(ins, in_st, strict=True)
                         if runs_on_device or self._entry(t, st)[0] & DEVICE]
            if on_device:
                signals, transfers = sync_signals(decision.sync, on_device[0].element_size(), self.device)
            if decision.sync.cause is Cause.ITEM:  # the host reads one element (from the device if only it has it)
                state.outcomes[index] = (Placement.HOST, signals, transfers)
                return
        if inside_graph and decision.signal is not SignalKind.CPU_FALLBACK:
            # a target whose graphs can fall back ([compiled] fallbacks): device work stays in the graph's program
            moved = []
            self._need(ins, in_st, DEVICE, moved, "device-input")
            for t, st in zip(outs, out_st, strict=True):
                self._set(t, DEVICE, storage=st)
            signals = [_crossing(tr) for tr in moved]
            state.outcomes[index] = (Placement.GRAPH, signals, moved)
            return
        if decision.signal is None:
            moved: list[TransferRecord] = []
            self._need(ins, in_st, DEVICE, moved, "device-input")
            for t, st in zip(outs, out_st, strict=True):
                self._set(t, DEVICE, storage=st)
            transfers += moved
            signals.extend(_crossing(tr) for tr in moved)
            signals += decision.copy
            if decision.program is not None and self.target.programs:
                self._program(state, index, decision, signals)
            state.outcomes[index] = (Placement.DEVICE, signals, transfers)
            return
        cause = "fallback-input" if decision.signal is SignalKind.CPU_FALLBACK else "bounce"
        moved = []
        self._need(ins, in_st, HOST, moved, cause)
        for t, st in zip(outs, out_st, strict=True):
            self._set(t, HOST, storage=st)
        size = sum(t.nbytes for t in ins[:1]) if decision.signal is not SignalKind.CPU_FALLBACK else 0
        signals.append(SignalRecord(decision.signal, decision.reason, size, decision.note))
        signals.extend(_crossing(tr) for tr in moved)
        state.outcomes[index] = (Placement.FALLBACK, signals, transfers + moved)

    # ---- producers (schedules: data dependencies by tensor identity) ---------------------

    def _record_deps(self, state: RegionPrediction, region: Any, index: int, in_keys: set[int], out_st: list, *,
                     view: bool) -> None:
        """state.deps[index]: the earlier ops of this region whose outputs it reads; outputs now come from it."""
        if view:  # a view shares its input's storage: consumers depend on the storage's producer
            state.deps[index] = None
            return
        producers, rid = self._producers, id(region)
        deps = {p[1] for k in in_keys if (p := producers.get(k)) is not None and p[0] == rid}
        state.deps[index] = tuple(sorted(deps))
        for st in out_st:
            producers[id(st)] = (rid, index)

    def _need(self, tensors: list[torch.Tensor], storages: list, where: int, transfers: list[TransferRecord],
              cause: str) -> None:
        for t, st in zip(tensors, storages, strict=True):
            entry = self._entry(t, st)
            if not entry[0] & where:
                entry[0] |= where
                if where == DEVICE:
                    self.device_bytes += entry[2]
                if not entry[2]:  # an empty storage: nothing crosses
                    continue
                if where == DEVICE:
                    transfers.append(TransferRecord(Direction.H2D, entry[2], "cpu", self.device, cause))
                else:
                    transfers.append(TransferRecord(Direction.D2H, entry[2], self.device, "cpu", cause))

    def _program(self, state: RegionPrediction, index: int, decision: _Decision, signals: list[SignalRecord]) -> None:
        key = decision.program
        if key not in self._programs:
            self._programs.add(key)
            signals.append(SignalRecord(SignalKind.RECOMPILE, Cause.NEW_KEY.value, 0, cause_hint(Cause.NEW_KEY)))
            state.compiles.append((index, _key_text(key), int(self.target.compile_ns)))
        elif decision.broadcast and self.target.broadcast_views_miss:
            signals.append(SignalRecord(SignalKind.WARM_MISS, Cause.BROADCAST_VIEW_INPUT.value, 0,
                                        cause_hint(Cause.BROADCAST_VIEW_INPUT)))

    # ---- rules (cached per operator and input metadata) ---------------------------------

    def _name(self, func: Any) -> str:
        name = self._names.get(func)
        if name is None:
            try:
                name = func.name()
            except AttributeError:
                name = str(func)
            self._names[func] = name
        return name

    def _rules(self, name: str, ins: list[torch.Tensor], outs: list[torch.Tensor], *, bool_index: bool) -> _Decision:
        call = OpCall(name, tuple(_dt(x.dtype) for x in ins), tuple(_dt(x.dtype) for x in outs), bool_index)
        decision = self._placement(name, ins, outs, call)
        decision.sync = sync_cause(call)
        return decision

    def _placement(self, name: str, ins: list[torch.Tensor], outs: list[torch.Tensor], call: OpCall) -> _Decision:
        t = self.target
        if name in SCALAR_READ_OPS:  # a read, not a program: its sync is the signal
            return _Decision()
        if name in COPY_OPS:
            ends = copy_ends(name, ins, outs)
            if ends is None:
                return self._device(name, ins)
            src, dst = ends
            change = f"{_dt(src.dtype)}->{_dt(dst.dtype)}"
            if src.dtype != dst.dtype and t.dtype_change is CopyWhere.HOST:
                return _Decision(SignalKind.BOUNCE_DTYPE, change, dtype_hint(self._dtype, (_dt(src.dtype), _dt(dst.dtype))))
            if call.packet == "aten::copy_" and not dst.is_contiguous() and t.strided_write is CopyWhere.HOST:
                return _Decision(SignalKind.BOUNCE_STRIDED, Cause.STRIDED_DESTINATION,
                                 cause_hint(Cause.STRIDED_DESTINATION))
            decision = self._device(name, ins)
            decision.copy = copy_signals(_dt(src.dtype), _dt(dst.dtype), src.is_contiguous(), dst.is_contiguous(),
                                         dst.nbytes)
            return decision
        if matches(name, t.no_kernel):
            return _Decision(SignalKind.CPU_FALLBACK, Cause.NO_KERNEL, cause_hint(Cause.NO_KERNEL))
        if not dtype_agnostic(name):
            allowed = t.dtypes | (t.index_dtypes if matches(name, t.index_ops) else frozenset())
            for x in ins + outs[:1]:  # secondary outputs (e.g. attention's logsumexp) are scratch
                if x.dim() > 0 and _dt(x.dtype) not in allowed:
                    cause = dtype_fallback_cause(call)
                    lacking = [_dt(y.dtype) for y in ins + outs[:1] if y.dim() > 0 and _dt(y.dtype) not in allowed]
                    note = dtype_hint(self._dtype, lacking) if cause is Cause.DTYPE_NOT_SUPPORTED else cause_hint(cause)
                    return _Decision(SignalKind.CPU_FALLBACK, cause, note)
        shapes = [tuple(x.shape) for x in ins]
        for cond in t.shape_conditions:
            if cond.violated_by(name, shapes):
                return _Decision(SignalKind.CPU_FALLBACK, Cause.SHAPE_CONDITION,
                                 cause_hint(Cause.SHAPE_CONDITION, multiple_of=cond.multiple_of, why=cond.why))
        for rule in t.alignment:
            for x in ins:
                if rule.violated_by(name, tuple(x.shape), tuple(x.stride())):
                    return _Decision(SignalKind.CPU_FALLBACK, Cause.UNALIGNED,
                                     cause_hint(Cause.UNALIGNED, multiple_of=rule.multiple_of))
        return self._device(name, ins)

    def _device(self, name: str, ins: list[torch.Tensor]) -> _Decision:
        parts = self.target.cache_key
        key = (
            name if "op" in parts else None,
            tuple(tuple(x.shape) for x in ins) if "shapes" in parts else None,
            tuple(_layout(x) for x in ins) if "strides" in parts else None,
            tuple(_dt(x.dtype) for x in ins) if "dtypes" in parts else None,
        )
        broadcast = any(0 in x.stride() and x.numel() > 1 for x in ins)
        return _Decision(program=key, broadcast=broadcast)


# What fixes a predicted crossing: every tensor starts on the device (parameters, inputs, the region's own
# factories), so data crosses only around host work; the note points at that work, not at moving tensors.
_CROSSING_NOTES = {
    "device-input": "try: remove the host work that left it on the host (fallbacks, bounces above)",
    "graph-input": "try: remove the host work that left it on the host (fallbacks, bounces above)",
    "graph-output": "try: remove the fallback inside the graph",
    "fallback-input": "try: remove the fallback that reads it on the host",
    "bounce": "try: remove the bounce that copies it through the host",
}


def _crossing(tr: TransferRecord) -> SignalRecord:
    """The signal row of a transfer the residency model moved, with a note that applies to it."""
    return SignalRecord(tr.direction.signal, tr.cause, tr.bytes, _CROSSING_NOTES.get(tr.cause))


def _layout(t: torch.Tensor) -> tuple[int, ...]:
    """Strides as the device sees the layout: a size-1 dimension's stride means nothing."""
    return tuple(s if n != 1 else 0 for n, s in zip(t.shape, t.stride(), strict=True))


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _key_text(key: tuple) -> str:
    name, shapes, strides, dtypes = key
    parts = [name or "*"]
    if shapes is not None:
        parts.append(",".join("x".join(map(str, s)) or "()" for s in shapes))
    if strides is not None:
        parts.append("strides " + ",".join("x".join(map(str, s)) or "()" for s in strides))
    if dtypes is not None:
        parts.append(",".join(dtypes))
    return " ".join(parts)

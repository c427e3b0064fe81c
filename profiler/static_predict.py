"""Predict a run under a static-shape target: the model compiled ahead of time for fixed shapes.

Each call of the model (a top-level module) is one call of a device program: one prefill program for
batch_size x max_sequence_length, one decode program for batch_size x 1, whatever the prompt length.
Nothing inside a program falls back; the KV cache the model builds stays on the device; what crosses
is what the host hands the program (ids or embeddings, masks, positions) and what it reads back (the
logits). Code outside the model (generate's sampling, stopping criteria) is the host runtime.

Each program call becomes one recorded operator (placement `graph`) before the operators of the
forward pass, which carry its graph id: schedules place it as one compiled program.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import torch

from portscope.ingest.catalog import Cause, cause_hint, hint_for
from portscope.ingest.schema import Direction, Placement, SignalKind

from . import recorder
from .events import RegionPrediction, SignalRecord, TransferRecord
from .predict import DEVICE, HOST, Predictor, tensor_operands
from .targets import Target, load_target
from .targets.static_shapes import StaticShapes

_Tensor = torch.Tensor
_GRAPH_BASE = 1 << 30  # graph ids of program calls: apart from torch.compile's (small integers)
PREFILL, DECODE = "prefill", "decode"


def _tensor_meta(t: _Tensor) -> tuple:
    """A tensor as the recorder's operator tuples hold it (shape, stride, dtype, device)."""
    return (t.shape, t.stride(), t.dtype, t.device)


def predictor_for(target: str | Path | Target) -> Predictor:
    """The predictor a target asks for: static-shape programs, or eager operator-by-operator rules."""
    loaded = load_target(target)
    return StaticPredictor(loaded) if loaded.static_shapes is not None else Predictor(loaded)


class _Program:
    """Stands for a program in the recorder's operator tuples (decoded by its name)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def name(self) -> str:
        return self.text


@dataclasses.dataclass
class _Call:
    """One program call in progress: from the model's forward pre-hook to the first operator outside it."""

    region: Any
    index: int  # the placeholder operator of the call in region.raw
    graph_id: int
    start_ns: int
    last: int | None = None  # index of the last operator inside
    batch: int | None = None  # sequences and tokens per sequence, from the step's input
    tokens: int | None = None
    inputs: list[tuple] = dataclasses.field(default_factory=list)  # recorder metadata of the step's input
    transfers: list[TransferRecord] = dataclasses.field(default_factory=list)


class StaticPredictor(Predictor):
    """Residency and program calls for a target with a [static_shapes] section."""

    # the host runtime made what it hands the programs (ids, masks, positions): host buffers until a call
    first_seen = HOST

    def __init__(self, target: str | Path | Target) -> None:
        super().__init__(target)
        static = self.target.static_shapes
        if static is None:
            raise ValueError(f"target {self.target.name} has no [static_shapes] section")
        self.static: StaticShapes = static
        self.model: torch.nn.Module | None = None
        self.positions = 0  # tokens in the KV cache of the generation in progress
        self.calls: dict[str, int] = {PREFILL: 0, DECODE: 0}
        self._call: _Call | None = None
        self._embedding: Any = None
        self._graphs = 0
        self._programs_text = {
            PREFILL: _Program(f"program prefill {static.batch_size}x{static.max_sequence_length}"),
            DECODE: _Program(f"program decode {static.batch_size}x1 cache {static.max_cache_length}"),
        }

    # ---- call boundaries ----------------------------------------------------------------

    def on_root(self, module: torch.nn.Module) -> None:
        """A top-level module starts: one program call; its operator goes before those of the forward pass."""
        super().on_root(module)
        session = recorder.session()
        region = session.regions[-1]
        self._close()
        if module is not self.model:
            self.model = module
            get = getattr(module, "get_input_embeddings", None)
            embedding = get() if callable(get) else None
            self._embedding = getattr(embedding, "weight", None)
        index = len(region.raw)
        region.raw.append(None)  # replaced by the call's operator when it ends (as recorder.graph_call does)
        self._graphs += 1
        self._call = _Call(region, index, _GRAPH_BASE + self._graphs, time.perf_counter_ns())

    def detach(self, region: Any, session: recorder.Session) -> None:
        if self._call is not None and self._call.region is region:
            self._close()
        super().detach(region, session)

    def _close(self) -> None:
        """The call's operator: its input, time span, transfers, padding and length signals, its program."""
        call, self._call = self._call, None
        if call is None:
            return
        region, state = call.region, call.region.prediction
        end_ns = region.raw[call.last][4] if call.last is not None else call.start_ns
        phase, signals = self._phase_signals(call)
        program = self._programs_text[phase]
        region.raw[call.index] = (program, call.inputs, [], call.start_ns, max(end_ns, call.start_ns), None, None,
                                  False, call.graph_id)
        signals += [SignalRecord(tr.direction.signal, tr.cause, tr.bytes) for tr in call.transfers]
        state.outcomes[call.index] = (Placement.GRAPH, signals, call.transfers)
        state.deps[call.index] = ()
        key = (program.text, None, None, None)
        if key not in self._programs:  # compiled ahead of time: compile_ns is the target's (0 for AOT compilers)
            self._programs.add(key)
            state.compiles.append((call.index, program.text, int(self.target.compile_ns)))

    def _phase_signals(self, call: _Call) -> tuple[str, list[SignalRecord]]:
        s = self.static
        if call.batch is None or call.tokens is None:  # no ids or embeddings seen: the length is unknown
            self.calls[PREFILL] += 1
            return PREFILL, []
        batch, tokens = call.batch, call.tokens
        signals: list[SignalRecord] = []
        if tokens > 1 or self.positions == 0:
            phase, self.positions = PREFILL, tokens
            if tokens > s.max_sequence_length:
                signals.append(SignalRecord(SignalKind.STATIC_OVER_LENGTH, Cause.PROMPT_OVER_SEQUENCE.value, 0,
                                            cause_hint(Cause.PROMPT_OVER_SEQUENCE, length=tokens)))
            padding = s.batch_size * s.max_sequence_length - batch * min(tokens, s.max_sequence_length)
        else:
            phase, self.positions = DECODE, self.positions + tokens
            if self.positions > s.max_cache_length:
                signals.append(SignalRecord(SignalKind.STATIC_OVER_LENGTH, Cause.GENERATION_OVER_CACHE.value, 0,
                                            cause_hint(Cause.GENERATION_OVER_CACHE, length=self.positions)))
            padding = s.batch_size - batch
        self.calls[phase] += 1
        if padding > 0:
            signals.append(SignalRecord(SignalKind.STATIC_PADDING, phase, 0, hint_for(SignalKind.STATIC_PADDING),
                                        count=padding))
        return phase, signals

    # ---- operators ----------------------------------------------------------------------

    def on_op(self, func: Any, args: tuple, kwargs: dict, out: Any, index: int) -> None:
        session = recorder.session()
        region = session.regions[-1]
        state: RegionPrediction = region.prediction
        call = self._call
        if session.graph is not None or (session.modules and call is None):
            # torch.compile'd code, or a module that was running before the region opened: the eager rules
            super().on_op(func, args, kwargs, out, index)
            return
        if not session.modules:  # outside the model: the host runtime
            self._close()
            self._host(func, args, kwargs, out, index, region, state)
            return
        assert call is not None
        ins, outs, in_st, out_st, view = self._operands(state, region, index, args, kwargs, out)
        if call.batch is None:
            self._step_input(call, func, ins, in_st)
        for t, st in zip(ins, in_st, strict=True):  # the step's inputs cross once; the KV cache never does
            entry = self._entry(t, st)
            if not entry[0] & DEVICE:
                entry[0] |= DEVICE
                if t.numel():
                        call.transfers.append(TransferRecord(Direction.H2D, t.numel() * t.element_size(), "cpu",
                                                         self.device, "program-input"))
        for t, st in zip(outs, out_st, strict=True):
            if not view:
                self._set(t, DEVICE, storage=st)
        state.outcomes[index] = (Placement.GRAPH, [], [])
        if call.region is region:  # (a region nested inside the call keeps its operators' own graph ids)
            region.raw[index] = (*region.raw[index][:8], call.graph_id)
            call.last = index

    def _operands(self, state: RegionPrediction, region: Any, index: int, args: tuple, kwargs: dict,
                  out: Any) -> tuple[list[_Tensor], list[_Tensor], list, list, bool]:
        """Input and output tensors, their storages, whether the op is a view; records its dependencies."""
        ins = tensor_operands(args, kwargs)
        outs = [out] if isinstance(out, _Tensor) else tensor_operands(tuple(out), {}) if type(out) in (list, tuple) else []
        in_st = [t.untyped_storage() for t in ins]
        out_st = [t.untyped_storage() for t in outs]
        in_keys = {id(st) for st in in_st}
        view = bool(outs) and all(id(st) in in_keys for st in out_st)
        self._record_deps(state, region, index, in_keys, out_st, view=view)
        return ins, outs, in_st, out_st, view

    def _step_input(self, call: _Call, func: Any, ins: list[_Tensor], in_st: list) -> None:
        """Batch and tokens of the call: the ids the input embedding reads, or host-made embeddings."""
        name = self._name(func)
        if name.startswith("aten::embedding") and len(ins) >= 2 and ins[0] is self._embedding:
            ids = ins[1]
            call.batch, call.tokens = (ids.shape[0], ids.shape[-1]) if ids.dim() >= 2 else (1, ids.numel())
            call.inputs = [_tensor_meta(ids)]
            return
        for t, st in zip(ins, in_st, strict=True):
            if t.dim() == 3 and t.is_floating_point() and not self._entry(t, st)[0] & DEVICE:
                call.batch, call.tokens = t.shape[0], t.shape[1]
                call.inputs = [_tensor_meta(t)]
                return

    def _host(self, func: Any, args: tuple, kwargs: dict, out: Any, index: int, region: Any,
              state: RegionPrediction) -> None:
        """The host runtime between program calls: what it reads of the device crosses back (the logits)."""
        ins, outs, in_st, out_st, view = self._operands(state, region, index, args, kwargs, out)
        if view:  # metadata only: nothing moves until the view is read
            state.outcomes[index] = (Placement.HOST, [], [])
            return
        moved: list[TransferRecord] = []
        self._need(ins, in_st, HOST, moved, "program-output")
        for t, st in zip(outs, out_st, strict=True):
            self._set(t, HOST, storage=st)
        signals = [SignalRecord(tr.direction.signal, "program-output", tr.bytes) for tr in moved]
        state.outcomes[index] = (Placement.HOST, signals, moved)

    # ---- what the run reserves ------------------------------------------------------------

    def run_config(self) -> dict[str, Any]:
        """The static shapes, the programs called, and the device memory they reserve (run_info.config)."""
        from .plan import device_bytes, shape_of

        s = self.static
        out: dict[str, Any] = {"static_shapes": s.to_json(), "kv_cache": "device",
                               "program_calls": dict(self.calls)}
        config = getattr(self.model, "config", None)
        if config is None or not hasattr(config, "num_hidden_layers"):
            return out
        shape = shape_of(self.model, config)
        weights, cache, activations = device_bytes(shape, s)
        total = weights + cache + activations
        out.update(weight_bytes=weights, kv_cache_bytes=cache, activation_bytes=activations, device_memory_bytes=total,
                   fits=None if s.memory_bytes is None else total <= s.memory_bytes)
        return out

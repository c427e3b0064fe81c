"""Recorded operator events and the measured signals they imply (pure functions, unit-testable)."""

from __future__ import annotations

import dataclasses
import math

from portscope.ingest.catalog import (
    Cause,
    OpCall,
    OpRule,
    cause_hint,
    copy_ends,
    never_falls_back,
    sync_cause,
)
from portscope.ingest.schema import Direction, Placement, SignalKind


@dataclasses.dataclass(frozen=True, slots=True)
class TensorInfo:
    """What the profiler keeps of a tensor: shape, strides, dtype, device and element size."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    device: str
    itemsize: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def contiguous(self) -> bool:
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.stride), strict=True):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    @property
    def on_host(self) -> bool:
        return self.device == "cpu"


@dataclasses.dataclass(slots=True)
class OpEvent:
    """One dispatched operator, decoded from the hot-path record."""

    op_id: int
    name: str  # overload name, e.g. aten::add.Tensor
    packet: str  # without overload, e.g. aten::add
    inputs: list[TensorInfo | None]  # one entry per argument (None: not a tensor)
    outputs: list[TensorInfo]
    start_ns: int
    dur_ns: int
    call_site: str | None = None
    stack_id: int | None = None
    module: str | None = None
    thread: int = 0
    bool_index: bool = False  # an index operand is a boolean mask (a sync on accelerators)
    graph_id: int | None = None  # the compiled graph this operator belongs to (or is, for a graph call)

    @property
    def tensors_in(self) -> list[TensorInfo]:
        return [t for t in self.inputs if t is not None]

    @property
    def bytes_in(self) -> int:
        return sum(t.nbytes for t in self.tensors_in)

    @property
    def bytes_out(self) -> int:
        return sum(t.nbytes for t in self.outputs)


@dataclasses.dataclass(slots=True)
class SignalRecord:
    kind: SignalKind
    reason: str | None = None
    bytes: int = 0
    note: str | None = None
    count: int = 1  # more than one for signals that count units (static/padding: token positions)


@dataclasses.dataclass(slots=True)
class TransferRecord:
    direction: Direction
    bytes: int
    src_device: str
    dst_device: str
    cause: str


def direction(src: str, dst: str) -> Direction | None:
    """Direction of a copy from device `src` to device `dst` (None: stays on the host)."""
    src_host, dst_host = src == "cpu", dst == "cpu"
    if src_host and dst_host:
        return None
    if src_host:
        return Direction.H2D
    if dst_host:
        return Direction.D2H
    return Direction.D2D if src != dst else None


@dataclasses.dataclass(slots=True)
class RegionPrediction:
    """The predictor's state of one region: what each recorded operator became on the target.

    outcomes[i]: (placement, signals, transfers) of op i; compiles: (op index, program key text, compile ns)
    of each program compiled; deps[i]: indices of earlier ops whose outputs op i reads (None: a view); memory: the
    bytes valid on the device after each operator that changed them (the residency model's memory).
    """

    outcomes: dict[int, tuple[Placement, list[SignalRecord], list[TransferRecord]]] = dataclasses.field(
        default_factory=dict)
    compiles: list[tuple[int, str, int]] = dataclasses.field(default_factory=list)
    deps: dict[int, tuple[int, ...] | None] = dataclasses.field(default_factory=dict)
    memory: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (op index, device-resident bytes after it)


def sync_signals(rule: OpRule, itemsize: int, device: str) -> tuple[list[SignalRecord], list[TransferRecord]]:
    """A sync on a device operand; a scalar read also moves one element to the host."""
    signals = [SignalRecord(SignalKind.SYNC, rule.cause.value, 0, rule.hint)]
    transfers: list[TransferRecord] = []
    if rule.cause is Cause.ITEM:
        transfers.append(TransferRecord(Direction.D2H, itemsize, device, "cpu", "sync"))
        signals.append(SignalRecord(SignalKind.TRANSFER_D2H, Cause.ITEM.value, itemsize))
    return signals, transfers


def copy_signals(src_dtype: str, dst_dtype: str, src_contiguous: bool, dst_contiguous: bool,
                 nbytes: int) -> list[SignalRecord]:
    """What a copy on the device says about its ends: a dtype change, a non-contiguous end (nbytes: the destination's)."""
    signals = []
    if src_dtype != dst_dtype:
        signals.append(SignalRecord(SignalKind.COPY_DTYPE, f"{src_dtype}->{dst_dtype}", nbytes))
    if not src_contiguous or not dst_contiguous:
        which = "source" if not src_contiguous else "destination"
        signals.append(SignalRecord(SignalKind.COPY_NONCONTIGUOUS, f"non-contiguous {which}", nbytes))
    return signals


def placement(ev: OpEvent, region_device: str) -> Placement:
    """Where an operator ran, given the device the region works on."""
    if ev.graph_id is not None:
        return Placement.GRAPH
    ins = ev.tensors_in
    on_host = all(t.on_host for t in ins) and all(t.on_host for t in ev.outputs)
    if not on_host:
        return Placement.DEVICE
    if region_device == "cpu" or not ins or never_falls_back(ev.packet):
        return Placement.HOST
    return Placement.FALLBACK


def measured_signals(ev: OpEvent, region_device: str) -> tuple[list[SignalRecord], list[TransferRecord]]:
    """Signals and physical transfers that one measured operator implies."""
    signals: list[SignalRecord] = []
    transfers: list[TransferRecord] = []
    if ev.graph_id is not None:  # inside compiled code (or the graph call itself): one program
        return signals, transfers
    ends = copy_ends(ev.packet, ev.tensors_in, ev.outputs)
    if ends is not None:
        src, dst = ends
        d = direction(src.device, dst.device)
        if d is not None:
            transfers.append(TransferRecord(d, src.nbytes, src.device, dst.device, "explicit"))
            signals.append(SignalRecord(d.signal, Cause.EXPLICIT_COPY.value, src.nbytes))
        signals += copy_signals(src.dtype, dst.dtype, src.contiguous, dst.contiguous, dst.nbytes)
        return signals, transfers
    on_device = [t for t in ev.tensors_in if not t.on_host]
    rule = sync_cause(OpCall(ev.packet, bool_index=ev.bool_index)) if on_device else None
    if rule is not None:
        more, transfers = sync_signals(rule, on_device[0].itemsize, on_device[0].device)
        signals += more
    if placement(ev, region_device) is Placement.FALLBACK:
        signals.append(SignalRecord(SignalKind.CPU_FALLBACK, Cause.HOST_OPERANDS.value, 0, cause_hint(Cause.HOST_OPERANDS)))
    return signals, transfers

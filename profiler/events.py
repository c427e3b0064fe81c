"""Recorded operator events and the measured signals they imply (pure functions, unit-testable)."""

from __future__ import annotations

import dataclasses
import math

from portscope.ingest.schema import Direction, Placement, SignalKind

# Operators that move data between devices.
COPY_OPS = {"aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::to"}
# Operators whose result size depends on data: the host waits for the device.
SYNC_OPS = {
    "aten::_local_scalar_dense": "item",
    "aten::nonzero": "data-dependent-shape",
    "aten::masked_select": "data-dependent-shape",
    "aten::unique": "data-dependent-shape",
    "aten::_unique": "data-dependent-shape",
    "aten::_unique2": "data-dependent-shape",
    "aten::unique_dim": "data-dependent-shape",
    "aten::unique_consecutive": "data-dependent-shape",
    "aten::nonzero_static": None,
}
# Operators that create tensors rather than compute on inputs: never fallbacks.
_FACTORY_PREFIXES = ("aten::empty", "aten::zeros", "aten::ones", "aten::full", "aten::arange", "aten::scalar_tensor")


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


def copy_ends(ev: OpEvent) -> tuple[TensorInfo, TensorInfo] | None:
    """(source, destination) of a copy operator, or None for other operators."""
    if ev.packet not in COPY_OPS:
        return None
    ins = ev.tensors_in
    if ev.packet == "aten::copy_" and len(ins) >= 2:
        return ins[1], ins[0]
    if ev.packet in ("aten::_copy_from", "aten::_copy_from_and_resize") and len(ins) >= 2:
        return ins[0], ins[1]
    if ins and ev.outputs:
        return ins[0], ev.outputs[0]
    return None


def placement(ev: OpEvent, region_device: str) -> Placement:
    """Where an operator ran, given the device the region works on."""
    if ev.graph_id is not None:
        return Placement.GRAPH
    ins = ev.tensors_in
    on_host = all(t.on_host for t in ins) and all(t.on_host for t in ev.outputs)
    if not on_host:
        return Placement.DEVICE
    if region_device == "cpu" or not ins or ev.packet in COPY_OPS or ev.packet.startswith(_FACTORY_PREFIXES):
        return Placement.HOST
    return Placement.FALLBACK


def measured_signals(ev: OpEvent, region_device: str) -> tuple[list[SignalRecord], list[TransferRecord]]:
    """Signals and physical transfers that one measured operator implies."""
    signals: list[SignalRecord] = []
    transfers: list[TransferRecord] = []
    if ev.graph_id is not None:  # inside compiled code (or the graph call itself): one program
        return signals, transfers
    ends = copy_ends(ev)
    if ends is not None:
        src, dst = ends
        d = direction(src.device, dst.device)
        if d is not None:
            transfers.append(TransferRecord(d, src.nbytes, src.device, dst.device, "explicit"))
            signals.append(SignalRecord(d.signal, "explicit-copy", src.nbytes))
        if src.dtype != dst.dtype:
            signals.append(SignalRecord(SignalKind.COPY_DTYPE, f"{src.dtype}->{dst.dtype}", dst.nbytes))
        if not src.contiguous or not dst.contiguous:
            which = "source" if not src.contiguous else "destination"
            signals.append(SignalRecord(SignalKind.COPY_NONCONTIGUOUS, f"non-contiguous {which}", dst.nbytes))
        return signals, transfers
    ins = ev.tensors_in
    on_device = [t for t in ins if not t.on_host]
    if ev.packet in SYNC_OPS and on_device:
        why = SYNC_OPS[ev.packet]
        if why is not None:
            signals.append(SignalRecord(SignalKind.SYNC, why))
            if ev.packet == "aten::_local_scalar_dense":
                size = on_device[0].itemsize
                transfers.append(TransferRecord(Direction.D2H, size, on_device[0].device, "cpu", "sync"))
                signals.append(SignalRecord(SignalKind.TRANSFER_D2H, "item", size))
    elif ev.bool_index and on_device:
        signals.append(SignalRecord(SignalKind.SYNC, "boolean-index"))
    if placement(ev, region_device) is Placement.FALLBACK:
        signals.append(
            SignalRecord(SignalKind.CPU_FALLBACK, "host-operands", 0, "try: create or move the operands on the device")
        )
    return signals, transfers

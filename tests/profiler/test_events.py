"""Measured signals from recorded events (pure functions): every signal kind, without a GPU."""

from __future__ import annotations

from portscope.ingest import Direction, Placement, SignalKind
from portscope.profiler.events import OpEvent, TensorInfo, direction, measured_signals, placement


def t(shape: tuple[int, ...], device: str = "cuda:0", dtype: str = "float16", stride: tuple[int, ...] | None = None) -> TensorInfo:
    if stride is None:
        stride, acc = [], 1
        for n in reversed(shape):
            stride.insert(0, acc)
            acc *= n
    size = {"float16": 2, "float32": 4, "int64": 8, "bool": 1}[dtype]
    return TensorInfo(tuple(shape), tuple(stride), dtype, device, size)


def ev(name: str, ins: list, outs: list, bool_index: bool = False) -> OpEvent:
    return OpEvent(0, name, name.split(".")[0], ins, outs, 0, 1, bool_index=bool_index)


def kinds(signals) -> list[SignalKind]:  # noqa: ANN001
    return [s.kind for s in signals]


def test_direction() -> None:
    assert direction("cpu", "cuda:0") is Direction.H2D
    assert direction("cuda:0", "cpu") is Direction.D2H
    assert direction("cuda:0", "cuda:1") is Direction.D2D
    assert direction("cpu", "cpu") is None and direction("cuda:0", "cuda:0") is None


def test_to_copy_d2h_with_bytes() -> None:
    sig, tr = measured_signals(ev("aten::_to_copy", [t((4, 8))], [t((4, 8), "cpu")]), "cuda:0")
    assert kinds(sig) == [SignalKind.TRANSFER_D2H]
    assert tr[0].direction is Direction.D2H and tr[0].bytes == 64 and sig[0].bytes == 64


def test_copy_h2d_uses_source_and_destination() -> None:
    # copy_(self=dst on device, src on host)
    sig, tr = measured_signals(ev("aten::copy_", [t((10,)), t((10,), "cpu")], [t((10,))]), "cuda:0")
    assert kinds(sig) == [SignalKind.TRANSFER_H2D] and tr[0].bytes == 20


def test_dtype_changing_and_noncontiguous_copy() -> None:
    src = t((4, 8), dtype="float32", stride=(1, 4))  # transposed: not contiguous
    sig, tr = measured_signals(ev("aten::_to_copy", [src], [t((4, 8))]), "cuda:0")
    assert kinds(sig) == [SignalKind.COPY_DTYPE, SignalKind.COPY_NONCONTIGUOUS]
    assert sig[0].reason == "float32->float16" and not tr


def test_item_is_a_sync_and_a_small_d2h() -> None:
    sig, tr = measured_signals(ev("aten::_local_scalar_dense", [t(())], []), "cuda:0")
    assert kinds(sig) == [SignalKind.SYNC, SignalKind.TRANSFER_D2H]
    assert tr[0].bytes == 2


def test_nonzero_and_boolean_index_sync_on_device_only() -> None:
    assert kinds(measured_signals(ev("aten::nonzero", [t((8,))], [t((3, 1), dtype="int64")]), "cuda:0")[0]) == [SignalKind.SYNC]
    assert measured_signals(ev("aten::nonzero", [t((8,), "cpu")], [t((3, 1), "cpu", "int64")]), "cpu")[0] == []
    sig, _ = measured_signals(ev("aten::index.Tensor", [t((8,)), t((8,), dtype="bool")], [t((3,))], bool_index=True), "cuda:0")
    assert kinds(sig) == [SignalKind.SYNC] and sig[0].reason == "boolean-index"


def test_host_operator_in_device_region_is_a_fallback() -> None:
    e = ev("aten::neg", [t((8,), "cpu")], [t((8,), "cpu")])
    assert placement(e, "cuda:0") is Placement.FALLBACK
    sig, _ = measured_signals(e, "cuda:0")
    assert kinds(sig) == [SignalKind.CPU_FALLBACK] and sig[0].reason == "host-operands"
    # the same operator in a CPU-only region is just host work
    assert placement(e, "cpu") is Placement.HOST and measured_signals(e, "cpu")[0] == []
    # factories are never fallbacks
    assert placement(ev("aten::zeros", [], [t((8,), "cpu")]), "cuda:0") is Placement.HOST


def test_tensor_info_contiguity() -> None:
    assert t((2, 3)).contiguous
    assert not t((2, 3), stride=(1, 2)).contiguous
    assert t((1, 3), stride=(99, 1)).contiguous  # size-1 dims do not matter

"""Parity: one operator call gives the same signals measured, predicted and converted from Kineto.

Each row of the table is one call, the signals it must give (written by hand from the call: bytes are
numel x element size), and how each source sees it:

* measured: the recorder on the meta device (a device without data) where the call runs there,
  else the measured classification of the recorded event (``.item()``, ``masked_select``, boolean
  indexing and cross-device copies need data);
* predicted: the predictor for a permissive target (every dtype, no programs, copies on the device),
  with operands made inside the region (so they live on the device);
* kineto: the reader on an equivalent CUDA trace written by hand (the events torch.profiler records
  for that call); Kineto sees no dtypes or strides of copies (catalogue.PROVIDES).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from portscope.ingest.catalog import PROVIDES, Provider
from portscope.ingest.readers import read_kineto
from portscope.ingest.schema import SignalKind
from portscope.profiler import explain
from portscope.profiler.events import OpEvent, TensorInfo, measured_signals
from portscope.profiler.predict import Predictor, reset_program_cache

PERMISSIVE = """
[target]
name = "permissive"
device = "npu:0"
[compute]
dtypes = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"]
[cache]
programs = false
"""

Row = tuple[SignalKind, str | None, int]  # kind, reason (None for transfers: sources name copies differently), bytes


def _rows(signals: list[tuple[SignalKind, str | None, int]]) -> Counter:
    return Counter((k, None if k.is_transfer else r, b) for k, r, b in signals)


# ---- measured -----------------------------------------------------------------------------------


def _info(shape: tuple[int, ...], dtype: str, device: str = "npu:0") -> TensorInfo:
    stride, acc = [], 1
    for n in reversed(shape):
        stride.insert(0, acc)
        acc *= n
    return TensorInfo(shape, tuple(stride), dtype, device, {"float16": 2, "float32": 4, "int64": 8, "bool": 1}[dtype])


def _event(name: str, ins: list[TensorInfo], outs: list[TensorInfo], *, bool_index: bool = False) -> Callable[[], list]:
    def run() -> list:
        signals, _ = measured_signals(OpEvent(0, name, name.split(".")[0], list(ins), outs, 0, 1, bool_index=bool_index),
                                      "npu:0")
        return [(s.kind, s.reason, s.bytes) for s in signals]

    return run


def _on_meta(ops: set[str], fn: Callable[[str], None]) -> Callable[[], list]:
    def run() -> list:
        with explain("measured") as region:
            fn("meta")
        trace = region.to_trace()
        return [(SignalKind(s["kind"]), s["reason"], s["bytes"]) for s in trace["signals"].to_pylist()
                if s["op_name"] in ops]

    return run


# ---- predicted ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def permissive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("targets") / "permissive.toml"
    path.write_text(PERMISSIVE)
    return path


def _predicted(ops: set[str], fn: Callable[[str], None]) -> Callable[[Path], list]:
    def run(target: Path) -> list:
        reset_program_cache()
        with torch.no_grad(), explain("predicted", target=str(target)) as region:
            fn("cpu")
        trace = region.to_trace()
        return [(SignalKind(s["kind"]), s["reason"], s["bytes"]) for s in trace["signals"].to_pylist()
                if s["op_name"] in ops]

    return run


def _predicted_rules(name: str, src: torch.Tensor, dst: torch.Tensor) -> Callable[[Path], list]:
    """A copy operator CPU cannot dispatch (``_copy_from`` is for out-of-tree devices): the predictor's rules."""
    def run(target: Path) -> list:
        decision = Predictor(str(target))._rules(name, [src, dst], [], bool_index=False)
        assert decision.signal is None  # runs on the device
        return [(s.kind, s.reason, s.bytes) for s in decision.copy]

    return run


# ---- kineto -------------------------------------------------------------------------------------


def _op(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}


def _runtime(name: str, ts: float, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 2.0,
            "args": {"correlation": corr}}


def _memcpy(direction: str, ts: float, corr: int, nbytes: int) -> dict:
    return {"ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy {direction} (Device -> Pageable)", "pid": 0, "tid": 7,
            "ts": ts, "dur": 1.0, "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": nbytes}}


def _kernel(name: str, ts: float, corr: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 1.0,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


def _data_dependent(outer: str) -> list[dict]:
    """`outer` around aten::nonzero, which copies the element count to the host and waits (as on CUDA)."""
    return [_op(outer, 0, 100), _op("aten::nonzero", 10, 60), _runtime("cudaLaunchKernel", 12, 1),
            _kernel("nonzero_kernel", 14, 1), _runtime("cudaMemcpyAsync", 20, 2), _memcpy("DtoH", 22, 2, 8),
            _runtime("cudaStreamSynchronize", 30, 3), _runtime("cudaLaunchKernel", 80, 4), _kernel("index_kernel", 82, 4)]


def _kineto_run(events: list[dict], tmp: Path) -> list:
    path = tmp / "trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events}, f)
    trace = read_kineto(path, infer_fallback=True)
    return [(SignalKind(s["kind"]), s["reason"], s["bytes"]) for s in trace["signals"].to_pylist()]


# ---- the table ----------------------------------------------------------------------------------


def _item(device: str) -> None:
    torch.ones(1, device=device).item()


def _masked_select(device: str) -> None:
    x = torch.ones(4, 8, device=device)
    torch.masked_select(x, x > 0)


def _bool_index(device: str) -> None:
    x = torch.ones(4, 8, device=device)
    x[x > 0]


def _to_half(device: str) -> None:
    torch.ones(4, 8, device=device).to(torch.float16)


def _strided_write(device: str) -> None:
    torch.empty(8, 4, device=device).t().copy_(torch.ones(4, 8, device=device))


def _positions(device: str) -> None:
    torch.arange(7, device=device) + 1  # int64 factory and index arithmetic


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    expected: list[Row]
    measured: Callable[[], list]
    predicted: Callable[[Path], list]
    kineto: list[dict] | None  # None: Kineto records nothing this case is about
    # kinds a source cannot see in this case, and why (beyond catalogue.PROVIDES)
    unseen: dict[Provider, frozenset[SignalKind]] = dataclasses.field(default_factory=dict)


_COPY_KINDS = frozenset({SignalKind.TRANSFER_D2H, SignalKind.TRANSFER_H2D})
CASES = [
    Case("item", [(SignalKind.SYNC, "item", 0), (SignalKind.TRANSFER_D2H, None, 4)],
         _event("aten::_local_scalar_dense", [_info((1,), "float32")], []),
         _predicted({"aten::_local_scalar_dense"}, _item),
         [_op("aten::item", 0, 50), _op("aten::_local_scalar_dense", 5, 40), _runtime("cudaMemcpyAsync", 10, 1),
          _memcpy("DtoH", 12, 1, 4), _runtime("cudaStreamSynchronize", 20, 2)]),
    Case("masked_select", [(SignalKind.SYNC, "data-dependent-shape", 0)],
         _event("aten::masked_select", [_info((4, 8), "float32"), _info((4, 8), "bool")], [_info((32,), "float32")]),
         _predicted({"aten::masked_select"}, _masked_select),
         _data_dependent("aten::masked_select"),
         # the element count nonzero copies to the host happens inside the kernel: dispatch cannot see it
         unseen={Provider.KINETO: _COPY_KINDS}),
    Case("boolean index", [(SignalKind.SYNC, "boolean-index", 0)],
         _event("aten::index.Tensor", [_info((4, 8), "float32"), _info((4, 8), "bool")], [_info((32,), "float32")],
                bool_index=True),
         _predicted({"aten::index.Tensor"}, _bool_index),
         _data_dependent("aten::index"),
         unseen={Provider.KINETO: _COPY_KINDS}),
    Case("_copy_from device -> host, float32 -> float16",
         [(SignalKind.TRANSFER_D2H, None, 128), (SignalKind.COPY_DTYPE, "float32->float16", 64)],
         _event("aten::_copy_from", [_info((4, 8), "float32"), _info((4, 8), "float16", "cpu")], []),
         _predicted_rules("aten::_copy_from", torch.ones(4, 8), torch.ones(4, 8, dtype=torch.float16)),
         [_op("aten::_copy_from", 0, 50), _runtime("cudaMemcpyAsync", 10, 1), _memcpy("DtoH", 12, 1, 128)],
         # a predicted run executes on the host: residency, not copy operators, makes its transfers
         unseen={Provider.PREDICTED: _COPY_KINDS}),
    Case("_copy_from host -> device, float16 -> float32",
         [(SignalKind.TRANSFER_H2D, None, 64), (SignalKind.COPY_DTYPE, "float16->float32", 128)],
         _event("aten::_copy_from", [_info((4, 8), "float16", "cpu"), _info((4, 8), "float32")], []),
         _predicted_rules("aten::_copy_from", torch.ones(4, 8, dtype=torch.float16), torch.ones(4, 8)),
         [_op("aten::_copy_from", 0, 50), _runtime("cudaMemcpyAsync", 10, 1), _memcpy("HtoD", 12, 1, 64)],
         unseen={Provider.PREDICTED: _COPY_KINDS}),
    Case("dtype-changing copy", [(SignalKind.COPY_DTYPE, "float32->float16", 64)],
         _on_meta({"aten::_to_copy"}, _to_half), _predicted({"aten::_to_copy"}, _to_half), None),
    Case("strided write", [(SignalKind.COPY_NONCONTIGUOUS, "non-contiguous destination", 128)],
         _on_meta({"aten::copy_"}, _strided_write), _predicted({"aten::copy_"}, _strided_write), None),
    Case("int64 factory and index arithmetic", [],
         _on_meta({"aten::arange", "aten::add.Tensor"}, _positions),
         _predicted({"aten::arange", "aten::add.Tensor"}, _positions),
         [_op("aten::arange", 0, 20), _runtime("cudaLaunchKernel", 2, 1), _kernel("arange_kernel", 4, 1),
          _op("aten::add", 30, 20), _runtime("cudaLaunchKernel", 32, 2), _kernel("add_kernel", 34, 2)]),
]


def _compared(provider: Provider, case: Case) -> frozenset[SignalKind]:
    return PROVIDES[provider] - case.unseen.get(provider, frozenset())


def _restricted(rows: list, kinds: frozenset[SignalKind]) -> Counter:
    return _rows([r for r in rows if r[0] in kinds])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_measured_predicted_and_kineto_agree(case: Case, permissive: Path, tmp_path: Path) -> None:
    sources: dict[Provider, list] = {Provider.MEASURED: case.measured(), Provider.PREDICTED: case.predicted(permissive)}
    if case.kineto is not None:
        sources[Provider.KINETO] = _kineto_run(case.kineto, tmp_path)
    for provider, got in sources.items():
        kinds = _compared(provider, case)
        assert _restricted(got, kinds) == _restricted(case.expected, kinds), provider


def test_every_case_compares_something() -> None:
    """A row whose expected signals no source compares would pass whatever the code did."""
    for case in CASES:
        if not case.expected:  # "no signal" rows: every source must compare fallbacks
            assert all(SignalKind.CPU_FALLBACK in _compared(p, case) for p in (Provider.MEASURED, Provider.PREDICTED))
        for row in case.expected:
            assert any(row[0] in _compared(p, case) for p in (Provider.MEASURED, Provider.PREDICTED, Provider.KINETO))


def test_predictor_sees_keyword_tensors(tmp_path: Path) -> None:
    """attn_mask is keyword-only in the fused attention kernel: a host-made mask must cross to the device."""
    target = tmp_path / "no-tril.toml"  # tril has no kernel: the mask it makes is on the host
    target.write_text(PERMISSIVE.replace('name = "permissive"', 'name = "no-tril"') + '[kernels]\nmissing = ["aten::tril"]\n')
    mask = torch.ones(1, 1, 8, 8)
    reset_program_cache()
    with torch.no_grad(), explain("kwargs", target=str(target)) as region:
        q = torch.ones(1, 2, 8, 16)
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, attn_mask=torch.tril(mask))
    rows = [(s["kind"], s["reason"], s["bytes"]) for s in region.to_trace()["signals"].to_pylist()
            if s["op_name"].startswith("aten::_scaled_dot_product")]
    assert rows == [(SignalKind.TRANSFER_H2D.value, "device-input", 1 * 1 * 8 * 8 * 4)]


def test_fp16_target_index_arithmetic_is_not_a_float16_question() -> None:
    reset_program_cache()
    with torch.no_grad(), explain("positions", target="fp16-npu") as region:
        _positions("cpu")
    rows = [(s["kind"], s["op_name"], s["reason"], s["note"]) for s in region.to_trace()["signals"].to_pylist()
            if s["kind"] == SignalKind.CPU_FALLBACK.value]
    assert len(rows) == 1
    kind, op, reason, note = rows[0]
    assert (op, reason) == ("aten::add.Tensor", "index-dtype-not-supported")  # arange is a factory: no fallback
    assert "float16" not in note


def test_a_nested_region_cannot_predict_for_another_target() -> None:
    from portscope.ingest.errors import UsageError

    with torch.no_grad(), explain("outer", target="fp16-npu"):
        with explain("same", target="fp16-npu"):  # the same target: shares the outer predictor
            torch.ones(2) + 1
        with pytest.raises(UsageError, match="target bf16-npu .* differs from the enclosing region's target fp16-npu"):
            with explain("inner", target="bf16-npu"):
                pass


def test_two_target_files_with_one_name_share_no_programs(tmp_path: Path) -> None:
    """Programs are cached per target (its whole content), not per name: the second file compiles its own."""
    text = '[target]\nname = "same"\ndevice = "npu:0"\n[compute]\ndtypes = ["float32"{extra}]\n'
    paths = []
    for i, extra in enumerate(("", ', "float16"')):
        paths.append(tmp_path / f"t{i}.toml")
        paths[-1].write_text(text.format(extra=extra))
    reset_program_cache()
    recompiles = []
    for path in paths:
        with torch.no_grad(), explain("r", target=str(path)) as region:
            x = torch.ones(4)
            x + 1
        recompiles.append(sum(1 for s in region.to_trace()["signals"].to_pylist() if s["kind"] == "dispatch/recompile"))
    assert recompiles == [2, 2]  # ones and add compile for each target file

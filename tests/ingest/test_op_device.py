"""Device time per operator (`report --ops`) and the port diff (`diff --ops`): a tiny CUDA / ROCm pair written
here with every figure worked out by hand, and the real files in ../shared/fixtures/kineto (figures read from
their raw events: the kernels whose runtime call lies inside the operator, by correlation id)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_pair import CONTROL, TEST
from kineto_pair import convert as convert_pair
from port_pair import CUDA, ROCM, convert

from portscope.app.cli import main
from portscope.ingest import read_trace, write_trace
from portscope.ingest.op_categories import OpCategory, is_communication, kernel_category, operator_category
from portscope.ingest.op_device import category_totals, device_by_operator, op_calls
from portscope.ingest.port_diff import port_diff
from portscope.ingest.readers import read_kineto
from portscope.ingest.readers.ascend_trace import read_ascend_trace

SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "kineto"


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return convert(tmp_path, "cuda", CUDA), convert(tmp_path, "rocm", ROCM)


def test_operator_categories_by_name() -> None:
    assert operator_category("aten::addmm") is OpCategory.GEMM
    assert operator_category("AddmmBackward0") is OpCategory.GEMM
    assert operator_category("autograd::engine::evaluate_function: NativeLayerNormBackward0") is OpCategory.NORMALIZATION
    assert operator_category("aten::relu_") is OpCategory.ELEMENTWISE
    assert operator_category("aten::miopen_convolution") is OpCategory.CONVOLUTION
    assert operator_category("aten::_scaled_dot_product_efficient_attention") is OpCategory.ATTENTION
    assert operator_category("c10d::allreduce_") is OpCategory.COMMUNICATION
    assert operator_category("npu_rms_norm") is OpCategory.NORMALIZATION
    assert operator_category("aten::_softmax") is OpCategory.REDUCTION
    assert operator_category("aten::_to_copy") is OpCategory.COPY
    assert operator_category("aten::view") is OpCategory.OTHER
    assert operator_category("aten::add.Tensor") is OpCategory.ELEMENTWISE  # an overload's name


def test_kernel_categories_by_name() -> None:
    assert kernel_category("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32") is OpCategory.CONVOLUTION  # not GEMM
    assert kernel_category("igemm_fwd_gtcx_nchw_fp32") is OpCategory.CONVOLUTION
    assert kernel_category("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT128x144x64") is OpCategory.GEMM
    assert kernel_category("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16>") is OpCategory.GEMM
    assert kernel_category("fbgemm_gpu::permute_2D_data_kernel") is None  # "fbgemm" is a library, not a GEMM
    assert kernel_category("attn_fwd") is OpCategory.ATTENTION
    assert kernel_category("triton_poi_fused_add_mul_0") is OpCategory.ELEMENTWISE
    assert kernel_category("triton_red_fused_sum_1") is OpCategory.REDUCTION
    assert kernel_category("ncclKernel_AllReduce_RING_LL_Sum_float") is OpCategory.COMMUNICATION
    assert kernel_category("hcom_broadcast_") is OpCategory.COMMUNICATION  # Ascend's collectives (the 591-kernel table)
    assert is_communication("gloo:all_reduce") and is_communication("c10d::broadcast_") and not is_communication("aten::add")
    assert kernel_category("Memcpy DtoH (Device -> Pinned)") is OpCategory.COPY
    assert kernel_category("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel") is OpCategory.NORMALIZATION
    assert kernel_category("indexSelectLargeIndex") is None  # the operator decides
    assert kernel_category("aten::mm.out") is OpCategory.GEMM  # a predicted kernel, named after its operator
    assert kernel_category("prims::convert_element_type") is None


def test_device_time_per_operator_by_hand(pair: tuple[Path, Path]) -> None:
    calls = op_calls(read_trace(pair[0]))
    rows = device_by_operator(calls).set_index("operator")
    assert calls.device_ns == 74_000 and calls.unattributed_ns == 4_000
    conv = rows.loc["aten::cudnn_convolution"]
    assert (conv["calls"], conv["device_calls"], conv["device_self_ns"], conv["device_total_ns"]) == (1, 1, 35_000, 35_000)
    assert conv["category"] == "convolution" and conv["share"] == pytest.approx(35 / 74)
    assert rows.loc["aten::conv2d", ["device_self_ns", "device_total_ns", "cpu_ns"]].tolist() == [0, 35_000, 50_000]
    assert rows.loc["aten::_convolution", ["device_self_ns", "device_total_ns", "cpu_ns"]].tolist() == [0, 35_000, 46_000]
    assert rows.loc["aten::add", ["calls", "device_calls", "device_self_ns", "cpu_ns"]].tolist() == [2, 1, 3_000, 20_000]
    assert rows.loc["aten::linear", ["device_self_ns", "device_total_ns", "category"]].tolist() == [0, 12_000, "GEMM"]
    assert list(rows.index[:4]) == ["aten::cudnn_convolution", "aten::_scaled_dot_product_flash_attention", "aten::addmm", "aten::add"]
    totals = category_totals(calls).set_index("category")["device_ns"].to_dict()
    assert totals == {"GEMM": 12_000, "attention": 20_000, "convolution": 35_000, "elementwise": 3_000, "reduction": 0,
                      "normalization": 0, "copy": 4_000, "communication": 0, "other": 0}  # fmt: skip


def test_report_ops_cli(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(pair[1]), "--ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["ops"][0]) == {"operator", "calls", "device_calls", "device_self_ns", "device_total_ns", "cpu_ns",
                                   "category", "share"}  # fmt: skip
    first = data["ops"][0]
    assert (first["operator"], first["device_self_ns"], first["category"]) == ("aten::miopen_convolution", 50_000, "convolution")
    assert data["device_ns"] == 94_000 and data["unattributed_device_ns"] == 0
    assert main(["report", str(pair[1]), "--ops", "--region", "ProfilerStep#1"]) == 0
    out = capsys.readouterr().out
    assert "regions named 'ProfilerStep#1': 94.0 us of device work" in out
    assert out.splitlines()[2].split() == ["1", "1", "50.0", "50.0", "44.0", "53.2%", "convolution", "aten::miopen_convolution"]
    assert main(["report", str(pair[1]), "--ops", "--region", "nope"]) == 2


def test_port_diff_aligns_what_backends_lower_differently(pair: tuple[Path, Path]) -> None:
    diff = port_diff(read_trace(pair[0]), None, read_trace(pair[1]), None)
    rows = diff.ops.set_index("operator")
    conv = rows.loc["aten::_convolution"]  # the lowest operator both sides have
    assert (conv["a_device_self_ns"], conv["b_device_self_ns"], conv["delta_ns"]) == (35_000, 50_000, 15_000)
    assert conv["a_ops"] == ["aten::cudnn_convolution"] and conv["b_ops"] == ["aten::miopen_convolution"]
    assert conv["category"] == "convolution" and conv["ratio"] == pytest.approx(50 / 35)
    sdpa = rows.loc["aten::scaled_dot_product_attention"]
    assert (sdpa["a_device_self_ns"], sdpa["b_device_self_ns"]) == (20_000, 30_000)
    assert sdpa["a_ops"] == ["aten::_scaled_dot_product_flash_attention"] and sdpa["b_ops"] == ["aten::_efficient_attention_forward"]
    assert rows.loc["aten::addmm", ["a_calls", "b_calls", "a_device_self_ns", "b_device_self_ns", "a_ops"]].tolist() == [1, 1, 12_000, 10_000, []]
    assert rows.loc["aten::add", ["a_calls", "b_calls", "a_device_self_ns", "b_device_self_ns"]].tolist() == [2, 2, 3_000, 4_000]
    for one_sided in ("aten::cudnn_convolution", "aten::miopen_convolution", "aten::_efficient_attention_forward"):
        assert one_sided not in rows.index
    assert list(diff.ops["operator"][:3]) == ["aten::_convolution", "aten::scaled_dot_product_attention", "aten::add"]
    assert diff.ops["operator"].iloc[-1] == "aten::addmm"  # what got faster last
    cats = diff.categories.set_index("category")
    assert cats.loc["convolution", ["a_device_ns", "b_device_ns"]].tolist() == [35_000, 50_000]
    assert cats.loc["copy", ["a_device_ns", "b_device_ns"]].tolist() == [4_000, 0]
    assert cats.loc["GEMM", ["a_device_ns", "b_device_ns"]].tolist() == [12_000, 10_000]
    assert diff.unattributed == (4_000, 0)


def test_diff_ops_cli_json(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(pair[0]), str(pair[1]), "--ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["op_diff"]
    row = next(r for r in data["ops"] if r["operator"] == "aten::_convolution")
    assert (row["a_device_self_ns"], row["b_device_self_ns"]) == (35_000, 50_000)
    cats = {r["category"]: (r["a_device_ns"], r["b_device_ns"]) for r in data["categories"]}
    assert cats["attention"] == (20_000, 30_000) and len(cats) == len(OpCategory)
    assert main(["diff", str(pair[0]), str(pair[1]), "--ops"]) == 0
    out = capsys.readouterr().out
    assert "as A: aten::cudnn_convolution; as B: aten::miopen_convolution" in out


def _shared(name: str) -> Path:
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


@pytest.mark.parametrize(("name", "expected"), [
    # (operator, calls, device calls, self ns, total ns), summed by hand from the raw events of each file (alexnet:
    # _convolution holds cudnn_convolution's 5,375 us and the bias add_'s 958 us)
    ("bert_small_h100.json.gz", [("aten::addmm", 26, 26, 197_598, 197_598), ("aten::linear", 26, 26, 0, 197_598),
                                 ("aten::_flash_attention_forward", 4, 4, 37_408, 37_408),
                                 ("aten::_local_scalar_dense", 1, 1, 2_240, 2_240), ("aten::view", 94, 0, 0, 0)]),
    ("bert_small_mi300.json.gz", [("aten::addmm", 26, 26, 174_130, 174_130), ("aten::native_layer_norm", 10, 10, 39_519, 39_519),
                                  ("aten::scaled_dot_product_attention", 4, 4, 0, 113_656)]),
    ("cuda_alexnet_small.json.gz", [("aten::cudnn_convolution", 10, 10, 5_375_000, 5_375_000),
                                    ("aten::_convolution", 10, 10, 0, 6_333_000), ("aten::addmm", 6, 6, 2_664_000, 2_664_000),
                                    ("aten::copy_", 18, 16, 55_503_000, 55_503_000)]),
    ("rocm_mi250_small.json.gz", [("aten::addmm", 1, 1, 24_480, 24_480), ("aten::mm", 1, 1, 12_640, 12_640),
                                  ("aten::copy_", 2, 2, 38_161, 38_161), ("aten::mse_loss", 1, 1, 8_320, 19_360)]),
])  # fmt: skip
def test_real_bert_device_time(name: str, expected: list[tuple], tmp_path: Path) -> None:
    trace = read_trace(write_trace(read_kineto(_shared(name)), tmp_path / "t.arrow"))
    rows = device_by_operator(op_calls(trace)).set_index("operator")
    for op, calls, device_calls, self_ns, total_ns in expected:
        assert rows.loc[op, ["calls", "device_calls", "device_self_ns", "device_total_ns"]].tolist() == [calls, device_calls, self_ns, total_ns]


def test_real_eager_vs_compiled(tmp_path: Path) -> None:
    """The control (eager) / test (compiled) pair: the compiled step's kernels sit in CompiledFunction and
    CompiledFunctionBackward; device work launched before the test trace began is launched by no operator.
    Figures summed from the raw events (runtime call's innermost cpu_op on its thread)."""
    a, b = (read_trace(write_trace(read_kineto(_shared(f"cuda_diff_{s}.json.gz")), tmp_path / f"{s}.arrow")) for s in ("control", "test"))
    diff = port_diff(a, None, b, None)
    rows = diff.ops.set_index("operator")
    assert rows.loc["CompiledFunctionBackward", ["a_calls", "b_device_self_ns"]].tolist() == [0, 171_432_000]
    assert rows.loc["CompiledFunction", "b_device_self_ns"] == 95_694_000
    assert rows.loc["aten::mm", "b_device_self_ns"] == 12_961_000
    assert diff.unattributed[1] == 68_798_000
    cats = diff.categories.set_index("category")
    assert cats["b_device_ns"].sum() == op_calls(b).device_ns


def test_torch_npu_trace_view_device_time(tmp_path: Path) -> None:
    """torch_npu's trace view: kernels joined to their operator by the launch flows (the reader's translation),
    one MatMul of 8 µs inside aten::mm inside aten::linear, one Add of 3 µs."""
    header = [{"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "Python"}},
              {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Ascend Hardware"}},
              {"ph": "M", "name": "thread_name", "pid": 7, "tid": 3, "args": {"name": "Stream 3"}}]  # fmt: skip

    def op(name: str, ts: str, dur: float) -> dict:
        return {"ph": "X", "name": name, "cat": "cpu_op", "pid": 100, "tid": 100, "ts": ts, "dur": dur}

    def kernel(name: str, ts: str, dur: float, flow: int, host_ts: str) -> list[dict]:
        return [{"ph": "X", "name": name, "pid": 7, "tid": 3, "ts": ts, "dur": dur, "args": {"Task Type": "AI_CORE"}},
                {"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": flow, "pid": 100, "tid": 100, "ts": host_ts},
                {"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": flow, "pid": 7, "tid": 3, "ts": ts, "bp": "e"}]  # fmt: skip

    events = [op("aten::linear", "1000.000", 80), op("aten::mm", "1001.000", 50), *kernel("MatMul", "1020.000", 8, 1, "1001.000"),
              op("aten::add", "1100.000", 20), *kernel("Add", "1130.000", 3, 2, "1100.000")]  # fmt: skip
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps([*header, *events]))
    rows = device_by_operator(op_calls(read_ascend_trace(path))).set_index("operator")
    assert rows.loc["aten::mm", ["device_self_ns", "device_total_ns", "category"]].tolist() == [8_000, 8_000, "GEMM"]
    assert rows.loc["aten::linear", ["device_calls", "device_self_ns", "device_total_ns"]].tolist() == [1, 0, 8_000]
    assert rows.loc["aten::add", ["device_self_ns", "share"]].tolist() == [3_000, pytest.approx(3 / 11)]


def test_port_diff_by_model_line(tmp_path: Path) -> None:
    """tests/ingest/kineto_pair.py: A's model.py:12 runs aten::mm (gemm_a, 4 µs), model.py:20 aten::add twice (a
    4 µs kernel each); B's model.py:12 runs CompiledFunction (gemm_b and add_kernel, 4 µs each), model.py:20
    aten::add once (4 µs); B's stale kernel was launched before its trace began (no operator, no line)."""
    a, b = (read_trace(convert_pair(tmp_path, name, events)) for name, events in (("control", CONTROL), ("test", TEST)))
    diff = port_diff(a, None, b, None)
    assert diff.lines.to_dict("records") == [
        {"line": "model.py:12 (forward)", "a_device_ns": 4_000, "b_device_ns": 8_000, "delta_ns": 4_000, "ratio": 2.0},
        {"line": "model.py:20 (forward)", "a_device_ns": 8_000, "b_device_ns": 4_000, "delta_ns": -4_000, "ratio": 0.5},
    ]
    rows = diff.ops.set_index("operator")
    assert rows.loc["CompiledFunction", ["a_calls", "b_calls", "b_device_self_ns"]].tolist() == [0, 1, 8_000]
    assert rows.loc["aten::mm", ["a_calls", "b_calls", "a_device_self_ns"]].tolist() == [1, 0, 4_000]
    assert diff.unattributed == (0, 2_000)

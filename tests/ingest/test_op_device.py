"""Device time per operator (`report --ops`) and the port diff (`diff --ops`): a tiny CUDA / ROCm pair written
here with every figure worked out by hand, and the real files in ../shared/fixtures/kineto (figures read from
their raw events: the kernels whose runtime call lies inside the operator, by correlation id)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_pair import event as ev

from portscope.app.cli import main
from portscope.ingest import read_trace, write_trace
from portscope.ingest.op_categories import OpCategory, kernel_category, operator_category
from portscope.ingest.op_device import category_totals, device_by_operator, op_calls
from portscope.ingest.port_diff import port_diff
from portscope.ingest.readers import read_kineto

SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "kineto"


def nest(names: list[str], ts: float, dur: float) -> list[dict]:
    """Operators each one µs inside the one before."""
    return [ev("cpu_op", n, ts + i, dur - 2 * i) for i, n in enumerate(names)]


def launch(call: str, ts: float, corr: int, kernel: str, at: float, dur: float, cat: str = "kernel") -> list[dict]:
    return [ev("cuda_runtime", call, ts, 1, correlation=corr), ev(cat, kernel, at, dur, correlation=corr)]


# CUDA: conv2d > convolution > _convolution > cudnn_convolution launches an implicit-GEMM kernel (30 µs) and a
# layout kernel (5 µs); SDPA > flash launches a flash kernel (20 µs); linear > addmm a GEMM (12 µs); aten::add
# twice, once with a kernel (3 µs); a copy launched outside any operator (4 µs).
CUDA = [
    ev("user_annotation", "ProfilerStep#1", 0, 300),
    *nest(["aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution"], 10, 50),
    *launch("cudaLaunchKernel", 14, 1, "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw", 400, 30),
    *launch("cudaLaunchKernel", 20, 2, "void cudnn::ops::nchwToNhwcKernel<float>", 431, 5),
    *nest(["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention"], 70, 40),
    *launch("cudaLaunchKernel", 72, 3, "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>", 440, 20),
    *nest(["aten::linear", "aten::addmm"], 120, 40),
    *launch("cudaLaunchKernel", 122, 4, "ampere_sgemm_64x64_nn", 461, 12),
    ev("cpu_op", "aten::add", 170, 10),
    *launch("cudaLaunchKernel", 171, 5, "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>", 474, 3),
    ev("cpu_op", "aten::add", 185, 10),
    *launch("cudaMemcpyAsync", 200, 6, "Memcpy HtoD (Pageable -> Device)", 480, 4, cat="gpu_memcpy"),
]
# ROCm: the same model; MIOpen convolution (50 µs), efficient attention (30 µs), a Tensile GEMM (10 µs), add (4 µs).
ROCM = [
    ev("user_annotation", "ProfilerStep#1", 0, 300),
    *nest(["aten::conv2d", "aten::convolution", "aten::_convolution", "aten::miopen_convolution"], 10, 50),
    *launch("hipLaunchKernel", 14, 1, "igemm_fwd_gtcx_nchw_fp32_bx0_ex1_bt128x128x16", 400, 50),
    *nest(["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_efficient_attention",
           "aten::_efficient_attention_forward"], 70, 40),
    *launch("hipLaunchKernel", 74, 3, "attn_fwd", 451, 30),
    *nest(["aten::linear", "aten::addmm"], 120, 40),
    *launch("hipExtModuleLaunchKernel", 122, 4, "Cijk_Alik_Bljk_SB_MT64x64x16_MI32x32x2x1", 482, 10),
    ev("cpu_op", "aten::add", 170, 10),
    *launch("hipLaunchKernel", 171, 5, "void at::native::elementwise_kernel<128, 2, add_kernel>", 493, 4),
    ev("cpu_op", "aten::add", 185, 10),
]


def convert(tmp_path: Path, name: str, events: list[dict]) -> Path:
    source = tmp_path / f"{name}.json"
    source.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return write_trace(read_kineto(source), tmp_path / f"{name}.arrow")


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
    assert kernel_category("Memcpy DtoH (Device -> Pinned)") is OpCategory.COPY
    assert kernel_category("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel") is OpCategory.NORMALIZATION
    assert kernel_category("indexSelectLargeIndex") is None  # the operator decides


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
    # (operator, calls, device calls, self ns, total ns), summed by hand from the raw events of each file
    ("bert_small_h100.json.gz", [("aten::addmm", 26, 26, 197_598, 197_598), ("aten::linear", 26, 26, 0, 197_598),
                                 ("aten::_flash_attention_forward", 4, 4, 37_408, 37_408),
                                 ("aten::_local_scalar_dense", 1, 1, 2_240, 2_240), ("aten::view", 94, 0, 0, 0)]),
    ("bert_small_mi300.json.gz", [("aten::addmm", 26, 26, 174_130, 174_130), ("aten::native_layer_norm", 10, 10, 39_519, 39_519),
                                  ("aten::scaled_dot_product_attention", 4, 4, 0, 113_656)]),
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

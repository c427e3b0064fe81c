"""A tiny hand-written CUDA / ROCm pair of the same model, lowered differently by each backend: the port diff's
figures are worked out by hand in tests/ingest/test_op_device.py; the viewer's browser test shows it too."""

from __future__ import annotations

import json
from pathlib import Path

from kineto_pair import event as ev

from portscope.ingest import write_trace
from portscope.ingest.readers import read_kineto


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

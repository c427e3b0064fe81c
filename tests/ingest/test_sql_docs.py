"""Every query of docs/sql.md runs on the sample traces its first line names, and gives the figures written here.

The expected figures were read off other commands on the same files, never off `portscope sql`:
`portscope report` (regions, walls, signals with their reasons and call sites, peak memory, d2h bytes in
`--json`), `portscope report --ops` (self device time and CPU time per operator), `portscope diff --ops` (runtime
calls by name; kernels by name) and, for compile times and kernels outside any region, the trace's own
`compiles` and `engine_slices` tables summed with pyarrow.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from portscope.ingest.sql import VIEWS, connect, open_runs, run_query

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "sql.md"
QUERY = re.compile(r"^### (\d+)\. ([^\n]+)\n.*?```sql\n-- runs: ([^\n]+)\n(.*?)```", re.M | re.S)
SITE = "transformers/modeling_attn_mask_utils.py:429 (_prepare_4d_attention_mask_for_sdpa) <- transformers/models/bert/modeling_bert.py:1001 (forward)"
LLAMA = "transformers/models/llama/modeling_llama.py"
DTYPE = "dtype-not-supported"
INDEX = "index-dtype-not-supported"

EXPECTED: dict[int, list[tuple]] = {
    # report --ops --region 'ProfilerStep#6' / 'forward:cold' / 'forward:warm': self device µs and device calls
    1: [("bert_small_h100", "ProfilerStep#6", "aten::addmm", 26, 197.6),
        ("bert_small_h100", "ProfilerStep#6", "aten::_flash_attention_forward", 4, 37.4),
        ("bert_small_h100", "ProfilerStep#6", "aten::native_layer_norm", 10, 30.9),
        ("llama_fp16-npu_forward", "forward:cold", "aten::mul.Tensor", 25, 82.4),
        ("llama_fp16-npu_forward", "forward:cold", "aten::mm", 17, 42.0),
        ("llama_fp16-npu_forward", "forward:cold", "aten::_to_copy", 6, 30.6),
        ("llama_fp16-npu_forward", "forward:warm", "aten::mul.Tensor", 25, 82.4),
        ("llama_fp16-npu_forward", "forward:warm", "aten::mm", 17, 42.0),
        ("llama_fp16-npu_forward", "forward:warm", "aten::_to_copy", 6, 30.6)],
    # report: ProfilerStep#6 has one cudaDeviceSynchronize and one item (at :429); the file's region a third
    2: [("bert_small_h100", "ProfilerStep#6", "cudaDeviceSynchronize", "cudaDeviceSynchronize", None),
        ("bert_small_h100", "ProfilerStep#6", "aten::item", "item", SITE),
        ("bert_small_h100", "bert_small_h100.json.gz", "cudaDeviceSynchronize", "cudaDeviceSynchronize", None)],
    # report --json: transfers.d2h_bytes per region; report: transfer/d2h counts
    3: [("llama_fp16-npu_forward", "forward:cold", 17, 21592),
        ("llama_fp16-npu_forward", "forward:warm", 17, 21592),
        ("llama_fp16-npu_generate", "generate #1 (7-token prompt)", 109, 162788),
        ("llama_fp16-npu_generate", "generate #2 (7-token prompt)", 109, 162788),
        ("llama_fp16-npu_generate", "generate #3 (12-token prompt)", 109, 178308)],
    # engine_slices of device engines summed by name with pyarrow (diff --ops agrees inside its region)
    4: [("Memcpy DtoD (Device -> Device)", 18, 4645, 2735.0, 92932.0, 90197.0),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 18, 21, 32880.0, 92082.0, 59202.0),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", 42, 43, 130655.0, 159259.0, 28604.0),
        ("Memcpy HtoD (Pinned -> Device)", 150, 151, 50656.0, 66643.0, 15987.0),
        ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>"
         "(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, "
         "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
         72, 79, 8364.0, 21710.0, 13346.0)],
    # report: forward has the SDPA shape-condition fallback 2x per region; eager_vs_compiled's eager regions
    # have sum 2x, bitwise_and 2x and le 1x each (index-dtype-not-supported), forward none of them
    5: [("aten::_scaled_dot_product_flash_attention_for_cpu", "shape-condition", 4, None),
        ("aten::bitwise_and.Tensor", INDEX, None, 4),
        ("aten::le.Tensor", INDEX, None, 2),
        ("aten::sum", INDEX, None, 4)],
    # report, forward:cold: mul 8 dtype + 4 unaligned, cat 8 unaligned, add/mean/pow/rsqrt 5 dtype each
    6: [("aten::cat", "unaligned", 8), ("aten::mul.Tensor", DTYPE, 8), ("aten::add.Tensor", DTYPE, 5),
        ("aten::mean.dim", DTYPE, 5), ("aten::pow.Tensor_Scalar", DTYPE, 5), ("aten::rsqrt", DTYPE, 5)],
    # report, forward:cold: at :66 mul 5 + add 5 + rsqrt 5; at :65 pow 5 + mean 5; at :123 cat 4 + neg 4;
    # at :147 mul 2 + add 2
    7: [(f"{LLAMA}:66 (LlamaRMSNorm.forward)", 15, "aten::add.Tensor, aten::mul.Tensor, aten::rsqrt"),
        (f"{LLAMA}:65 (LlamaRMSNorm.forward)", 10, "aten::mean.dim, aten::pow.Tensor_Scalar"),
        (f"{LLAMA}:123 (rotate_half)", 8, "aten::cat, aten::neg"),
        (f"{LLAMA}:147 (apply_rotary_pos_emb)", 4, "aten::add.Tensor, aten::mul.Tensor")],
    # report --ops --region 'ProfilerStep#6': calls and CPU µs
    8: [("aten::linear", 26, 1155.8), ("aten::addmm", 26, 825.7), ("aten::layer_norm", 10, 276.4),
        ("aten::native_layer_norm", 10, 238.1), ("aten::scaled_dot_product_attention", 4, 226.7)],
    # diff --ops bert_small_h100 vs bert_small_mi300: the runtime rows of A
    9: [("cudaLaunchKernel", 34, 162.0), ("cuLaunchKernel", 22, 136.2), ("cudaLaunchKernelExC", 4, 26.6),
        ("cudaDeviceSynchronize", 2, 11.9)],
    # report --ops: 309.4 µs of device work, the d2h copy (aten::_local_scalar_dense) 2.2 of it
    10: [("cuLaunchKernel", "stream 7", 22, 164.5), ("cudaLaunchKernel", "stream 7", 34, 109.6),
         ("cudaLaunchKernelExC", "stream 7", 4, 33.1), ("cudaMemcpyAsync", "DMA d2h", 1, 2.2)],
    # report: dispatch/recompile 12 (forward:cold) and 19 (eager:cold), compiled:cold compiles one program;
    # compile_ns summed from the compiles table (the target's 40 ms a program)
    11: [("llama_fp16-npu_eager_vs_compiled", "compiled:cold", 1, 40.0),
         ("llama_fp16-npu_eager_vs_compiled", "eager:cold", 19, 760.0),
         ("llama_fp16-npu_forward", "forward:cold", 12, 480.0)],
    # report: peak memory 101.3 MB (h100) and 146.4 MB (mi300); the rest from the memory lanes' slices
    12: [("bert_small_h100", "cpu", "allocated", 16), ("bert_small_h100", "cpu", "reserved", 0),
         ("bert_small_h100", "cuda:0", "allocated", 101305344), ("bert_small_h100", "cuda:0", "reserved", 121634816),
         ("bert_small_mi300", "cpu", "allocated", 8), ("bert_small_mi300", "cpu", "reserved", 0),
         ("bert_small_mi300", "cuda:0", "allocated", 146394112), ("bert_small_mi300", "cuda:0", "reserved", 224395264)],
    # report: 591 ops and 7 AI-CPU fallbacks; 479 ops and 3 syncs; 368 ops and 54 + 54 fallbacks
    13: [("ascend_kernel_details_591", "converted", "ascend-kernels", 591, 591, 7, 0),
         ("bert_small_h100", "converted", "kineto", 479, 61, 0, 3),
         ("llama_fp16-npu_forward", "predicted", "fp16-npu", 368, 126, 108, 0)],
    # report: the regions' walls (each file's root region)
    14: [("cuda_diff_test", "cuda_diff_test.json.gz", 745.341), ("cuda_diff_control", "cuda_diff_control.json.gz", 465.275),
         ("bert_small_h100", "bert_small_h100.json.gz", 4.871)],
}  # fmt: skip


def doc_queries() -> list[tuple[int, str, list[str], str]]:
    return [(int(n), title, runs.split(), sql) for n, title, runs, sql in QUERY.findall(DOC.read_text(encoding="utf-8"))]


def test_the_doc_holds_a_dozen_queries_each_with_expected_figures() -> None:
    numbers = [n for n, *_ in doc_queries()]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 12
    assert sorted(EXPECTED) == numbers


@pytest.mark.parametrize("number", sorted(EXPECTED))
def test_doc_query_gives_the_figures_of_the_trace(number: int) -> None:
    _, title, runs, sql = next(q for q in doc_queries() if q[0] == number)
    con = connect(open_runs([REPO / r for r in runs]))
    try:
        table = run_query(con, sql).table
    finally:
        con.close()
    rows = [tuple(r.values()) for r in table.to_pylist()]
    assert rows == EXPECTED[number], title


def test_every_view_and_column_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    for view in VIEWS.values():
        section = text.split(f"### `{view.name}`\n", 1)[1].split("\n### ", 1)[0]
        documented = re.findall(r"^\| `([a-z_]+)` \| ([A-Z]+) \|", section, re.M)
        assert documented == [("run", "VARCHAR")] + [(c.name, c.type) for c in view.columns], view.name

"""Compiled graphs' insides: the ATen operators of each compiled graph, scheduled as that program's inside."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import torch

from portscope.ingest import SignalKind, read_trace, summarize
from portscope.ingest.schema import Placement
from portscope.profiler import explain, targets
from portscope.profiler.aot_graph import BoundNode, parse_aot_graph
from portscope.profiler.compare import compare_modes
from portscope.profiler.demo import prompt, tiny_llama
from portscope.profiler.events import OpEvent, TensorInfo
from portscope.profiler.predict import reset_program_cache
from portscope.profiler.region import default_run_info
from portscope.profiler.schedule import estimate_flops, ops_from_events, schedule
from portscope.profiler.tables import build_trace
from portscope.profiler.targets import load_target

# What print_readable(include_stride=True, include_device=True) prints, cut down by hand: a symbolic batch, a
# view of a weight, a tuple-valued operator read through getitem, keyword arguments and a symbolic expression.
GRAPH = '''class <lambda>(torch.nn.Module):
    def forward(
        self,
        arg0_1: "f16[s0, 128][128, 1]cpu",  # PlainAOTInput(idx=0)
        arg1_1: "f16[64, 128][128, 1]cpu",  # PlainAOTInput(idx=1)
        arg2_1: "Sym(s0)",  # PlainAOTInput(idx=2)
    ):
        # File: model.py:10 in forward, code: x = x.float()
        convert_element_type: "f32[s0, 128][128, 1]cpu" = torch.ops.prims.convert_element_type.default(arg0_1, torch.float32);  arg0_1 = None
        pow_1: "f32[s0, 128][128, 1]cpu" = torch.ops.aten.pow.Tensor_Scalar(convert_element_type, 2)
        mean: "f32[s0, 1][1, 1]cpu" = torch.ops.aten.mean.dim(pow_1, [-1], True);  pow_1 = None
        permute: "f16[128, 64][1, 128]cpu" = torch.ops.aten.permute.default(arg1_1, [1, 0]);  arg1_1 = None
        mul: "f32[s0, 128][128, 1]cpu" = torch.ops.aten.mul.Tensor(convert_element_type, mean)
        convert_element_type_1: "f16[s0, 128][128, 1]cpu" = torch.ops.prims.convert_element_type.default(mul, torch.float16)
        mm: "f16[s0, 64][64, 1]cpu" = torch.ops.aten.mm.default(convert_element_type_1, permute)
        max_1 = torch.ops.aten.max.dim(mm, -1);  mm = None
        getitem: "f16[s0][1]cpu" = max_1[0]
        getitem_1: "i64[s0][1]cpu" = max_1[1];  max_1 = None
        cat: "f16[2*s0][1]cpu" = torch.ops.aten.cat.default([getitem, getitem], dim = 0)
        return (
            cat,  # PlainAOTOutput(idx=0)
            getitem_1,  # PlainAOTOutput(idx=1)
        )
'''


def test_parse_aot_graph_work_nodes_and_what_they_read() -> None:
    graph = parse_aot_graph(GRAPH)
    assert [(s.dtype, s.shape) for s in graph.placeholders] == [("float16", ("s0", 128)), ("float16", (64, 128))]
    # permute is a view (no work; mm reads the weight directly); getitem reads max's results
    assert [(n.name, n.reads) for n in graph.nodes] == [
        ("prims::convert_element_type", ()),
        ("aten::pow.Tensor_Scalar", (0,)),
        ("aten::mean.dim", (1,)),
        ("aten::mul.Tensor", (0, 2)),
        ("prims::convert_element_type", (3,)),
        ("aten::mm", (4,)),
        ("aten::max.dim", (5,)),
        ("aten::cat", (6,)),
    ]
    mm = graph.nodes[5]
    assert [(s.shape, s.stride) for s in mm.inputs] == [(("s0", 128), (128, 1)), ((128, 64), (1, 128))]
    assert [(s.dtype, s.itemsize) for s in graph.nodes[6].outputs] == [("float16", 2), ("int64", 8)]
    assert len(graph.nodes[7].inputs) == 2  # the same result read twice


def test_bind_resolves_symbols_from_the_call() -> None:
    call = [TensorInfo((7, 128), (128, 1), "float16", "cpu", 2), TensorInfo((64, 128), (128, 1), "float16", "cpu", 2)]
    nodes = parse_aot_graph(GRAPH).bind(call)
    mm, top, cat = nodes[5], nodes[6], nodes[7]
    assert [t.shape for t in mm.inputs] == [(7, 128), (128, 64)] and mm.outputs[0].shape == (7, 64)
    assert estimate_flops("aten::mm", mm.inputs, mm.outputs) == 2 * 7 * 64 * 128
    assert [(t.shape, t.nbytes) for t in top.outputs] == [((7,), 14), ((7,), 56)]
    assert cat.outputs[0].shape == (14,)  # 2*s0
    assert nodes[2].outputs[0].stride == (1, 1)
    # a call that does not line up with the placeholders leaves the symbol unknown: it counts as 1
    assert parse_aot_graph(GRAPH).bind(call[:1])[5].outputs[0].shape == (1, 64)


@pytest.fixture(scope="module")
def modes(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """The sample's run: a 2-layer tiny Llama (hidden 128, 4 heads, 2 kv heads, MLP 256, vocab 256), a 7-token
    prompt padded to 64, eager and inductor-compiled, predicted for fp16-npu."""
    reset_program_cache()
    out = tmp_path_factory.mktemp("insides") / "modes.arrow"
    trace = read_trace(compare_modes(tiny_llama, lambda: {"input_ids": prompt(7)}, out, target="fp16-npu", pad_to=64))
    return trace, trace["engine_slices"].to_pandas(), trace["ops"].to_pandas()


def _fused_attention(ops) -> bool:  # noqa: ANN001
    """Whether the eager forward dispatched CPU flash attention (torch's fused kernel) rather than its math path."""
    eager = ops[ops.region_id == 1]
    return bool((eager.name == "aten::_scaled_dot_product_flash_attention_for_cpu").any())


def test_compiled_program_inside_has_vector_and_matrix_work(modes) -> None:  # noqa: ANN001
    trace, slices, ops = modes
    warm = slices[slices.region_id == 3]
    vector = Counter(warm[warm.engine == "vector"].name)
    matrix = Counter(warm[warm.engine == "matrix"].name)
    # RMSNorm (upcast, pow, mean, + eps, rsqrt, scale): two per layer and the final one = 5
    assert vector["aten::pow.Tensor_Scalar"] == vector["aten::mean.dim"] == vector["aten::rsqrt"] == 5
    # projections q, k, v, o, gate, up, down per layer (7 x 2) and the LM head: 15 matrix products;
    # attention is one fused kernel per layer (torch < 2.10 with transformers 4.x runs the math path instead)
    assert matrix["aten::mm"] == 15
    if _fused_attention(ops):
        assert matrix == {"aten::mm": 15, "aten::_scaled_dot_product_flash_attention_for_cpu": 2}
    # costs as an eager operator's: latency + max(flops/rate, bytes/rate) (fp16-npu's engines)
    pow_ = warm[warm.name == "aten::pow.Tensor_Scalar"]
    assert set(pow_.dur) == {1000 + (2 * 64 * 128 * 4) // 400}  # f32 [1, 64, 128] in and out
    q_proj = warm[warm.name == "aten::mm"].iloc[0]  # [64, 128] x [128, 128] -> bytes dominate
    assert q_proj.dur == 2000 + (64 * 128 * 2 + 128 * 128 * 2 + 64 * 128 * 2) // 400
    # all of it is the graph call's inside: it links to the call and runs after its launch
    call = ops[(ops.region_id == 3) & ops.name.str.startswith("compiled graph")]
    assert len(call) == 1
    inside = warm[warm.engine.isin(["vector", "matrix"])]
    assert set(inside.op_id) == {call.op_id.iloc[0]}
    launch = warm[warm.engine == "dispatch"]
    assert len(launch) == 1 and inside.start.min() >= launch.start.iloc[0] + launch.dur.iloc[0]
    # inductor's code still ran: its extern matrix kernels were dispatched inside the graph
    inside_ops = ops[(ops.region_id == 3) & (ops.placement == "graph") & ~ops.name.str.startswith("compiled graph")]
    assert (inside_ops.name == "aten::mm.out").sum() == 15


def test_eager_and_compiled_engine_work_of_the_same_order(modes) -> None:  # noqa: ANN001
    trace, slices, _ops = modes
    eager, compiled = slices[slices.region_id == 1], slices[slices.region_id == 3]
    matrix = [len(s[s.engine == "matrix"]) for s in (eager, compiled)]
    assert matrix[0] == matrix[1]  # the same products and attentions either way
    if _fused_attention(_ops):
        assert matrix == [17, 17]  # 15 products, 2 fused attentions
    # eager fp16-npu runs the float32 norm chains on the host; compiled, everything is one device program
    eager_elementwise = len(eager[eager.engine == "vector"]) + len(eager[eager.kind == "fallback"])
    compiled_vector = len(compiled[compiled.engine == "vector"])
    assert len(compiled[compiled.engine == "host"]) == 0
    assert 0.5 < compiled_vector / eager_elementwise < 2, (compiled_vector, eager_elementwise)
    # the operators inside the graph are no fallbacks and raise no signal: the warm compiled region stays clean
    assert summarize(trace, 3).count(SignalKind.CPU_FALLBACK) == 0


def test_sample_trace_shows_vector_work_inside_the_compiled_program() -> None:
    path = Path(__file__).resolve().parents[2] / "sample_traces" / "llama_fp16-npu_eager_vs_compiled.arrow"
    slices = read_trace(path)["engine_slices"].to_pandas()
    warm = slices[slices.region_id == 3]
    names = set(warm[warm.engine == "vector"].name)
    assert {"aten::pow.Tensor_Scalar", "aten::mean.dim", "aten::rsqrt"} <= names


def _norm_project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return (h.half() @ w).relu()


def _graph_slices(regions: list) -> pd.DataFrame:  # noqa: ANN001
    slices = build_trace(regions, default_run_info(regions))["engine_slices"].to_pandas()
    return slices[slices.engine.isin(["vector", "matrix"]) & (slices.name != "aten::randn")]


def test_dynamic_graph_inside_takes_each_calls_shapes(tmp_path: Path) -> None:
    compiled = torch.compile(_norm_project, dynamic=True)
    w = torch.randn(64, 32, dtype=torch.float16)
    regions = []
    with torch.no_grad():
        for rows in (8, 24):
            with explain(f"{rows} rows", target="fp16-npu") as region:
                compiled(torch.randn(rows, 64, dtype=torch.float16), w)
            regions.append(region)
    inside = _graph_slices(regions)
    assert list(inside[inside.region_id == 0].name) == [
        "prims::convert_element_type", "aten::pow.Tensor_Scalar", "aten::mean.dim", "aten::add.Tensor", "aten::rsqrt",
        "aten::mul.Tensor", "prims::convert_element_type", "aten::mm", "aten::relu"]
    upcast = inside[inside.name == "prims::convert_element_type"].groupby("region_id").dur.first().tolist()
    mm = inside[inside.name == "aten::mm"].dur.tolist()
    # one graph, symbolic rows: f16 in (2 B) and f32 out (4 B) per element; [rows, 64] x [64, 32] moves its bytes
    assert upcast == [1000 + (8 * 64 * 6) // 400, 1000 + (24 * 64 * 6) // 400]
    assert mm == [2000 + (8 * 64 * 2 + 64 * 32 * 2 + 8 * 32 * 2) // 400, 2000 + (24 * 64 * 2 + 64 * 32 * 2 + 24 * 32 * 2) // 400]
    # a target whose graphs can fall back keeps the placements of what the graph dispatched: no captured inside
    fallbacks = tmp_path / "fallbacks.toml"
    fallbacks.write_text((Path(targets.__file__).parent / "fp16-npu.toml").read_text().replace(
        'name = "fp16-npu"', 'name = "fp16-npu-graph-fallbacks"') + "\n[compiled]\nfallbacks = true\n")
    with torch.no_grad(), explain("fallbacks", target=str(fallbacks)) as region:
        compiled(torch.randn(8, 64, dtype=torch.float16), w)
    assert set(_graph_slices([region]).name) == {"aten::mm.out"}  # inductor's extern matrix kernel only


_TWO_ENGINES = """
[target]
name = "two-engines"
device = "npu:0"
[compute]
dtypes = ["float16"]
[cache]
programs = false
[cost]
dispatch_ns = 10
[engines.matrix]
kind = "matrix"
flops_per_ns = 64
latency_ns = 2
ops = ["aten::mm"]
[engines.vector]
kind = "vector"
flops_per_ns = 10
latency_ns = 1
"""


def test_inside_of_a_graph_call_worked_by_hand(tmp_path: Path) -> None:
    """A graph call (its code dispatched one extern mm.out) whose captured inside is mm -> mul, and neg on its own;
    then an eager add of the graph's result. Figures (no byte terms):

    graph: dispatch 0..10 (the launch)
    mm [4, 8] x [8, 8]: 2*4*8*8 = 512 flops -> matrix 10 + (2 + 512/64) = 10..20 (waited on the launch)
    mul (reads mm): 32 flops -> vector 20 + int(1 + 32/10) = 20..24 (dependency)
    neg (reads an input): vector is busy until 24 -> 24..28
    mm.out, dispatched by the graph's code: replaced by the captured inside, no slice
    add (reads the graph's result, done at 28): dispatch 10..20, vector 28..32
    """
    target = tmp_path / "two.toml"
    target.write_text(_TWO_ENGINES)
    x = TensorInfo((4, 8), (8, 1), "float16", "npu:0", 2)
    w = TensorInfo((8, 8), (8, 1), "float16", "npu:0", 2)
    events = [
        OpEvent(0, "compiled graph 0/0", "compiled graph 0/0", [x, w], [x], 0, 100, graph_id=0),
        OpEvent(1, "aten::mm.out", "aten::mm", [x, w], [x], 10, 5, graph_id=0),
        OpEvent(2, "aten::add.Tensor", "aten::add", [x, x], [x], 200, 5),
    ]
    graph = Placement.GRAPH
    outcomes = {0: (graph, [], []), 1: (graph, [], []), 2: (Placement.DEVICE, [], [])}
    inside = [BoundNode("aten::mm", [x, w], [x], ()), BoundNode("aten::mul.Tensor", [x], [x], (0,)),
              BoundNode("aten::neg", [x], [x], ())]
    ops = ops_from_events(events, outcomes, {0: (), 1: (), 2: (0,)}, insides={0: inside})
    s = schedule(ops, load_target(target))
    rows = [(s.engines[lane], name, start, dur, wait, ops.op_id[i])
            for lane, name, start, dur, wait, i in zip(s.lane, s.name, s.start, s.dur, s.waited_on, s.op, strict=True)]
    assert rows == [
        ("dispatch", "compiled graph 0/0", 0, 10, None, 0),
        ("matrix", "aten::mm", 10, 10, "dispatch", 0),
        ("vector", "aten::mul.Tensor", 20, 4, "dependency", 0),
        ("vector", "aten::neg", 24, 4, None, 0),
        ("dispatch", "aten::add.Tensor", 10, 10, None, 2),
        ("vector", "aten::add.Tensor", 28, 4, None, 2),
    ]
    assert s.total_ns == 32
    # without the captured inside, the graph's inside is what its code dispatched
    plain = ops_from_events(events, outcomes, {0: (), 1: (), 2: (0,)})
    assert [n for n in schedule(plain, load_target(target)).name if n != "aten::add.Tensor"] == [
        "compiled graph 0/0", "aten::mm.out"]

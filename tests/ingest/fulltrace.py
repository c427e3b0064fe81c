"""A trace with known contents in every table, shared by format tests and the broken-file generator."""

from __future__ import annotations

from portscope.ingest import (
    Direction,
    Mode,
    Phase,
    Placement,
    RunInfo,
    SignalKind,
    Source,
    Trace,
    TraceBuilder,
)
from portscope.ingest.schema import CompileKind, EngineKind, SliceKind


def full_trace() -> Trace:
    """A trace with at least one row in every table."""
    b = TraceBuilder(RunInfo(source=Source.PREDICTED, target="fp16-npu", torch_version="2.13", devices=["cpu"],
                             model={"class": "Llama"}, config={"max_seq_len": 128}))
    outer = b.add_region("prefill", start_ns=0, dur_ns=5000, mode=Mode.EAGER, phase=Phase.COLD, device="npu:0")
    inner = b.add_region("norm", start_ns=100, dur_ns=400, parent_id=outer, tags='{"narrow": "norm"}')
    sid = b.stacks.intern([("model.py", 10, "forward"), ("run.py", 3, "<module>")])
    b.ops.append(op_id=0, region_id=outer, name="aten::mm", start_ns=10, dur_ns=50, placement=Placement.DEVICE,
                 device="npu:0", input_shapes="7x64;64x64", input_strides="64x1;1x64", input_dtypes="float16;float16",
                 output_shapes="7x64", output_dtypes="float16", bytes_in=9088, bytes_out=896, flops=57344,
                 module="model.layers.0.mlp", call_site="run.py:3 (<module>)", stack_id=sid, thread=1)
    b.ops.append(op_id=1, region_id=inner, name="aten::pow.Tensor_Scalar", start_ns=120, dur_ns=30,
                 placement=Placement.FALLBACK, bytes_in=100, bytes_out=100)
    b.signals.append(region_id=inner, op_id=1, kind=SignalKind.CPU_FALLBACK, reason="dtype-not-supported",
                     op_name="aten::pow.Tensor_Scalar", count=1, bytes=0, note="try: compute in float16", time_ns=120)
    b.transfers.append(region_id=inner, op_id=1, direction=Direction.D2H, bytes=896, src_device="npu:0",
                       dst_device="cpu", start_ns=115, dur_ns=3, cause="fallback-input")
    b.compiles.append(region_id=outer, kind=CompileKind.PROGRAM, key="aten::mm 7x64", compile_ns=40_000_000,
                      cache_hit=False)
    b.engine_slices.append(region_id=outer, engine="matrix", engine_kind=EngineKind.MATRIX, kind=SliceKind.COMPUTE,
                           name="aten::mm", start=10, dur=40, op_id=0, bytes=9088)
    b.runtime_calls.append(region_id=outer, op_id=0, name="cudaLaunchKernel", start_ns=12, dur_ns=5, correlation=7)
    b.comms.append(op_id=0, process_group="0", process_group_description="default_pg", seq=7, collective="allreduce",
                   group_size=2)
    b.numerics.append(comparison="fp16-vs-fp32-reference", metric="max_abs_diff", value=0.01)
    b.plan.append(max_sequence_length=4096, max_cache_length=4096, batch_size=1, weight_bytes=1_235_814_400,
                  kv_cache_bytes=134_217_728, device_memory_bytes=1_370_032_128, memory_bytes=17_179_869_184, fits=True,
                  programs=2, prompts=3, prompts_over_sequence=0, prompts_over_cache=0, padding_waste=0.5,
                  prefill_ns=1_000_000, decode_ns_per_token=20_000_000, h2d_bytes_per_token=8,
                  d2h_bytes_per_token=256_512, cost_source="assumed")
    return b.build()

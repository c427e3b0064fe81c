"""Small demo traces with known contents (tests, screenshots, development).

Built through TraceBuilder and written with the real writer, so they are what a
profiler would produce for a tiny Llama: cold/warm regions, eager/compiled modes,
fallbacks with reasons and call sites, bounces, transfers, compiles and engine slices.
"""

from __future__ import annotations

from pathlib import Path

from portscope.ingest import (
    EngineKind,
    Mode,
    Phase,
    RunInfo,
    SignalKind,
    SliceKind,
    Source,
    TimeUnit,
    TraceBuilder,
    write_trace,
)
from portscope.ingest.trace import Trace

MODEL = {"class": "LlamaForCausalLM", "layers": 2, "hidden_size": 64, "dtype": "float16"}
NORM_SITE = "transformers/models/llama/modeling_llama.py:72 (forward)"
ROPE_SITE = "transformers/models/llama/modeling_llama.py:151 (rotate_half)"
USER_SITE = "demo.py:18 (<module>)"
# An untrusted-looking name: the viewer must show it as text.
ODD_MODULE = "model.layers.1.<b>mlp</b>"

# (kind, op, reason, call site, module, count, bytes) per region phase; counts are what tests assert.
EAGER_COLD = [
    (SignalKind.CPU_FALLBACK, "aten::pow.Tensor_Scalar", "dtype-not-supported", NORM_SITE, "model.layers.0.input_layernorm", 5, 0),
    (SignalKind.CPU_FALLBACK, "aten::rsqrt", "dtype-not-supported", NORM_SITE, "model.layers.0.input_layernorm", 5, 0),
    (SignalKind.CPU_FALLBACK, "aten::neg", "unaligned", ROPE_SITE, ODD_MODULE, 4, 0),
    (SignalKind.RECOMPILE, "aten::mm", None, USER_SITE, "model.layers.0.self_attn.q_proj", 7, 0),
    (SignalKind.BOUNCE_DTYPE, "aten::_to_copy", None, NORM_SITE, "model.layers.0.input_layernorm", 10, 40960),
    (SignalKind.TRANSFER_D2H, "aten::_local_scalar_dense", None, USER_SITE, None, 1, 2048),
    (SignalKind.SYNC, "aten::_local_scalar_dense", None, USER_SITE, None, 1, 0),
]
EAGER_WARM = [
    (SignalKind.CPU_FALLBACK, "aten::pow.Tensor_Scalar", "dtype-not-supported", NORM_SITE, "model.layers.0.input_layernorm", 5, 0),
    (SignalKind.CPU_FALLBACK, "aten::rsqrt", "dtype-not-supported", NORM_SITE, "model.layers.0.input_layernorm", 5, 0),
    (SignalKind.WARM_MISS, "aten::mul.Tensor", None, ROPE_SITE, "model.layers.0.self_attn", 2, 0),
    (SignalKind.BOUNCE_DTYPE, "aten::_to_copy", None, NORM_SITE, "model.layers.0.input_layernorm", 10, 40960),
    (SignalKind.TRANSFER_D2H, "aten::_local_scalar_dense", None, USER_SITE, None, 1, 2048),
]
COMPILED_COLD = [
    (SignalKind.COMPILE_GRAPH, None, None, USER_SITE, None, 2, 0),
    (SignalKind.COMPILE_GRAPH_BREAK, "aten::_local_scalar_dense", "Tensor.item", USER_SITE, None, 1, 0),
    (SignalKind.TRANSFER_D2H, "aten::_local_scalar_dense", None, USER_SITE, None, 1, 2048),
]
COMPILED_WARM = [
    (SignalKind.TRANSFER_D2H, "aten::_local_scalar_dense", None, USER_SITE, None, 1, 2048),
]
ENGINES = [("host", "host"), ("dispatch", "dispatch"), ("DMA h2d", "dma_h2d"), ("DMA d2h", "dma_d2h"), ("matrix", "matrix"), ("vector", "vector")]


def _fill_region(b: TraceBuilder, region_id: int, start_ns: int, rows: list, *, ops_per_region: int = 40) -> None:
    op_base = len(b.ops)
    for i in range(ops_per_region):
        b.ops.append(
            op_id=op_base + i,
            region_id=region_id,
            name=["aten::mm", "aten::add.Tensor", "aten::pow.Tensor_Scalar", "aten::rsqrt"][i % 4],
            start_ns=start_ns + i * 1000,
            dur_ns=800,
            placement="fallback" if i % 4 >= 2 else "device",
            device="npu:0",
            input_shapes="1x7x64;",
            input_dtypes="float16;",
            bytes_in=896,
            bytes_out=896,
            module=f"model.layers.{i % 2}.mlp",
            call_site=NORM_SITE if i % 4 >= 2 else USER_SITE,
        )
    stack = b.stacks.intern([(NORM_SITE.split(":")[0], 72, "forward"), ("demo.py", 18, "<module>")])
    for n, (kind, op, reason, site, module, count, nbytes) in enumerate(rows):
        # one signal row per event, bytes spread evenly, so counts add up as in a real recording
        for k in range(count):
            b.signals.append(
                region_id=region_id,
                op_id=op_base + (n + k) % ops_per_region,
                kind=kind,
                reason=reason,
                op_name=op,
                count=1,
                bytes=nbytes // count,
                call_site=site,
                stack_id=stack if kind is SignalKind.CPU_FALLBACK else None,
                module=module,
                time_ns=start_ns + k,
            )
        if kind is SignalKind.TRANSFER_D2H:
            b.transfers.append(region_id=region_id, direction="d2h", bytes=nbytes, src_device="npu:0", dst_device="cpu", start_ns=start_ns, dur_ns=500, cause="sync", call_site=site)
    b.transfers.append(region_id=region_id, direction="h2d", bytes=8192, src_device="cpu", dst_device="npu:0", start_ns=start_ns, dur_ns=700, cause="explicit", call_site=USER_SITE)
    for i in range(ops_per_region):
        lane, lane_kind = ENGINES[i % len(ENGINES)]
        kind = {"host": "fallback", "dispatch": "dispatch", "dma_h2d": "transfer", "dma_d2h": "transfer"}.get(lane_kind, "compute")
        b.engine_slices.append(
            region_id=region_id,
            engine=lane,
            engine_kind=lane_kind,
            kind=kind,
            name=f"slice {i}",
            start=start_ns + i * 1000,
            dur=900,
            op_id=op_base + i,
            bytes=896 if kind == "transfer" else None,
            module=f"model.layers.{i % 2}.mlp",
        )


def demo_trace(kind: str = "eager") -> Trace:
    """A demo run: kind is "eager" (cold + warm + a narrow rmsnorm region), "compiled" or "predicted"."""
    source = Source.PREDICTED if kind == "predicted" else Source.MEASURED
    info = RunInfo(
        source=source,
        target="demo-npu" if kind == "predicted" else None,
        torch_version="2.13.0",
        devices=["npu:0"],
        command=f"python demo.py --mode {kind}",
        model=MODEL,
        start_time="2025-01-01T00:00:00Z",
        time_unit=TimeUnit.NS,
    )
    b = TraceBuilder(info)
    mode = Mode.COMPILED if kind == "compiled" else Mode.EAGER
    cold_rows, warm_rows = (COMPILED_COLD, COMPILED_WARM) if kind == "compiled" else (EAGER_COLD, EAGER_WARM)
    cold = b.add_region("generate", start_ns=0, dur_ns=100_000, mode=mode, phase=Phase.COLD, device="npu:0", peak_memory_bytes=10_000_000)
    _fill_region(b, cold, 0, cold_rows)
    warm = b.add_region("generate", start_ns=200_000, dur_ns=60_000, mode=mode, phase=Phase.WARM, device="npu:0", peak_memory_bytes=10_000_000)
    _fill_region(b, warm, 200_000, warm_rows)
    if kind == "eager":
        norm = b.add_region("rmsnorm", start_ns=300_000, dur_ns=20_000, parent_id=None, mode=mode, phase=Phase.NONE, device="npu:0", tags='{"narrow": "rmsnorm"}')
        _fill_region(b, norm, 300_000, EAGER_WARM[:2], ops_per_region=12)
    for metric, value in (("greedy_match", 1.0), ("argmax_match", 1.0), ("max_abs_diff", 0.031), ("top2_gap", 0.84)):
        b.numerics.append(comparison="fp16-vs-fp32-reference", metric=metric, value=value)
    return b.build()


def write_demo_traces(folder: Path) -> dict[str, Path]:
    """Write the three demo runs into folder; returns {kind: path}."""
    folder.mkdir(parents=True, exist_ok=True)
    return {kind: write_trace(demo_trace(kind), folder / f"demo-{kind}.arrow") for kind in ("eager", "compiled", "predicted")}


# A schedule tuning pair (issue 17 item 10), in ns: a baseline, then the same kernel with the DMA twice as fast and
# the vector add split into add + relu (B starts at 1000: the compare page draws both from 0).
# (engine, engine kind, slice kind, name, start, dur, waited_on); tests/ingest/test_schedule_diff.py works it out by hand.
SCHEDULE_BASELINE = [
    ("dma", EngineKind.DMA_H2D, SliceKind.TRANSFER, "load x", 0, 10, None),
    ("dma", EngineKind.DMA_H2D, SliceKind.TRANSFER, "load w", 10, 10, None),
    ("matrix", EngineKind.MATRIX, SliceKind.COMPUTE, "mm", 10, 30, "transfer"),
    ("vector", EngineKind.VECTOR, SliceKind.COMPUTE, "add", 40, 20, "dependency"),
]
SCHEDULE_CHANGED = [
    ("dma", EngineKind.DMA_H2D, SliceKind.TRANSFER, "load x", 1000, 5, None),
    ("dma", EngineKind.DMA_H2D, SliceKind.TRANSFER, "load w", 1005, 5, None),
    ("matrix", EngineKind.MATRIX, SliceKind.COMPUTE, "mm", 1005, 30, "transfer"),
    ("vector", EngineKind.VECTOR, SliceKind.COMPUTE, "add", 1035, 10, "dependency"),
    ("vector", EngineKind.VECTOR, SliceKind.COMPUTE, "relu", 1045, 5, None),
]


def schedule_trace(*regions: tuple[str, list], unit: TimeUnit = TimeUnit.NS, command: str = "schedule demo") -> Trace:
    """A predicted run with one region per (name, slices) of engine slices as in SCHEDULE_BASELINE."""
    b = TraceBuilder(RunInfo(source=Source.PREDICTED, target="demo-npu", command=command, time_unit=unit))
    for name, rows in regions:
        rid = b.add_region(name, dur_ns=100)
        for engine, engine_kind, kind, label, start, dur, waited in rows:
            b.engine_slices.append(region_id=rid, engine=engine, engine_kind=engine_kind, kind=kind, name=label,
                                   start=start, dur=dur, waited_on=waited)
    return b.build()


def write_schedule_pair(folder: Path) -> tuple[Path, Path]:
    """The baseline and the changed schedule as two runs: schedule-baseline.arrow, schedule-changed.arrow."""
    folder.mkdir(parents=True, exist_ok=True)
    return (write_trace(schedule_trace(("kernel", SCHEDULE_BASELINE), command="baseline"), folder / "schedule-baseline.arrow"),
            write_trace(schedule_trace(("kernel", SCHEDULE_CHANGED), command="changed"), folder / "schedule-changed.arrow"))

"""A hand-built trace whose signals come from two source lines (tests of the by-line table and its page)."""

from __future__ import annotations

from portscope.ingest import Placement, RunInfo, SignalKind, Source, TraceBuilder
from portscope.ingest.trace import Trace

NORM = "transformers/models/llama/modeling_llama.py:65 (LlamaRMSNorm.forward)"
ROPE = "transformers/models/llama/modeling_llama.py:147 (apply_rotary_pos_emb)"
LAYER = "transformers/models/llama/modeling_llama.py:297 (LlamaDecoderLayer.forward)"
ATTN = "transformers/models/llama/modeling_llama.py:249 (LlamaAttention.forward)"


def lines_trace() -> Trace:
    """3 mul fallbacks at the norm's line (layers 0, 1 and the final norm), 2 at the rotary line (with 64 bytes each)."""
    b = TraceBuilder(RunInfo(source=Source.PREDICTED, target="fp16-npu", roots={"transformers": "/x/transformers"}))
    rid = b.add_region("forward", dur_ns=1000)
    norm_stack = b.stacks.intern([("transformers/models/llama/modeling_llama.py", 65, "LlamaRMSNorm.forward"),
                                  ("torch/nn/modules/module.py", 1778, "Module._wrapped_call_impl"),
                                  ("transformers/models/llama/modeling_llama.py", 297, "LlamaDecoderLayer.forward")])
    rope_stack = b.stacks.intern([("transformers/models/llama/modeling_llama.py", 147, "apply_rotary_pos_emb")])
    b.stacks.sources[("transformers/models/llama/modeling_llama.py", 65, "LlamaRMSNorm.forward")] = "variance = x.pow(2)"
    b.stacks.sources[("transformers/models/llama/modeling_llama.py", 147, "apply_rotary_pos_emb")] = "q_embed = q * cos"
    rows = [  # op_id, module, call site, stack, bytes, host ns
        (0, "model.layers.0.input_layernorm", f"{NORM} <- {LAYER}", norm_stack, 0, 10),
        (1, "model.layers.1.input_layernorm", f"{NORM} <- {LAYER}", norm_stack, 0, 20),
        (2, "model.norm", NORM, None, 0, 30),
        (3, "model.layers.0.self_attn", f"{ROPE} <- {ATTN}", rope_stack, 64, 400),
        (4, "model.layers.1.self_attn", f"{ROPE} <- {ATTN}", rope_stack, 64, 500),
    ]
    for op_id, module, site, stack, nbytes, dur in rows:
        b.ops.append(op_id=op_id, region_id=rid, name="aten::mul.Tensor", start_ns=op_id * 100, dur_ns=dur,
                     placement=Placement.FALLBACK, bytes_in=0, bytes_out=0, module=module, call_site=site, stack_id=stack)
        b.signals.append(region_id=rid, op_id=op_id, kind=SignalKind.CPU_FALLBACK, reason="dtype-not-supported",
                         op_name="aten::mul.Tensor", count=1, bytes=nbytes, call_site=site, stack_id=stack, module=module)
    return b.build()

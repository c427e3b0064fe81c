"""Eager vs compiled in one run, and validation against a float32 CPU reference."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from portscope.ingest.numerics import Comparison, numerics_table
from portscope.ingest.schema import Mode
from portscope.ingest.trace import write_trace

from .region import Region, default_run_info, explain_steady
from .tables import build_trace

Inputs = dict[str, torch.Tensor]


def pad_inputs(inputs: Inputs, length: int, *, pad_id: int = 0) -> Inputs:
    """Pad input_ids (and attention_mask) on the right to a fixed length, for a fixed-shape compile."""
    ids = inputs["input_ids"]
    if ids.shape[-1] > length:
        raise ValueError(f"the prompt has {ids.shape[-1]} tokens, more than the padded length {length}")
    extra = length - ids.shape[-1]
    mask = inputs.get("attention_mask", torch.ones_like(ids))
    out = dict(inputs)
    out["input_ids"] = torch.nn.functional.pad(ids, (0, extra), value=pad_id)
    out["attention_mask"] = torch.nn.functional.pad(mask, (0, extra), value=0)
    return out


@contextlib.contextmanager
def _compile_errors_raise() -> Any:
    """torch.compile must fail loudly instead of silently running eagerly."""
    import torch._dynamo

    with torch._dynamo.config.patch(suppress_errors=False), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*global hooks on modules.*")  # portscope's own module hooks
        yield


def compare_modes(
    build_model: Callable[[], torch.nn.Module],
    make_inputs: Callable[[], Inputs],
    output: str | Path,
    *,
    target: str | None = None,
    pad_to: int = 64,
    warmup: int = 2,
    with_stack: bool = True,
    backend: str = "inductor",
) -> Path:
    """Run a model eager and compiled (fixed shapes), cold and warm; write one trace with four regions."""
    model = build_model().eval()
    inputs = make_inputs()
    padded = pad_inputs(inputs, pad_to) if "input_ids" in inputs else inputs
    regions: list[Region] = []
    outputs: dict[str, torch.Tensor] = {}

    def step(fn: Callable[..., Any], kwargs: Inputs, key: str) -> Callable[[], None]:
        def run() -> None:
            out = fn(**kwargs)
            outputs[key] = (out.logits if hasattr(out, "logits") else out).detach()
        return run

    compiled = torch.compile(model, dynamic=False, backend=backend)
    with torch.no_grad(), _compile_errors_raise():
        for mode, fn in ((Mode.EAGER, model), (Mode.COMPILED, compiled)):
            cold, warm = explain_steady(step(fn, padded, mode.value), warmup=warmup, return_cold=True,
                                        name=mode.value, with_stack=with_stack, target=target, mode=mode,
                                        tags={"pair": "eager-vs-compiled", "mode": mode.value, "padded_to": str(pad_to)})
            regions += [cold, warm]
    info = default_run_info(regions)
    info.config.update({"pad_to": pad_to, "backend": backend, "dynamic": False})
    trace = build_trace(regions, info)
    valid = padded.get("attention_mask", torch.ones(1)).bool()
    trace.tables["numerics"] = numerics_table([_compare("eager-vs-compiled", outputs["eager"], outputs["compiled"], valid)])
    return write_trace(trace, output)


def _compare(name: str, reference: torch.Tensor, port: torch.Tensor, valid: torch.Tensor) -> Comparison:
    ref, got = reference.float(), port.float()
    if valid.dim() == ref.dim() - 1:
        ref, got = ref[valid], got[valid]
    diff = (ref - got).abs().max().item()
    top2 = ref.topk(2, dim=-1).values
    argmax = bool((ref.argmax(-1) == got.argmax(-1)).all())
    return Comparison(name, argmax, argmax, diff, float((top2[..., 0] - top2[..., 1]).min()), int(ref.shape[0]))


def greedy_logits(model: torch.nn.Module, ids: torch.Tensor, steps: int,
                  follow: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, per-step last-position logits) of greedy decoding (no cache); `follow` teacher-forces tokens."""
    tokens, logits = [], []
    seq = ids
    for i in range(steps):
        out = model(input_ids=seq).logits[:, -1].float()
        logits.append(out)
        nxt = out.argmax(-1, keepdim=True) if follow is None else follow[:, i : i + 1]
        tokens.append(out.argmax(-1, keepdim=True))
        seq = torch.cat([seq, nxt], dim=-1)
    return torch.cat(tokens, -1), torch.stack(logits, 1)


def validate(
    build_model: Callable[[], torch.nn.Module],
    ids: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float16,
    compiled: bool = False,
    steps: int = 8,
) -> Comparison:
    """The port (dtype, eager or compiled) against the model in float32 on the CPU."""
    with torch.no_grad():
        reference = build_model().eval().float()
        ref_tokens, ref_logits = greedy_logits(reference, ids, steps)
        port = build_model().eval().to(dtype)
        if compiled:
            port = torch.compile(port, dynamic=True)
        port_tokens, _ = greedy_logits(port, ids, steps)
        _, forced = greedy_logits(port, ids, steps, follow=ref_tokens)  # same prefixes as the reference
    differs = (forced.argmax(-1) != ref_tokens).nonzero()
    first = int(differs[0, 1]) if len(differs) else 0
    top2 = ref_logits[:, first].topk(2, dim=-1).values
    return Comparison(
        name=f"{str(dtype).removeprefix('torch.')}{'-compiled' if compiled else ''}-vs-float32-reference",
        greedy_match=bool(torch.equal(port_tokens, ref_tokens)),
        argmax_match=bool(torch.equal(forced[:, 0].argmax(-1), ref_logits[:, 0].argmax(-1))),
        max_abs_diff=float((forced - ref_logits).abs().max()),
        top2_gap=float((top2[..., 0] - top2[..., 1]).min()),
        steps=steps,
    )

"""Parity of predictions: each operation of the decoder case (BRIEF.md) predicts the same signals whichever
region made its operands: before any region (the port's inputs, moved to the device), inside the region, or in
an enclosing region. Under fp16-npu, figures written by hand from the target file and the shapes:

x: 1 x 128 float16 (256 B); m: 1 x 128 bool (128 B, made by `ones`: a factory, so on the device);
h: 1 x 7 x 128 float16 (1792 B); q, k, v: 1 x 4 x 7 x 32 float16 (1792 B each).

Every note is also checked to apply to its row: "compute in D" only where a floating operand is not in D.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from portscope.ingest.schema import SignalKind as K
from portscope.profiler import explain
from portscope.profiler.demo import tiny_llama
from portscope.profiler.predict import reset_program_cache

H = torch.float16
SYNC, FALLBACK, D2H, H2D, NEW = K.SYNC, K.CPU_FALLBACK, K.TRANSFER_D2H, K.TRANSFER_H2D, K.RECOMPILE
DDS = "data-dependent-shape"


@pytest.fixture(scope="module")
def norm() -> torch.nn.Module:
    return tiny_llama().model.layers[0].input_layernorm


@dataclasses.dataclass
class Case:
    name: str
    make: Callable[[], tuple]
    run: Callable[..., object]
    expected: dict[tuple[K, str, int], int]  # (kind, reason, bytes) -> rows


def _x() -> torch.Tensor:
    return torch.randn(1, 128, dtype=H)


def _m() -> torch.Tensor:
    return torch.ones(1, 128, dtype=torch.bool)


CASES = [
    Case("masked_select", lambda: (_x(), _m()), lambda x, m: x.masked_select(m),
         # no bool kernel outside index operators: falls back, reads both back, and its size depends on the data
         {(SYNC, DDS, 0): 1, (FALLBACK, "dtype-not-supported", 0): 1,
          (D2H, "fallback-input", 256): 1, (D2H, "fallback-input", 128): 1}),
    Case("boolean index", lambda: (_x(), _m()), lambda x, m: x[m],
         # aten::index takes bool index operands on the device: one program, a sync for the result's size
         {(SYNC, "boolean-index", 0): 1, (NEW, "new-key", 0): 1}),
    Case(".item()", lambda: (_x().sum(),), lambda s: s.item(),
         {(SYNC, "item", 0): 1, (D2H, "item", 2): 1}),
    Case("nonzero", lambda: (_m(),), lambda m: m.nonzero(),
         {(SYNC, DDS, 0): 1, (FALLBACK, "no-kernel", 0): 1, (D2H, "fallback-input", 128): 1}),
    Case("comparison", lambda: (_x(),), lambda x: x > 0,
         # a bool result the device cannot make: the input goes to the host
         {(FALLBACK, "dtype-not-supported", 0): 1, (D2H, "fallback-input", 256): 1}),
    Case("rotate_half", lambda: (torch.randn(1, 4, 7, 32, dtype=H),),
         lambda t: torch.cat((-t[..., 16:], t[..., :16]), dim=-1),
         # a 16-wide slice is below the 64 alignment: neg reads t back, cat works on the host copies
         {(FALLBACK, "unaligned", 0): 2, (D2H, "fallback-input", 1792): 1}),
    Case("attention on 7 tokens", lambda: tuple(torch.randn(1, 4, 7, 32, dtype=H) for _ in range(3)),
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         {(FALLBACK, "shape-condition", 0): 1, (D2H, "fallback-input", 1792): 3}),
]
RMSNORM = {  # h.to(float32), pow, mean, add eps, rsqrt, mul on the host, .to(float16), weight * result on the device
    (K.BOUNCE_DTYPE, "float16->float32", 1792): 1, (D2H, "bounce", 1792): 1,
    (FALLBACK, "dtype-not-supported", 0): 5,
    (K.BOUNCE_DTYPE, "float32->float16", 3584): 1,
    (H2D, "device-input", 1792): 1, (NEW, "new-key", 0): 1,
}

MAKERS = {"aten::randn", "aten::ones", "aten::sum"}  # what make() runs; no operation under test runs them
WHERE = ("before the region", "inside the region", "in an enclosing region")


def _predict(make: Callable[[], tuple], run: Callable[..., object], where: str) -> tuple[Counter, list[dict], dict]:
    """Signals of `run`'s operators only (the region around it), and the ops table."""
    reset_program_cache()
    with torch.no_grad():
        if where == "before the region":
            args = make()
            with explain("op", target="fp16-npu") as region:
                run(*args)
        elif where == "inside the region":
            with explain("op", target="fp16-npu") as region:
                run(*make())
        else:
            with explain("outer", target="fp16-npu"):
                args = make()
                with explain("op", target="fp16-npu") as region:
                    run(*args)
    trace = region.to_trace()
    ops = trace["ops"].to_pylist()
    regions = {r["region_id"]: r["name"] for r in trace["regions"].to_pylist()}
    rid = next(i for i, n in regions.items() if n == "op")
    own = [o for o in ops if o["region_id"] == rid]
    own = [o for o in own if o["name"] not in MAKERS]  # leave out what make() did
    ids = {o["op_id"] for o in own}
    signals = [s for s in trace["signals"].to_pylist() if s["op_id"] in ids]
    return Counter((K(s["kind"]), s["reason"], s["bytes"]) for s in signals), signals, {o["op_id"]: o for o in ops}


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_decoder_operation_predicts_the_same_wherever_its_operands_were_made(case: Case, where: str) -> None:
    got, signals, ops = _predict(case.make, case.run, where)
    assert got == Counter(case.expected)
    _check_notes(signals, ops)


@pytest.mark.parametrize("where", WHERE)
def test_rmsnorm_predicts_the_same_wherever_its_input_was_made(norm: torch.nn.Module, where: str) -> None:
    got, signals, ops = _predict(lambda: (torch.randn(1, 7, 128, dtype=H),), norm, where)
    assert got == Counter(RMSNORM)
    _check_notes(signals, ops)


def _floats(text: str | None) -> set[str]:
    return {d for d in (text or "").replace("->", ",").split(",") if d.startswith(("float", "bfloat"))}


def _check_notes(signals: list[dict], ops: dict[int, dict]) -> None:
    """A note never suggests what is already true: "compute in D" needs a floating operand in another dtype."""
    for s in signals:
        note = s["note"] or ""
        if note.startswith("try: compute in "):
            want = note.removeprefix("try: compute in ").split()[0]
            op = ops[s["op_id"]]
            seen = _floats(s["reason"]) if K(s["kind"]) is K.BOUNCE_DTYPE else (
                _floats(op["input_dtypes"]) | _floats(op["output_dtypes"]))
            assert seen - {want}, (s["op_name"], s["reason"], note, op["input_dtypes"], op["output_dtypes"])


def test_no_note_on_a_predicted_forward_suggests_what_is_already_true() -> None:
    from portscope.profiler.demo import prompt

    model = tiny_llama()
    ids = prompt(7)
    reset_program_cache()
    with torch.no_grad(), explain("forward", target="fp16-npu") as region:
        model(ids)
    trace = region.to_trace()
    signals = trace["signals"].to_pylist()
    ops = {o["op_id"]: o for o in trace["ops"].to_pylist()}
    assert any((s["note"] or "").startswith("try: compute in") for s in signals)  # the check has rows to check
    _check_notes(signals, ops)
    # the mask's comparisons make bool results: their note is not "compute in float16"
    bools = [s for s in signals if s["kind"] == K.CPU_FALLBACK.value and "bool" in (ops[s["op_id"]]["output_dtypes"] or "")
             and not _floats(ops[s["op_id"]]["input_dtypes"]) - {"float16"}]
    assert all("compute in" not in (s["note"] or "") for s in bools)

"""Profiler overhead on a small random-init Llama forward (CPU), as ratios against an unprofiled baseline.

Usage: python bench/overhead_bench.py [--repeats 30] [--layers 4] [--hidden 512] [--seq 128] [--clock wall|cpu]
                                      [--stat median|min]
Prints one line per mode: median (or fastest) ms, the ratio to the unprofiled median measured in the same run, and the
cost per operator ((median - unprofiled median) / operators dispatched in one forward). "explain" uses the native
hot path where it is built (profiler/native.py), "explain(python path)" the Python one (PORTSCOPE_NATIVE=0).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import LlamaConfig, LlamaForCausalLM

from portscope.profiler import explain
from portscope.profiler import native as native_code
from portscope.profiler.recorder import session, skip_dynamo


class _DoNothingMode(TorchDispatchMode):
    """The floor of any Python dispatch mode: calls the operator and returns (without the per-call Dynamo
    wrapper torch >= 2.9 puts around __torch_dispatch__, as portscope's own mode does)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return not skip_dynamo(cls.__torch_dispatch__.__code__)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        return func(*args, **(kwargs or {}))


def build(layers: int, hidden: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                      num_attention_heads=max(hidden // 64, 1), num_key_value_heads=max(hidden // 128, 1),
                      vocab_size=1024, max_position_embeddings=512)
    return LlamaForCausalLM(cfg).eval()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="cpu: this thread's CPU time (steadier than wall time on a machine shared with other jobs)")
    p.add_argument("--stat", choices=["median", "min"], default="median",
                   help="min: each mode's fastest run (least disturbed by other jobs on a loaded machine)")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    torch.set_num_threads(1)
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    model = build(args.layers, args.hidden)
    ids = torch.randint(0, 1024, (1, args.seq))

    def plain() -> None:
        model(input_ids=ids)

    def make(native: bool = True, **kw):  # noqa: ANN202
        def run() -> None:
            os.environ[native_code.ENV] = "1" if native else "0"  # read when a region opens
            with explain("bench", **kw):
                model(input_ids=ids)
        return run

    def do_nothing() -> None:
        with _DoNothingMode():
            model(input_ids=ids)

    def torch_prof() -> None:
        with torch.profiler.profile(record_shapes=True):
            model(input_ids=ids)

    modes = {
        "unprofiled": plain,
        "do-nothing dispatch mode": do_nothing,
        "explain": make(),
        "explain(python path)": make(native=False),
        "explain(with_stack)": make(with_stack=True),
        "explain(memory=True)": make(memory=True),
        "explain(target=fp16-npu)": make(target="fp16-npu"),
        "torch.profiler(record_shapes)": torch_prof,
    }
    times: dict[str, list[float]] = {m: [] for m in modes}
    with torch.no_grad():
        for fn in modes.values():
            for _ in range(3):
                fn()
        for _ in range(args.repeats):  # interleave modes so machine noise hits all alike
            for name, fn in modes.items():
                t0 = clock()
                fn()
                times[name].append(clock() - t0)
    os.environ[native_code.ENV] = "1"
    with torch.no_grad(), explain("count") as region:
        model(input_ids=ids)
        native = session().mode.native
    ops = len(region.raw)
    stat = min if args.stat == "min" else statistics.median
    base = stat(times["unprofiled"])
    out: dict = {"operators": ops, "native": native}
    print(f"{ops} operators per forward; explain()'s native hot path: {'on' if native else 'off (Python path)'}")
    for name, ts in times.items():
        med = stat(ts)
        per_op_us = (med - base) / ops * 1e6
        out[name] = {"median_ms": med * 1e3, "ratio": med / base, "us_per_op": per_op_us}
        print(f"{name:32s} {med * 1e3:8.2f} ms  {med / base:5.2f}x  {per_op_us:+6.1f} us/op")
    floor = out["do-nothing dispatch mode"]["us_per_op"]
    if floor > 0:  # portscope's cost in units of the floor every Python dispatch mode pays, from the same run
        print("per operator, in do-nothing modes: " + ", ".join(
            f"{name} {out[name]['us_per_op'] / floor:.2f}" for name in times if name.startswith("explain")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

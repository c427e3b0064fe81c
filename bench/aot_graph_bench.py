"""Bench: reading a compiled graph's inside (the AOT graph text torch logs while compiling) against the compile itself.

Compiles a random-init Llama forward with inductor (fixed shapes) while a handler on
the structured-trace logger keeps the `aot_inference_graph` payload, then times
`parse_aot_graph` and `AotGraph.bind` (best of N).
Run: .venv/bin/python bench/aot_graph_bench.py [--layers 2] [--hidden 128] [--repeat 20]
"""

from __future__ import annotations

import argparse
import logging
import time

import torch

from portscope.profiler.aot_graph import GRAPH_RECORDS, parse_aot_graph
from portscope.profiler.compare import pad_inputs
from portscope.profiler.demo import prompt, tiny_llama


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.payloads: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if isinstance(metadata, dict) and metadata and next(iter(metadata)) in GRAPH_RECORDS:
            self.payloads.append(record.payload)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    keep = _Keep()
    logger = logging.getLogger("torch.__trace")
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    model = tiny_llama(layers=args.layers, hidden=args.hidden)
    inputs = pad_inputs({"input_ids": prompt(7)}, 64)
    compiled = torch.compile(model, dynamic=False)
    t0 = time.perf_counter()
    with torch.no_grad():
        compiled(**inputs)
    compile_s = time.perf_counter() - t0
    logger.removeHandler(keep)
    (text,) = keep.payloads
    parse = bind = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        graph = parse_aot_graph(text)
        t1 = time.perf_counter()
        graph.bind([])
        parse, bind = min(parse, t1 - t0), min(bind, time.perf_counter() - t1)
    print(f"{args.layers} layers, hidden {args.hidden}: graph text {len(text) / 1e3:.0f} KB, "
          f"{len(graph.nodes)} operators that do work; parse {parse * 1e3:.1f} ms, bind {bind * 1e3:.1f} ms "
          f"(best of {args.repeat}); first call with the compile {compile_s:.1f} s")


if __name__ == "__main__":
    main()

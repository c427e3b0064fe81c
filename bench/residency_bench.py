"""Memory of prediction: RSS across 100 repeated predicted regions must not grow.

Usage: python bench/residency_bench.py [--regions 100]
Prints RSS after the first 10 regions and after all of them, and the number of tracked storages.
"""

from __future__ import annotations

import argparse
import gc
import json

import psutil
import torch

from portscope.profiler import explain
from portscope.profiler.demo import prompt, tiny_llama


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--regions", type=int, default=100)
    p.add_argument("--json")
    args = p.parse_args()
    model, ids = tiny_llama(), prompt(7)
    proc = psutil.Process()
    rss, tracked = {}, {}
    with torch.no_grad():
        for i in range(1, args.regions + 1):
            with explain("r", target="fp16-npu") as region:
                model(input_ids=ids)
            tracked[i] = region.predictor.tracked()
            del region
            if i in (10, args.regions):
                gc.collect()
                rss[i] = proc.memory_info().rss
    growth = (rss[args.regions] - rss[10]) / 1e6
    print(f"RSS after 10 regions {rss[10] / 1e6:.1f} MB, after {args.regions}: {rss[args.regions] / 1e6:.1f} MB "
          f"(growth {growth:+.1f} MB); tracked storages per region: {tracked[10]} -> {tracked[args.regions]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rss_10_mb": rss[10] / 1e6, "rss_end_mb": rss[args.regions] / 1e6, "growth_mb": growth}, f)


if __name__ == "__main__":
    main()

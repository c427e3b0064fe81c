"""Record a real multi-rank run: a tiny random-init GPT-2 under DDP (gloo, CPU), one PyTorch-profiler trace per rank.

    python bench/ddp_ranks.py OUT_DIR [--ranks 3] [--slow-rank 1] [--sleep-ms 150] [--steps 4]

Each rank trains the same tiny model (transformers config, nothing downloaded) for `--steps` profiled steps
(`ProfilerStep#N`) after one warm-up step, and writes ``OUT_DIR/rank<N>.json`` (`export_chrome_trace`, with the
profiler's `distributedInfo`). Rank `--slow-rank` sleeps `--sleep-ms` inside each of its steps, before its forward
pass: the straggler `portscope report --ranks` should find, slower than the median rank by about that much.
Then `portscope convert OUT_DIR -o run.arrow` reads the folder as one run.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, out: str, slow_rank: int, sleep_s: float, steps: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from transformers import GPT2Config, GPT2LMHeadModel

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=64)
        model = DistributedDataParallel(GPT2LMHeadModel(config))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        tokens = torch.randint(0, config.vocab_size, (2, 32), generator=torch.Generator().manual_seed(rank))

        def step() -> None:
            if rank == slow_rank:
                time.sleep(sleep_s)  # the injected slowdown
            loss = model(tokens, labels=tokens).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

        path = str(Path(out) / f"rank{rank}.json")
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)  # a schedule: ProfilerStep#N ranges
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                    on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
            for _ in range(steps + 1):  # the first one warms up, unrecorded
                step()
                prof.step()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def record(out: str | Path, *, ranks: int = 3, slow_rank: int = 1, sleep_ms: float = 150.0, steps: int = 4) -> list[Path]:
    """Record `ranks` processes, rank `slow_rank` slowed by `sleep_ms` a step; the per-rank trace files."""
    import torch.multiprocessing as mp

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(_rank, args=(ranks, _free_port(), str(out), slow_rank, sleep_ms / 1000.0, steps), nprocs=ranks, join=True)
    return [out / f"rank{r}.json" for r in range(ranks)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--sleep-ms", type=float, default=150.0)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    files = record(args.out, ranks=args.ranks, slow_rank=args.slow_rank, sleep_ms=args.sleep_ms, steps=args.steps)
    for f in files:
        print(f"{f}: {f.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

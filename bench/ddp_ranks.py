"""Record a real multi-rank run: a tiny random-init GPT-2 under DDP (gloo, CPU), one PyTorch-profiler trace per rank;
or (``--pipeline``) a tiny random-init transformer split into two pipeline stages.

    python bench/ddp_ranks.py OUT_DIR [--ranks 3] [--slow-rank 1] [--sleep-ms 150] [--steps 4]
    python bench/ddp_ranks.py OUT_DIR --pipeline [--slow-rank 1] [--sleep-ms 25] [--micro-batches 4] [--steps 4]

Each rank trains the same tiny model (transformers config, nothing downloaded) for `--steps` profiled steps
(`ProfilerStep#N`) after one warm-up step, and writes ``OUT_DIR/rank<N>.json`` (`export_chrome_trace`, with the
profiler's `distributedInfo`). Rank `--slow-rank` sleeps `--sleep-ms` inside each of its steps, before its forward
pass: the straggler `portscope report --ranks` should find, slower than the median rank by about that much.
Then `portscope convert OUT_DIR -o run.arrow` reads the folder as one run.

``--pipeline``: two processes, two stages of a tiny transformer (``torch.nn.TransformerEncoderLayer``s, width 64):
stage 0 (rank 0) the token embedding and two layers, stage 1 (rank 1) two layers, the vocabulary projection and the
loss. Each step runs `--micro-batches` micro-batches GPipe-style: stage 0 runs every micro-batch's forward and sends
its activations (``dist.isend``), stage 1 receives each (``dist.recv``), runs its forward, loss and backward and
sends the activations' gradient back (``dist.send``), stage 0 receives them in turn and runs its backward; then each
stage steps its optimizer. Stage `--slow-rank` sleeps `--sleep-ms` before each micro-batch's forward: `--sleep-ms`
times `--micro-batches` a step.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _gloo_group(rank: int, world: int, port: int) -> Iterator[None]:
    """This process as `rank` of a gloo process group of `world` on `port` (one torch thread); all wait at the end."""
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        yield
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _rank(rank: int, world: int, port: int, out: str, slow_rank: int, sleep_s: float, steps: int) -> None:
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from transformers import GPT2Config, GPT2LMHeadModel

    with _gloo_group(rank, world, port):
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

        _profiled(rank, out, steps, step)


def _profiled(rank: int, out: str, steps: int, step: Any) -> None:
    """Run `step` once to warm up, then `steps` times under the profiler (``ProfilerStep#1``...): ``out/rank<N>.json``."""
    import torch

    path = str(Path(out) / f"rank{rank}.json")
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)  # a schedule: ProfilerStep#N ranges
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(steps + 1):  # the first one warms up, unrecorded
            step()
            prof.step()


def _stage(rank: int, world: int, port: int, out: str, slow_rank: int, sleep_s: float, steps: int, micro: int) -> None:
    """One pipeline stage (see the module's docstring)."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn import functional

    with _gloo_group(rank, world, port):
        torch.manual_seed(rank)
        width, vocab, batch, seq = 64, 256, 2, 32
        layers = [nn.TransformerEncoderLayer(width, 2, 128, dropout=0.0, batch_first=True) for _ in range(2)]
        stage = nn.Sequential(nn.Embedding(vocab, width), *layers) if rank == 0 else nn.Sequential(*layers, nn.Linear(width, vocab))
        optimizer = torch.optim.SGD(stage.parameters(), lr=0.01)
        tokens = torch.randint(0, vocab, (micro, batch, seq), generator=torch.Generator().manual_seed(0))  # both stages

        def first() -> None:
            acts, sends = [], []
            for m in range(micro):
                if rank == slow_rank:
                    time.sleep(sleep_s)  # the injected slowdown
                acts.append(stage(tokens[m]))
                sends.append(dist.isend(acts[-1].detach(), dst=1))
            for act in acts:
                grad = torch.empty_like(act)
                dist.recv(grad, src=1)
                act.backward(grad)
            for work in sends:
                work.wait()

        def last() -> None:
            for m in range(micro):
                act = torch.empty(batch, seq, width)
                dist.recv(act, src=0)
                act.requires_grad_()
                if rank == slow_rank:
                    time.sleep(sleep_s)  # the injected slowdown
                functional.cross_entropy(stage(act).flatten(0, 1), tokens[m].flatten()).backward()
                dist.send(act.grad, dst=0)

        def step() -> None:
            (first if rank == 0 else last)()
            optimizer.step()
            optimizer.zero_grad()

        _profiled(rank, out, steps, step)


def record(out: str | Path, *, ranks: int = 3, slow_rank: int = 1, sleep_ms: float = 150.0, steps: int = 4,
           pipeline: bool = False, micro_batches: int = 4) -> list[Path]:
    """Record `ranks` processes (a pipeline: 2), rank `slow_rank` slowed by `sleep_ms` a step (a pipeline: a
    micro-batch); the per-rank trace files."""
    import torch.multiprocessing as mp

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if pipeline:
        ranks = 2
        mp.spawn(_stage, args=(ranks, _free_port(), str(out), slow_rank, sleep_ms / 1000.0, steps, micro_batches),
                 nprocs=ranks, join=True)  # fmt: skip
    else:
        mp.spawn(_rank, args=(ranks, _free_port(), str(out), slow_rank, sleep_ms / 1000.0, steps), nprocs=ranks, join=True)
    return [out / f"rank{r}.json" for r in range(ranks)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--sleep-ms", type=float, default=150.0)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--pipeline", action="store_true", help="two pipeline stages instead of DDP")
    parser.add_argument("--micro-batches", type=int, default=4, help="a pipeline's micro-batches a step")
    args = parser.parse_args()
    files = record(args.out, ranks=args.ranks, slow_rank=args.slow_rank, sleep_ms=args.sleep_ms, steps=args.steps,
                   pipeline=args.pipeline, micro_batches=args.micro_batches)
    for f in files:
        print(f"{f}: {f.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

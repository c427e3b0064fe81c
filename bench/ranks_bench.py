"""Multi-rank scale bench: `portscope convert DIR -o run.arrow --jobs 2` on many large per-rank traces, against the
single-file bound (one rank's file converted alone, measured in the same run).

The rank files are made on the fly in a temporary folder (deleted after): a real rank trace (--base, a Kineto
export with ``distributedInfo``; by default one recorded here with bench/ddp_ranks.py, 2 ranks on gloo) repeated
with shifted timestamps and ids to about --mb MB (bench/scale_bench.py's `repeat_trace`), then copied once per
rank with its own ``distributedInfo`` (``rank``, ``world_size``) and start (``baseTimeNanoseconds`` + rank µs).

Figures: wall seconds of each whole process; peak RSS of the single-file convert (/usr/bin/time); of the
multi-rank parent and of its largest worker process (psutil, sampled every 50 ms over the process tree), with
their anonymous part (RssAnon: the heap, without the pages of memory-mapped files, which the kernel drops at will);
and the tree's peak by /usr/bin/time (the largest of the parent and its waited-for workers, exact).

    .venv/bin/python bench/ranks_bench.py                      # 64 ranks x ~100 MB (about 6.4 GB on disk)
    .venv/bin/python bench/ranks_bench.py --ranks 4 --mb 10    # a quick run
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import repeat_trace, timed_process  # noqa: E402

_INFO = re.compile(rb'"distributedInfo":\s*\{[^{}]*?"rank":\s*\d+[^{}]*?"world_size":\s*\d+')
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds":\s*(\d+)')
_TIME = "/usr/bin/time"


def record_base(work: Path) -> Path:
    """A real rank trace: bench/ddp_ranks.py, 2 ranks of a tiny GPT-2 on gloo; its rank 0's file."""
    out = work / "ddp"
    subprocess.run([sys.executable, str(Path(__file__).with_name("ddp_ranks.py")), str(out), "--ranks", "2",
                    "--sleep-ms", "0"], check=True, capture_output=True)  # fmt: skip
    return out / "rank0.json"


def rank_head(head: bytes, rank: int, world: int) -> bytes:
    """The file's head (up to its events) with this rank's distributedInfo and start."""
    if _INFO.search(head):
        head = _INFO.sub(lambda m: re.sub(rb'"world_size":\s*\d+', b'"world_size": %d' % world,
                                          re.sub(rb'"rank":\s*\d+', b'"rank": %d' % rank, m[0], count=1)), head, count=1)
    else:
        brace = head.index(b"{") + 1
        head = head[:brace] + b'"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d},' % (rank, world) + head[brace:]
    return _BASE_TIME.sub(lambda m: b'"baseTimeNanoseconds": %d' % (int(m[1]) + rank * 1000), head, count=1)


def make_ranks(template: Path, folder: Path, ranks: int) -> None:
    """`ranks` copies of `template`, rank N in rankN.json."""
    with template.open("rb") as f:
        raw = f.read(1 << 16)
    cut = raw.index(b"[", raw.index(b'"traceEvents"')) + 1
    folder.mkdir(parents=True)
    for r in range(ranks):
        with template.open("rb") as src, (folder / f"rank{r}.json").open("wb") as dst:
            src.seek(cut)
            dst.write(rank_head(raw[:cut], r, ranks))
            shutil.copyfileobj(src, dst, 1 << 22)


def _anon(pid: int) -> int:
    """A process's anonymous resident memory (its heap, not the mapped files it reads), bytes; 0 when gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def watched(argv: list[str]) -> dict:
    """Run `argv` under /usr/bin/time, sampling the RSS of the process and of each descendant every 50 ms."""
    import psutil

    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        start = time.perf_counter()
        proc = subprocess.Popen([_TIME, "-f", "%e %M", "-o", report.name, *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        timer = psutil.Process(proc.pid)
        peaks: dict[int, int] = {}
        anon: dict[int, int] = {}
        parent: int | None = None
        while proc.poll() is None:
            try:
                tree = timer.children(recursive=True)
                if parent is None and tree:
                    parent = tree[0].pid  # /usr/bin/time's one child: portscope
                for p in tree:
                    try:
                        peaks[p.pid] = max(peaks.get(p.pid, 0), p.memory_info().rss)
                        anon[p.pid] = max(anon.get(p.pid, 0), _anon(p.pid))
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            time.sleep(0.05)
        out, err = proc.communicate()
        seconds = time.perf_counter() - start
        fields = Path(report.name).read_text().split()
    workers = {pid: rss for pid, rss in peaks.items() if pid != parent}
    return {"seconds": seconds, "rc": proc.returncode, "stdout": out[-400:], "stderr": err[-800:],
            "tree_peak_rss": int(fields[-1]) * 1024, "parent_peak_rss": peaks.get(parent or -1, 0),
            "worker_peak_rss": max(workers.values(), default=0), "workers_seen": len(workers),
            "parent_peak_anon": anon.get(parent or -1, 0),
            "worker_peak_anon": max((a for pid, a in anon.items() if pid != parent), default=0)}  # fmt: skip


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="a real Kineto rank trace to repeat (default: record one)")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--mb", type=float, default=100.0, help="size of each rank's file")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--dask", metavar="SCHEDULER", help="convert with --dask SCHEDULER (`local`: a LocalCluster of "
                        "--jobs worker processes) instead of --jobs alone")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()), help="folder for the made files")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    script = shutil.which("portscope", path=str(Path(sys.executable).parent)) or "portscope"
    work = Path(tempfile.mkdtemp(prefix="ranks_bench_", dir=args.work))
    try:
        base = args.base or record_base(work)
        template = work / "template.json"
        copies, events = repeat_trace(base, template, int(args.mb * 1e6))
        folder = work / "ranks"
        made = time.perf_counter()
        make_ranks(template, folder, args.ranks)
        template.unlink()
        size = (folder / "rank0.json").stat().st_size
        total = sum(f.stat().st_size for f in folder.iterdir())
        print(f"{args.ranks} ranks x {_mb(size)} ({copies} copies of {base.name}, {events:,} events each; "
              f"{total / 1e9:.2f} GB in all, made in {time.perf_counter() - made:.0f} s)", flush=True)
        single = timed_process([script, "convert", str(folder / "rank0.json"), "-o", str(work / "single.arrow")])
        if single["rc"]:
            print(f"single-file convert failed: {single['stderr']}")
            return 1
        (work / "single.arrow").unlink()
        print(f"single file (the bound): {single['seconds']:.1f} s, peak RSS {_mb(single['peak_rss'])}", flush=True)
        command = [script, "convert", str(folder), "-o", str(work / "run.arrow"), "--jobs", str(args.jobs)]
        command += ["--dask", args.dask] if args.dask else []
        how = f"--jobs {args.jobs}" + (f" --dask {args.dask}" if args.dask else "")
        multi = watched(command)
        if multi["rc"]:
            print(f"multi-rank convert failed: {multi['stderr']}")
            return 1
        run_bytes = (work / "run.arrow").stat().st_size
        print(f"{args.ranks} ranks, {how}: {multi['seconds']:.1f} s ({total / 1e6 / multi['seconds']:.0f} MB/s, "
              f"{multi['seconds'] / args.ranks:.1f} s a rank), run {_mb(run_bytes)}; peak RSS: parent "
              f"{_mb(multi['parent_peak_rss'])}, largest worker {_mb(multi['worker_peak_rss'])} "
              f"({multi['worker_peak_rss'] / single['peak_rss']:.2f}x the single file), whole tree "
              f"{_mb(multi['tree_peak_rss'])}; anonymous (heap, not mapped files): parent {_mb(multi['parent_peak_anon'])}, "
              f"largest worker {_mb(multi['worker_peak_anon'])}")  # fmt: skip
        print(multi["stdout"].strip().splitlines()[-1] if multi["stdout"].strip() else "")
        figures = {"ranks": args.ranks, "file_bytes": size, "total_bytes": total, "events_per_rank": events,
                   "jobs": args.jobs, "dask": args.dask, "single_s": single["seconds"], "single_peak_rss": single["peak_rss"],
                   "multi_s": multi["seconds"], "run_bytes": run_bytes,
                   **{k: multi[k] for k in ("parent_peak_rss", "worker_peak_rss", "tree_peak_rss", "workers_seen",
                                              "parent_peak_anon", "worker_peak_anon")}}  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

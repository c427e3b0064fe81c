"""Time `portscope report --ranks` on a big multi-rank run: its per-step figures and its collectives matched across
ranks, on per-rank traces made as bench/ranks_bench.py makes them (a real DDP rank trace repeated to `--mb` MB, one
copy per rank).

    python bench/rank_report_bench.py [--base RANK_TRACE.json] [--ranks 16] [--mb 20]

Prints the run's size, the seconds of `rank_steps`, of `collective_calls` + `match_collectives` and of the whole
`ranks_report_data` (fastest of 3), and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ranks_bench import make_ranks, record_base  # noqa: E402
from scale_bench import repeat_trace  # noqa: E402


def best(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="a real Kineto rank trace to repeat (default: record one)")
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--mb", type=float, default=20.0, help="size of each rank's file")
    args = parser.parse_args(argv)
    from portscope.ingest import read_trace
    from portscope.ingest.collectives import collective_calls, match_collectives
    from portscope.ingest.rank_report import rank_steps, ranks_report_data

    work = Path(tempfile.mkdtemp(prefix="rank_report_bench_"))
    try:
        base = args.base or record_base(work)
        template = work / "template.json"
        repeat_trace(base, template, int(args.mb * 1e6))
        make_ranks(template, work / "ranks", args.ranks)
        template.unlink()
        script = shutil.which("portscope", path=str(Path(sys.executable).parent)) or "portscope"
        subprocess.run([script, "convert", str(work / "ranks"), "-o", str(work / "run.arrow"), "--jobs", "2"],
                       check=True, capture_output=True)  # fmt: skip
        shutil.rmtree(work / "ranks")
        run = read_trace(work / "run.arrow")
        print(f"{args.ranks} ranks x {args.mb:.0f} MB: {run.num_rows('ops'):,} operators, "
              f"{run.num_rows('engine_slices'):,} engine slices, {run.num_rows('regions'):,} regions")
        steps_s, steps = best(lambda: rank_steps(run))
        coll_s, matched = best(lambda: match_collectives(collective_calls(run)))
        whole_s, _ = best(lambda: ranks_report_data(run), repeat=1)
        print(f"rank_steps: {steps_s:.2f} s ({len(steps)} rank-steps); collectives: {coll_s:.2f} s "
              f"({len(matched.table)} matched, {len(matched.arrivals)} arrivals); ranks_report_data: {whole_s:.2f} s; "
              f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:,.0f} MB")  # fmt: skip
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""A real multi-rank run recorded here (bench/ddp_ranks.py): a tiny random-init GPT-2 under DDP on gloo, two
processes, rank 1 slowed by a 200 ms sleep in each step. The converted run must name rank 1 the straggler of
every step, slower than the other rank by the injected 200 ms within 10 %."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from portscope.ingest import read_trace
from portscope.ingest.rank_report import rank_steps, stragglers
from portscope.ingest.ranks import convert_ranks

ROOT = Path(__file__).resolve().parents[2]
SLEEP_MS = 200.0


@pytest.mark.slow
def test_the_slowed_rank_is_the_straggler(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path / "traces"
    subprocess.run([sys.executable, str(ROOT / "bench" / "ddp_ranks.py"), str(out), "--ranks", "2", "--slow-rank", "1",
                    "--sleep-ms", str(SLEEP_MS), "--steps", "3"], check=True, timeout=300, capture_output=True)  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == ["rank0.json", "rank1.json"]
    convert_ranks(out, tmp_path / "run.arrow", jobs=2)
    run = read_trace(tmp_path / "run.arrow")
    assert [(r["rank"], r["rank_from"], r["world_size"]) for r in run.run_info.extra["ranks"]] == [
        (0, "distributedInfo", 2), (1, "distributedInfo", 2)]
    steps = rank_steps(run)
    assert sorted(set(steps["step"])) == [1, 2, 3] and len(steps) == 6  # ProfilerStep#0 warmed up, unrecorded
    slow = stragglers(steps)
    assert slow["rank"].tolist() == [1, 1, 1]
    per_step_ms = slow["slowdown_ns"].mean() / 1e6
    assert abs(per_step_ms - SLEEP_MS) <= 0.1 * SLEEP_MS, slow
    # the fast rank spent the difference waiting in gloo:all_reduce: exposed communication, not compute
    fast = steps[steps["rank"] == 0]
    assert (fast["exposed_communication_ns"] > 0.5 * SLEEP_MS * 1e6).all()

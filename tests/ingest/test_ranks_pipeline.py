"""A real two-stage pipeline recorded here (bench/ddp_ranks.py --pipeline): a tiny random-init transformer split over
two processes on gloo, 4 micro-batches a step sent forward (activations) and back (their gradients) by send/recv.

A pipeline's stages do different work, so even unslowed one stage is the slower (here stage 1, which also projects
to the vocabulary and computes the loss). The straggler analysis names the pipeline's bottleneck stage, and its
excess over the other stage is the injected slowdown plus that imbalance: the test records the pipeline twice, once
balanced as it is (no sleep) and once with stage 1 sleeping 50 ms before each micro-batch (200 ms a step), and checks
that the bottleneck is stage 1 in every slowed step and that its excess grew by the injected 200 ms within 10 % (an
injected 100 ms was once off by 11 % on a loaded 2-core machine: the noise is milliseconds, whatever the sleep).
Takes about 25 s on 2 cores."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from portscope.ingest import read_trace
from portscope.ingest.rank_report import rank_steps, ranks_report_data, stragglers
from portscope.ingest.ranks import convert_ranks

ROOT = Path(__file__).resolve().parents[2]
SLEEP_MS, MICRO, STEPS = 50.0, 4, 3


def recorded(tmp_path: Path, name: str, sleep_ms: float):
    out = tmp_path / name
    subprocess.run([sys.executable, str(ROOT / "bench" / "ddp_ranks.py"), str(out), "--pipeline", "--slow-rank", "1",
                    "--sleep-ms", str(sleep_ms), "--micro-batches", str(MICRO), "--steps", str(STEPS)],
                   check=True, timeout=300, capture_output=True)  # fmt: skip
    convert_ranks(out, tmp_path / f"{name}.arrow", jobs=2)
    return read_trace(tmp_path / f"{name}.arrow")


@pytest.mark.slow
def test_the_slowed_stage_is_the_bottleneck(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    balanced, slowed = recorded(tmp_path, "balanced", 0.0), recorded(tmp_path, "slowed", SLEEP_MS)
    assert [(r["rank"], r["rank_from"], r["world_size"]) for r in slowed.run_info.extra["ranks"]] == [
        (0, "distributedInfo", 2), (1, "distributedInfo", 2)]
    data = ranks_report_data(slowed)
    # 2 stages x 3 steps x 4 micro-batches, each sent once and received once: no collective to match
    assert data["point_to_point"] == 2 * STEPS * MICRO * 2
    assert data["collectives"] == []
    steps = rank_steps(slowed)
    assert sorted(set(steps["step"])) == [1, 2, 3] and len(steps) == 6
    slow = stragglers(steps)
    assert slow["rank"].tolist() == [1, 1, 1]
    imbalance = stragglers(rank_steps(balanced))
    excess = slow.set_index("step")["slowdown_ns"]
    natural = imbalance.set_index("step").apply(lambda s: s["slowdown_ns"] if s["rank"] == 1 else -s["slowdown_ns"], axis=1)
    grew_ms = (excess - natural).mean() / 1e6
    injected_ms = SLEEP_MS * MICRO
    assert abs(grew_ms - injected_ms) <= 0.1 * injected_ms, (slow, imbalance)
    # stage 0 spent the sleep waiting for stage 1's gradients: exposed communication, not compute
    first = steps[steps["rank"] == 0]
    assert (first["exposed_communication_ns"] > 0.5 * injected_ms * 1e6).all()

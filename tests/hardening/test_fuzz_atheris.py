"""The coverage-guided run (bench/fuzz_long.py, atheris) on every reader, a few seconds each in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .fuzz_targets import READERS, REGRESSIONS

pytest.importorskip("atheris")
FUZZ_LONG = Path(__file__).resolve().parents[2] / "bench" / "fuzz_long.py"
SECONDS = int(os.environ.get("PORTSCOPE_ATHERIS_SECONDS", "3"))


def test_coverage_guided_fuzzing_finds_no_crash_in_any_reader() -> None:
    before = {p for p in REGRESSIONS.rglob("crash-*")}
    readers = sorted(READERS)
    outcomes: dict[str, tuple[int, str]] = {}
    for pair in (readers[i : i + 2] for i in range(0, len(readers), 2)):  # two at a time: CI has 2 cores
        procs = {
            r: subprocess.Popen([sys.executable, str(FUZZ_LONG), "--reader", r, "--seconds", str(SECONDS)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for r in pair
        }
        for r, proc in procs.items():
            out, _ = proc.communicate(timeout=180)
            outcomes[r] = (proc.returncode, out)
    new = sorted(str(p) for p in set(REGRESSIONS.rglob("crash-*")) - before)
    failed = {r: out[-3000:] for r, (rc, out) in outcomes.items() if rc != 0}
    assert failed == {} and new == [], (failed, new)
    for r, (_, out) in outcomes.items():
        assert "Done" in out and "stat::new_units_added" in out, (r, out[-2000:])

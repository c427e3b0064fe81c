"""The coverage-guided run (bench/fuzz_long.py, atheris) on every reader, a fixed number of inputs each in CI.

CI's run is repeatable: libFuzzer starts from a fixed seed and stops after RUNS inputs, and Python's hashing is
fixed, so a CI run on the same code tries the same inputs (a time-bounded run tried different ones each time, and
failed a landing on a crash it met by chance). Open-ended exploration is bench/fuzz_long.py without --runs; what it
finds goes to tests/fuzz_regressions/, which test_fuzz_regressions.py replays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .fuzz_targets import READERS, REGRESSIONS

pytest.importorskip("atheris")
FUZZ_LONG = Path(__file__).resolve().parents[2] / "bench" / "fuzz_long.py"
RUNS = int(os.environ.get("PORTSCOPE_ATHERIS_RUNS", "3000"))
SEED = int(os.environ.get("PORTSCOPE_ATHERIS_SEED", "1"))
CAP_S = 120  # a cap on each reader's run, far above what RUNS takes


def test_coverage_guided_fuzzing_finds_no_crash_in_any_reader() -> None:
    before = {p for p in REGRESSIONS.rglob("crash-*")}
    readers = sorted(READERS)
    outcomes: dict[str, tuple[int, str]] = {}
    for pair in (readers[i : i + 2] for i in range(0, len(readers), 2)):  # two at a time: CI has 2 cores
        procs = {
            r: subprocess.Popen([sys.executable, str(FUZZ_LONG), "--reader", r, "--runs", str(RUNS), "--seed", str(SEED), "--seconds", str(CAP_S)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
            for r in pair
        }
        for r, proc in procs.items():
            out, _ = proc.communicate(timeout=CAP_S + 60)
            outcomes[r] = (proc.returncode, out)
    new = sorted(str(p) for p in set(REGRESSIONS.rglob("crash-*")) - before)
    failed = {r: out[-3000:] for r, (rc, out) in outcomes.items() if rc != 0}
    assert failed == {} and new == [], (failed, new)
    for r, (_, out) in outcomes.items():
        assert "Done" in out and "stat::new_units_added" in out, (r, out[-2000:])

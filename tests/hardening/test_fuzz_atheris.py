"""The coverage-guided run (bench/fuzz_long.py, atheris) on every reader, a fixed number of inputs each in CI.

CI's run is repeatable: libFuzzer starts from a fixed seed and stops after RUNS inputs, and Python's hashing is
fixed, so a CI run on the same code tries the same inputs (a time-bounded run tried different ones each time, and
failed a landing on a crash it met by chance). Open-ended exploration is bench/fuzz_long.py without --runs; what it
finds goes to tests/fuzz_regressions/, which test_fuzz_regressions.py replays."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from .fuzz_targets import READERS, REGRESSIONS

pytest.importorskip("atheris")
FUZZ_LONG = Path(__file__).resolve().parents[2] / "bench" / "fuzz_long.py"
RUNS = int(os.environ.get("PORTSCOPE_ATHERIS_RUNS", "3000"))
SEED = int(os.environ.get("PORTSCOPE_ATHERIS_SEED", "1"))
CAP_S = 120  # a cap on each reader's run, far above what RUNS takes


ARTIFACTS = ("crash-*", "timeout-*", "oom-*", "leak-*")  # what libFuzzer writes of a failing input


def _artifacts() -> set[Path]:
    return {p for pattern in ARTIFACTS for p in REGRESSIONS.rglob(pattern)}


def _tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:]


def _fuzz(reader: str, log: Path) -> subprocess.Popen[bytes]:
    # each run's output to a file of its own: a pipe left unread while its pair's run is awaited fills and stalls it
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, str(FUZZ_LONG), "--reader", reader, "--runs", str(RUNS), "--seed", str(SEED),
                                 "--seconds", str(CAP_S)], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONHASHSEED": "0"})  # fmt: skip


def _finish(proc: subprocess.Popen[bytes], deadline: float) -> int | None:
    """The run's exit status; None when it was still running at the deadline (then its stacks go to its log and
    it is killed)."""
    try:
        return proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGQUIT)  # fuzz_long prints every thread's stack
        time.sleep(2)
        proc.kill()
        proc.wait()
        return None


def _run_all(logs: Path) -> dict[str, tuple[int | None, Path]]:
    readers = sorted(READERS)
    outcomes: dict[str, tuple[int | None, Path]] = {}
    for pair in (readers[i : i + 2] for i in range(0, len(readers), 2)):  # two at a time: CI has 2 cores
        procs = {r: (_fuzz(r, logs / f"{r}.log"), logs / f"{r}.log") for r in pair}
        deadline = time.monotonic() + CAP_S + 60
        for r, (proc, log) in procs.items():
            outcomes[r] = (_finish(proc, deadline), log)
    return outcomes


def test_coverage_guided_fuzzing_finds_no_crash_in_any_reader(tmp_path: Path) -> None:
    before = _artifacts()
    outcomes = _run_all(tmp_path)
    # libFuzzer's -timeout ends a run whose input hangs, with the input saved (timeout-*): a run still going at the
    # deadline without one stalled outside any input. It is run once more, alone; its stacks are kept in the report.
    stalled = {r: _tail(log) for r, (rc, log) in outcomes.items() if rc is None}
    for r in stalled:
        log = tmp_path / f"{r}-again.log"
        outcomes[r] = (_finish(_fuzz(r, log), time.monotonic() + CAP_S + 60), log)
    new = sorted(str(p) for p in _artifacts() - before)
    failed = {r: ("still running at the deadline" if rc is None else f"exit {rc}", _tail(log), stalled.get(r))
              for r, (rc, log) in outcomes.items() if rc != 0}  # fmt: skip
    assert failed == {} and new == [], (failed, new)
    if stalled:
        warnings.warn(f"fuzz runs stalled once, outside any input, then passed: {stalled}", stacklevel=1)
    for r, (_, log) in outcomes.items():
        out = log.read_text(errors="replace")
        assert "Done" in out and "stat::new_units_added" in out, (r, out[-2000:])

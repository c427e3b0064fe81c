"""Crash safety of the writer: SIGKILL in the middle of write_trace never leaves a corrupt file under the final name."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.compute as pc

from portscope.ingest import read_trace

_WRITER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from portscope.ingest import RunInfo, write_trace
    from portscope.ingest.trace import Trace

    out, rows = sys.argv[1], int(sys.argv[2])
    numerics = pa.table({
        "comparison": pa.array(["fp16-vs-fp32"] * rows).dictionary_encode(),
        "metric": pa.array(["max_abs_diff"] * rows).dictionary_encode(),
        "value": pa.array([float(i) for i in range(rows)], pa.float64()),
        "text": pa.array([f"row {i} " + "x" * 40 for i in range(rows)]),
    })
    trace = Trace(run_info=RunInfo(), tables={"numerics": numerics})
    n = 0
    while True:
        write_trace(trace, out)
        n += 1
        print(n, flush=True)
    """
)


ROWS = 400_000  # ~25 MB per write: each takes a good fraction of a second
VALUE_SUM = 79_999_800_000  # 0 + 1 + ... + 399,999 = 399,999 * 400,000 / 2
LEFTOVER = re.compile(r"^\.big\.arrow\..+\.partial$")  # a temporary of write_trace (ingest/container.py)


def _check_complete(path: Path) -> None:
    """The file at the final name is one whole write: every row the writer made, with the values it made."""
    numerics = read_trace(path)["numerics"]  # raises TraceFormatError on a torn file
    assert numerics.num_rows == ROWS
    assert pc.sum(numerics.column("value")).as_py() == VALUE_SUM
    assert numerics.column("text")[123_456].as_py() == "row 123456 " + "x" * 40
    assert numerics.column("comparison").unique().to_pylist() == ["fp16-vs-fp32"]


def test_sigkill_mid_write_never_leaves_a_corrupt_trace(tmp_path: Path) -> None:
    out = tmp_path / "big.arrow"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    kills, complete_before, torn = 0, 0, set()
    for delay in (0.05, 0.4, 0.9, 1.7, 2.6):
        proc = subprocess.Popen([sys.executable, str(script), str(out), str(ROWS)], stdout=subprocess.PIPE, text=True)
        time.sleep(delay + (3.0 if kills == 0 else 0))  # the first start pays for the imports
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        kills += 1
        complete_before += len((proc.stdout.read() if proc.stdout else "").split())
        if out.exists():
            _check_complete(out)
        names = {p.name for p in tmp_path.iterdir()} - {"writer.py"}
        torn |= {n for n in names if LEFTOVER.match(n)}
        # the final name, and a killed write's temporary at most per kill: nothing else under any name
        assert names - torn <= {"big.arrow"}, names
        assert len(torn) <= kills, torn
    assert kills == 5 and complete_before >= 1
    _check_complete(out)

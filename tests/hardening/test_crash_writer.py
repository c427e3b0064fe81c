"""Crash safety of the writer: SIGKILL in the middle of write_trace never leaves a corrupt file under the final name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

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


def test_sigkill_mid_write_never_leaves_a_corrupt_trace(tmp_path: Path) -> None:
    out = tmp_path / "big.arrow"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    rows = 400_000  # ~25 MB per write: each takes a good fraction of a second
    kills, complete_before = 0, 0
    for delay in (0.05, 0.4, 0.9, 1.7, 2.6):
        proc = subprocess.Popen([sys.executable, str(script), str(out), str(rows)], stdout=subprocess.PIPE, text=True)
        time.sleep(delay + (3.0 if kills == 0 else 0))  # the first start pays for the imports
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        kills += 1
        written = len((proc.stdout.read() if proc.stdout else "").split())
        complete_before += written
        if out.exists():
            trace = read_trace(out)  # raises TraceFormatError on a torn file
            assert trace["numerics"].num_rows == rows
        final_names = [p.name for p in tmp_path.iterdir() if p.name.endswith(".arrow")]
        assert final_names in ([], ["big.arrow"]), final_names  # temporaries never carry the final name
    assert out.exists() and complete_before >= 1
    assert kills == 5

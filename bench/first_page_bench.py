"""First page of a converted run in a fresh store, as bench/viewer_bench.py measures it (`store.listed()` +
`run_row`), split into its parts: the validated reads of the trace and the content hash (none when the run
id was remembered: ingest/run_ids.py; then the trace is not validated again either). One run per process (a fresh store, nothing mapped yet):

    for i in 1 2 3; do python bench/first_page_bench.py DIR_WITH_ONE_CONVERTED_ARROW; done
    # an older tree: PYTHONPATH=/copy/of/that/tree python bench/first_page_bench.py DIR
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import portscope.app.store as store_module
import portscope.ingest.trace as trace_module
from portscope.app.config import ViewerConfig
from portscope.app.server import create_app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", type=Path, help="a folder holding the converted run (one .arrow file)")
    args = parser.parse_args()
    hashes: list[float] = []
    reads: list[tuple[float, bool]] = []  # (seconds, validated in full)
    hash_run, read = trace_module.Trace.content_hash, store_module.read_trace

    def timed_hash(self: trace_module.Trace) -> str:
        t0 = time.perf_counter()
        try:
            return hash_run(self)
        finally:
            hashes.append(time.perf_counter() - t0)

    def timed_read(path: Path, **options: bool) -> trace_module.Trace:
        t0 = time.perf_counter()
        try:
            return read(path, **options)
        finally:
            reads.append((time.perf_counter() - t0, options.get("validate", True)))

    trace_module.Trace.content_hash = timed_hash  # type: ignore[method-assign]
    store_module.read_trace = timed_read  # type: ignore[assignment]
    work = Path(tempfile.mkdtemp(prefix="first-page-"))
    try:
        app = create_app(ViewerConfig(trace_paths=(args.traces,), store_dir=work / "store"))
        with app.server.test_request_context("/"):
            store = app.server.extensions["portscope"].store
            t0 = time.perf_counter()
            run_id = store.listed()[0][0][0]
            t1 = time.perf_counter()
            store.run_row(run_id)
            t2 = time.perf_counter()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    parts = " + ".join(f"{r:.2f}" + ("" if full else " (mapped, not validated again)") for r, full in reads)
    print(f"run {run_id}: first page {t2 - t0:.2f} s (listed {t1 - t0:.2f}, run_row {t2 - t1:.2f}; "
          f"reads {parts}; content hash {' + '.join(f'{h:.2f}' for h in hashes) or 'none'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

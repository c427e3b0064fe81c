"""The linker's launch join (device work -> the last runtime call with its correlation id) against the DuckDB hash
join it replaced, on the same columns in the same process (the machine is noisy: compare within a row).

Synthetic rows: a runtime call, its device work and an operator per launch, ids 5.. in call order, device work in
a random order (streams finish out of order). `--repeated` also gives every 7th call and every 11th kernel one
shared id, as a broken file might (a many-to-many join for DuckDB; it is skipped past 40k launches: minutes).

    .venv/bin/python bench/link_join_bench.py                  # 40k, 2M and 20M launches
    .venv/bin/python bench/link_join_bench.py --sizes 40000 --repeated
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from portscope.ingest import link
from portscope.ingest.events import NONE


def duckdb_join(correlation: np.ndarray, calls: np.ndarray, work: np.ndarray) -> tuple[np.ndarray, float]:
    """The join as link._launches made it before (DuckDB, two threads); (result, seconds of the import)."""
    start = time.perf_counter()
    import duckdb
    import pyarrow as pa

    imported = time.perf_counter() - start
    call_rows, work_rows = np.flatnonzero(calls), np.flatnonzero(work)
    out = np.full(len(calls), -1, dtype=np.int32)
    con = duckdb.connect(config={"threads": 2, "enable_external_access": False})
    try:
        con.register("calls", pa.table({"row": call_rows, "correlation": correlation[call_rows]}))
        con.register("work", pa.table({"row": work_rows, "correlation": correlation[work_rows]}))
        joined = con.sql("SELECT w.row, max(c.row) AS call FROM work w JOIN calls c USING (correlation) "
                         "GROUP BY w.row").to_arrow_table()  # fmt: skip
    finally:
        con.close()
    out[joined.column("row").to_numpy()] = joined.column("call").to_numpy()
    return out, imported


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[40_000, 2_000_000, 20_000_000])
    parser.add_argument("--repeated", action="store_true", help="one id shared by many calls and kernels")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    for launches in args.sizes:
        n = 3 * launches
        correlation = np.full(n, NONE, dtype=np.int64)
        calls, work = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        calls[0::3], work[1::3] = True, True
        correlation[0::3] = np.arange(launches) + 5
        correlation[1::3] = rng.permutation(launches) + 5
        if args.repeated:
            correlation[0::21], correlation[1::33] = 3, 3
        start = time.perf_counter()
        ours = link.launches(correlation, calls, work)
        ours_s = time.perf_counter() - start
        if args.repeated and launches > 40_000:
            print(f"{launches:>11,} launches: sort-merge {ours_s:.3f} s; DuckDB not run (a many-to-many join)")
            continue
        start = time.perf_counter()
        theirs, imported = duckdb_join(correlation, calls, work)
        theirs_s = time.perf_counter() - start
        assert (ours == theirs).all(), "the joins disagree"
        print(f"{launches:>11,} launches: sort-merge {ours_s:.3f} s, DuckDB {theirs_s:.3f} s (its import {imported:.3f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

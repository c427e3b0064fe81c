"""Per-rank conversion on Dask distributed (`portscope convert DIR --dask ADDRESS|local`), when one machine's cores
are not enough: each rank's file is converted by `ranks.convert_rank` in a Dask worker, which writes the rank's
portscope trace into the run's temporary folder; only a small dict (the rank's ``distributedInfo``, start time,
host name, or its problems) travels back. The merge then reads the written files as with ``--jobs``, so the run
is the same, table by table, and a worker's peak memory is the one-file converter's.

Workers must see the rank files and the temporary folder (beside the output) at the same paths as this
process: a shared filesystem (NFS, Lustre...) for a remote scheduler. ``local`` starts a LocalCluster of worker
processes on this machine (one thread each) for the time of the conversion.

Dask is imported here only, when ``--dask`` is given: `portscope`'s start-up never pays for it.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .errors import TraceFormatError, UsageError

__all__ = ["CONNECT_TIMEOUT_S", "LOCAL", "map_on_dask"]

LOCAL = "local"
CONNECT_TIMEOUT_S = 30.0  # how long a scheduler's address is tried before one clear error


@contextlib.contextmanager
def _client(scheduler: str, workers: int | None) -> Iterator[Any]:
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise UsageError("--dask needs Dask distributed: pip install 'dask[distributed]'") from exc
    if scheduler == LOCAL:
        n = max(1, workers or os.cpu_count() or 1)
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:  # fmt: skip
            yield client
        return
    try:
        client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(f"--dask {scheduler}: no Dask scheduler answered ({type(exc).__name__}: {exc})") from None
    with client:
        yield client


def map_on_dask(scheduler: str, convert: Callable[[str, str], dict[str, Any]], paths: list[str], outs: list[str], *,
                workers: int | None = None) -> list[dict[str, Any]]:
    """`convert(path, out)` for every rank on the Dask scheduler at `scheduler` (or ``local``: a LocalCluster of
    `workers` processes, default one per core); the results in the order of `paths`. A worker that fails (not a
    TraceFormatError, which `convert` reports in its result) is one TraceFormatError naming the rank's file."""
    with _client(scheduler, workers) as client:
        run = uuid.uuid4().hex  # keys of this conversion only: a shared scheduler may run several at once
        futures = client.map(convert, paths, outs, pure=False, key=[f"portscope-rank-{run}-{i}" for i in range(len(paths))])
        found: list[dict[str, Any]] = []
        problems: list[str] = []
        for path, future in zip(paths, futures, strict=True):
            try:
                found.append(future.result())
            except Exception as exc:  # a worker lost, out of memory, or a converter bug: name the file
                problems.append(f"{os.path.basename(path)}: the Dask worker failed ({type(exc).__name__}: {exc})")
                found.append({})
    if not problems:  # written on a worker's own disk: the merge here would not find them
        problems = [f"{os.path.basename(path)}: converted, but its result {out} is not visible here: the output's "
                    "folder must be on a filesystem shared with the Dask workers"
                    for path, out, got in zip(paths, outs, found, strict=True)
                    if "problems" not in got and not os.path.exists(out)]  # fmt: skip
    if problems:
        raise TraceFormatError(os.path.commonpath(paths) if len(paths) > 1 else paths[0], problems)
    return found

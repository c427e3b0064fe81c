"""A multi-rank run: a folder (or glob) of per-rank PyTorch-profiler traces read as one run.

Each rank's file converts on its own (`convert_rank`, one process per rank with `--jobs`, each in the bounded
memory of the one-file converter) into a temporary portscope trace; `merge_ranks` (`ingest/rank_merge.py`, whose
names this module re-exports) then lays the ranks side by side in one trace without changing the format:

* each rank is a top-level region named ``rank N``; the rank's own regions (its file's root region, its
  ``ProfilerStep#N`` ranges...) nest in it, so a row's rank is found by region nesting (`rank_of_regions`);
* its engine lanes are prefixed ``rank N · `` (`LANE_PREFIX`); a memory lane after its ``memory ``
  (``memory rank N · cuda:0``, `rank_lane`): still a memory lane, of the rank's own device;
* its operator, region, frame and stack ids and correlation ids are offset past the previous ranks' (rank-distinct);
* its times are shifted so that its steps line up with the reference rank's (`align_on_steps`): placed first by
  its file's start relative to the earliest rank's (`run_info.start_time` of each file), then moved by its clock
  skew, the median over the ``ProfilerStep#N`` both ranks ran of the difference of their starts (a rank with no step
  in common keeps its file's start); then every rank moves by the same amount so that none starts before 0;
* ``run_info.extra["ranks"]`` lists every rank: number, world size, file, where the number came from, its region,
  how its rows moved (file offset, skew removed, what it was aligned on); ``extra["reference_rank"]`` the reference.

Every table but regions and stacks is merged as it is written, one written batch at a time (`_batches`).

A rank's number comes from the trace's ``distributedInfo`` (``rank``, ``world_size``), else from the file name
(``rank-N``, ``rank_N``, ``*_rankN*``), else from the file's place in name order (with a warning).

torch_npu writes one folder per rank, ``{worker_name}_{timestamp}_ascend_pt``, holding ``profiler_info_N.json``
(``rank_id``: the process's ``torch.distributed`` rank; ``profiler_info.json`` without one when not distributed) and
``ASCEND_PROFILER_OUTPUT/trace_view.json`` (the ``ascend-trace`` reader's input). A folder of such folders is a
multi-rank run too: each folder's trace view is a rank's file, its number the ``rank_id`` of its profiler info,
else the ``N`` of that file's name, else a rank in the folder's name, else its place in name order.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import enum
import json
import multiprocessing
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from . import schema
from .errors import TraceFormatError
from .rank_inputs import ASCEND_OUTPUT, ascend_folder, display_name, is_rank_input, rank_files
from .rank_merge import (
    LANE_PREFIX,
    LANE_RANK,
    STEP_REGION,
    Alignment,
    Placement,
    align_on_steps,
    lane_prefix,
    lane_rank,
    merge_ranks,
    rank_lane,
    rank_of_regions,
    rank_region_name,
    step_starts,
)
from .trace import TableSlices, Trace, read_trace, write_run, write_trace

__all__ = ["ASCEND_OUTPUT", "LANE_PREFIX", "LANE_RANK", "STEP_REGION", "Alignment", "Placement", "RankFile", "RankFrom",
           "align_on_steps", "ascend_rank", "convert_rank",
           "convert_ranks", "display_name", "is_rank_input", "lane_prefix", "lane_rank", "merge_ranks", "rank_files", "rank_lane", "rank_of_regions",
           "rank_region_name", "read_ranks", "step_starts"]

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_PROFILER_INFO = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
_PROFILER_INFO_CAP = 1 << 20  # bytes: a profiler info is a few KB
_RANK_FORMATS = ("kineto", "ascend-trace")  # what a rank's file may be (`convert.load_any`'s format names)


class RankFrom(enum.StrEnum):
    """Where a rank's number came from (``run_info.extra["ranks"][i]["rank_from"]``)."""

    DISTRIBUTED_INFO = "distributedInfo"  # the PyTorch profiler's trace: distributedInfo.rank
    PROFILER_INFO = "profiler_info"  # a torch_npu rank folder's profiler_info_N.json: rank_id, else its N
    FILE_NAME = "file name"  # rank-N, rank_N, *_rankN* in the file's name (a torch_npu rank: its folder's)
    FILE_ORDER = "file order"  # none of the above: its place in name order


@dataclasses.dataclass(frozen=True)
class RankFile:
    """One rank of a run: its number, the world size the trace says (None: unknown), its file, and where the
    number came from."""

    rank: int
    world_size: int | None
    path: Path
    rank_from: RankFrom

    @property
    def name(self) -> str:
        return display_name(self.path)


def ascend_rank(folder: Path) -> int | None:
    """A torch_npu rank folder's rank: ``rank_id`` of its ``profiler_info_N.json`` (a non-negative integer, or digits),
    else that file's N; None when it has none (unreadable, not JSON, or ``profiler_info.json``: not distributed)."""
    for info in sorted(f for f in folder.iterdir() if f.is_file() and _PROFILER_INFO.match(f.name)):
        try:
            with info.open("rb") as fh:
                data = json.loads(fh.read(_PROFILER_INFO_CAP + 1)[:_PROFILER_INFO_CAP] or b"null")
        except (OSError, ValueError):
            data = None
        rank = data.get("rank_id") if isinstance(data, dict) else None
        if isinstance(rank, str) and rank.strip().isdigit():
            rank = int(rank)
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            return rank
        if (n := _PROFILER_INFO.match(info.name).group(1)) is not None:  # type: ignore[union-attr]
            return int(n)
    return None


def convert_rank(path: str, out: str) -> dict[str, Any]:
    """Convert one rank's trace file into the portscope trace `out` (run in a worker process); what the rank's
    detection needs: the trace's ``distributedInfo`` (or None) and its start time; or, for a file that cannot be
    read, ``problems`` (a TraceFormatError does not cross a process boundary whole)."""
    from .convert import big_npu_lanes, load_any
    from .spill import converting_process

    converting_process(path, npu_lanes=big_npu_lanes(path))
    try:
        trace = load_any(path, sliced=True)
        if trace.run_info.converted_from not in _RANK_FORMATS:
            raise TraceFormatError(path, f"read as {trace.run_info.converted_from or 'a portscope trace'}: not a "
                                         "PyTorch-profiler (Kineto) trace or a torch_npu trace view, the kinds read as ranks")
        write_trace(trace, out)
    except TraceFormatError as exc:
        return {"problems": [f"{display_name(Path(path))}: {p}" for p in exc.problems]}
    meta = trace.run_info.extra.get("metadata") or {}
    info = meta.get("distributedInfo") if isinstance(meta, dict) else None
    return {"distributed": info if isinstance(info, dict) else None, "start_time": trace.run_info.start_time,
            "host_name": meta.get("host_name") if isinstance(meta, dict) else None}  # fmt: skip


def _assign(paths: list[Path], found: list[dict[str, Any]]) -> tuple[list[RankFile], list[str]]:
    """Rank numbers from distributedInfo, else file names, else file order; one error for clashes."""
    warnings: list[str] = []
    files: list[RankFile] = []
    problems: list[str] = []
    for order, (path, got) in enumerate(zip(paths, found, strict=True)):
        info = got.get("distributed") or {}
        rank, world = info.get("rank"), info.get("world_size")
        world = world if isinstance(world, int) and not isinstance(world, bool) and world > 0 else None
        folder = ascend_folder(path)
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            files.append(RankFile(rank, world, path, RankFrom.DISTRIBUTED_INFO))
        elif folder is not None and (npu_rank := ascend_rank(folder)) is not None:
            files.append(RankFile(npu_rank, world, path, RankFrom.PROFILER_INFO))
        elif (m := _RANK_IN_NAME.search(folder.name if folder is not None else path.name)) is not None:
            files.append(RankFile(int(m.group(1)), world, path, RankFrom.FILE_NAME))
        else:
            files.append(RankFile(order, world, path, RankFrom.FILE_ORDER))
            said = "no profiler_info rank_id and no rank in the folder name" if folder is not None else \
                "no distributedInfo rank and no rank in the file name"
            warnings.append(f"{display_name(path)}: {said}: taken as rank {order} (its place in name order)")
    seen: dict[int, Path] = {}
    for f in files:
        if f.rank in seen:
            problems.append(f"rank {f.rank} appears twice: {display_name(seen[f.rank])} and {f.name}")
        seen[f.rank] = f.path
        if f.world_size is not None and f.rank >= f.world_size:
            problems.append(f"{f.name}: rank {f.rank} is outside its world size {f.world_size}")
    worlds = {f.world_size for f in files if f.world_size is not None}
    if len(worlds) > 1:
        problems.append(f"the files disagree on the world size: {sorted(worlds)}")
    elif worlds and (world := worlds.pop()) != len(files):
        warnings.append(f"world size {world}, {len(files)} rank files: ranks "
                        f"{sorted(set(range(world)) - set(seen)) or 'beyond the world'} missing")
    if problems:
        raise TraceFormatError(files[0].path.parent if len(files) > 1 else files[0].path, problems)
    return sorted(files, key=lambda f: f.rank), warnings


def read_ranks(spec: str | Path, workdir: str | Path, *, jobs: int | None = None, dask: str | None = None) -> Trace:
    """Convert every rank's file of `spec` (a folder or a glob) into `workdir` (`jobs` processes at once; None: one
    per core, 1: in this process; or on the Dask scheduler `dask`, ``local``: a LocalCluster of `jobs` worker
    processes, see `ranks_dask`) and merge them: a trace whose big tables are read from `workdir` when written,
    so `workdir` must outlive the trace's writing."""
    paths = rank_files(spec)
    outs = [str(Path(workdir).resolve() / f"rank-file-{i}.arrow") for i in range(len(paths))]
    if dask:
        from .ranks_dask import map_on_dask

        found = map_on_dask(dask, convert_rank, [str(p.resolve()) for p in paths], outs, workers=jobs)
    else:
        found = _map_local(paths, outs, max(1, min(jobs or os.cpu_count() or 1, len(paths))))
    problems = [p for got in found for p in got.get("problems", ())]
    if problems:
        raise TraceFormatError(spec, problems)
    files, warnings = _assign(paths, found)
    by_path = {p: (o, f) for p, o, f in zip(paths, outs, found, strict=True)}
    ranked = [(f, read_trace(by_path[f.path][0]), by_path[f.path][1]) for f in files]
    return merge_ranks([(f, t) for f, t, _ in ranked], warnings=warnings,
                       hosts={f.rank: got.get("host_name") for f, _, got in ranked})


def _map_local(paths: list[Path], outs: list[str], jobs: int) -> list[dict[str, Any]]:
    if jobs == 1:
        return [convert_rank(str(p), o) for p, o in zip(paths, outs, strict=True)]
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads (Arrow's pool)
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        return list(pool.map(convert_rank, [str(p) for p in paths], outs))


def convert_ranks(spec: str | Path, output: str | Path, *, jobs: int | None = None,
                  compression: str | None = None, dask: str | None = None) -> tuple[Trace, str]:
    """`read_ranks` and write the merged run to `output` (its temporary rank files beside it, removed after: with
    `dask`, the workers write them there, so the output's folder must be shared with them); the trace (its big
    tables no longer readable) and its run id."""
    out = Path(output)
    with tempfile.TemporaryDirectory(prefix=".portscope-ranks-", dir=out.parent if str(out.parent) else ".") as work:
        trace = read_ranks(spec, work, jobs=jobs, dask=dask)
        run_id = write_run(trace, out, compression=compression)
        counts = {name: trace.num_rows(name) for name in schema.TABLES}
    return _counted(trace, counts), run_id


def _counted(trace: Trace, counts: dict[str, int]) -> Trace:
    """The merged trace with its streamed tables replaced by row counts only (their files are gone)."""
    gone = {name: TableSlices(counts[name], lambda: iter(()), trace.slices[name].schema) for name in trace.slices}
    return Trace(run_info=trace.run_info, tables=trace.tables, slices=gone)

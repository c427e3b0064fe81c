"""Memory in a multi-rank run: two tiny per-rank Kineto files with [memory] events written here, every figure
worked out by hand.

Each rank runs ProfilerStep#1 [0, 100) µs on one host thread, with an aten::empty [6, 11) and an aten::mm [31, 51),
then an aten::empty [150, 155) after the step. Its allocator events on cuda:0 (µs: bytes -> total allocated):

    rank 0:  7: +500 -> 1500   35: +2000 -> 3500   60: -500 -> 3000   151: +4000 -> 7000   (1000 before the first)
    rank 1:  7: +1000 -> 2000  35: +6000 -> 8000   60: -6000 -> 2000  151: +500 -> 2500    (1000 before the first)

so the step's peak is 3500 on rank 0 and 8000 on rank 1, the whole file's 7000 and 8000, and a `rank N` region's
(its regions' figures included) the same as its file's. Both files start at the same time and their steps at 0:
nothing moves. Rank 1's step peak is above anything rank 0 allocated: a rank reading the other's lane (they run at
the same time) would show it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import read_trace
from portscope.ingest.memory import allocator_lanes, memory_diff, region_memory
from portscope.ingest.rank_report import format_ranks, ranks_report_data
from portscope.ingest.ranks import convert_ranks, lane_rank, rank_lane, rank_of_regions
from portscope.ingest.viewport import build_lanes

BASE = 1_700_000_000_000_000_000  # baseTimeNanoseconds

ALLOCATIONS = {0: [(7, 500, 1500), (35, 2000, 3500), (60, -500, 3000), (151, 4000, 7000)],
               1: [(7, 1000, 2000), (35, 6000, 8000), (60, -6000, 2000), (151, 500, 2500)]}  # fmt: skip


def op(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def mem(ts: float, nbytes: int, total: int) -> dict:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Bytes": nbytes, "Total Allocated": total, "Total Reserved": 8192, "Device Type": 1, "Device Id": 0,
                     "Addr": 1000 + int(ts)}}  # fmt: skip


def kineto(rank: int) -> dict:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              op("aten::empty", 6, 5), op("aten::mm", 31, 20), op("aten::empty", 150, 5)]
    events += [mem(*a) for a in ALLOCATIONS[rank]]
    return {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": BASE,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}


@pytest.fixture
def merged(tmp_path: Path):
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank in (0, 1):
        (folder / f"r{rank}.json").write_text(json.dumps(kineto(rank)))
    convert_ranks(folder, tmp_path / "run.arrow", jobs=1)
    return tmp_path / "run.arrow"


def test_each_rank_keeps_its_memory_lane(merged: Path) -> None:
    got = read_trace(merged)
    slices = [s for s in got["engine_slices"].to_pylist() if s["engine"].startswith("memory ")]
    # per rank: 4 events, an allocated slice each after one holding the 1000 B before the first; 4 reserved slices
    counts: dict[tuple[str, str], int] = {}
    for s in slices:
        counts[(s["engine"], s["name"])] = counts.get((s["engine"], s["name"]), 0) + 1
    assert counts == {("memory rank 0 · cuda:0", "allocated"): 5, ("memory rank 0 · cuda:0", "reserved"): 4,
                      ("memory rank 1 · cuda:0", "allocated"): 5, ("memory rank 1 · cuda:0", "reserved"): 4}  # fmt: skip
    lanes = allocator_lanes(got)
    assert [lane.device for lane in lanes] == ["rank 0 · cuda:0", "rank 1 · cuda:0"]
    assert [lane.total.tolist() for lane in lanes] == [[1000, 1500, 3500, 3000, 7000], [1000, 2000, 8000, 2000, 2500]]
    assert [lane.start.tolist() for lane in lanes] == [[7_000, 7_000, 35_000, 60_000, 151_000]] * 2
    # each slice in its own rank's regions: rank 0's step is region 2, rank 1's region 5 (its ids after rank 0's)
    ranks = rank_of_regions(got)
    assert {(lane_rank(s["engine"]), ranks[s["region_id"]]) for s in slices} == {(0, 0), (1, 1)}


def test_region_peaks_per_rank(merged: Path) -> None:
    got = read_trace(merged)
    assert [(r["name"], r["peak_memory_bytes"]) for r in got["regions"].to_pylist()] == [
        ("rank 0", 7000), ("r0.json", 7000), ("ProfilerStep#1", 3500),
        ("rank 1", 8000), ("r1.json", 8000), ("ProfilerStep#1", 8000)]  # fmt: skip


def test_region_memory_reads_its_own_rank_only(merged: Path) -> None:
    got = read_trace(merged)
    keep = ["device", "peak_bytes", "live_at_exit_bytes", "allocations", "allocated_bytes"]
    # ProfilerStep#1 of rank 0 (region 2): +500, +2000 inside it, 3000 live when it ends; of rank 1 (region 5)
    assert region_memory(got, 2).devices[keep].to_dict("records") == [
        {"device": "rank 0 · cuda:0", "peak_bytes": 3500, "live_at_exit_bytes": 3000, "allocations": 2, "allocated_bytes": 2500}]
    assert region_memory(got, 5).devices[keep].to_dict("records") == [
        {"device": "rank 1 · cuda:0", "peak_bytes": 8000, "live_at_exit_bytes": 2000, "allocations": 2, "allocated_bytes": 7000}]
    # rank 1's own region (3): its file's four events, 2500 live at its end
    assert region_memory(got, 3).devices[keep].to_dict("records") == [
        {"device": "rank 1 · cuda:0", "peak_bytes": 8000, "live_at_exit_bytes": 2500, "allocations": 3, "allocated_bytes": 7500}]


def test_two_ranks_steps_compare_device_by_device(merged: Path) -> None:
    # rank 0's step (region 2): peak 3500, 3000 live at its end, +2500 in 2 allocations; rank 1's (region 5): peak
    # 8000, 2000 live, +7000 in 2: one row for the device each rank calls cuda:0, not one per rank
    got = read_trace(merged)
    diff = memory_diff(got, 2, got, 5)
    assert diff.devices[["device", "a_peak_bytes", "b_peak_bytes", "delta_peak_bytes", "a_live_at_exit_bytes",
                         "b_live_at_exit_bytes"]].to_dict("records") == [
        {"device": "cuda:0", "a_peak_bytes": 3500, "b_peak_bytes": 8000, "delta_peak_bytes": 4500,
         "a_live_at_exit_bytes": 3000, "b_live_at_exit_bytes": 2000}]  # fmt: skip
    assert set(diff.sites["device"]) == {"cuda:0"}


def test_the_memory_view_and_report(merged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", "--format", "json", "SELECT device, counter, count(*) AS n, max(bytes) AS peak FROM memory "
                 "GROUP BY ALL ORDER BY device, counter", str(merged)]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out) == [
        {"device": "rank 0 · cuda:0", "counter": "allocated", "n": 5, "peak": 7000},
        {"device": "rank 0 · cuda:0", "counter": "reserved", "n": 4, "peak": 8192},
        {"device": "rank 1 · cuda:0", "counter": "allocated", "n": 5, "peak": 8000},
        {"device": "rank 1 · cuda:0", "counter": "reserved", "n": 4, "peak": 8192}]  # fmt: skip
    assert main(["report", "--memory", str(merged)]) == 0
    out = capsys.readouterr().out
    # three regions a rank, each with its device's row and its one call site's (none: no Python frames)
    assert "no memory events" not in out and out.count("rank 0 · cuda:0") == 6 and out.count("rank 1 · cuda:0") == 6


def test_the_viewer_draws_each_memory_lane_in_its_rank(merged: Path) -> None:
    got = read_trace(merged)
    lanes = build_lanes(got["engine_slices"]).lanes
    assert lanes == ["rank 0 · host", "memory rank 0 · cuda:0", "rank 1 · host", "memory rank 1 · cuda:0"]
    # the timeline finds a memory lane's levels by its engine: "memory " and the lane's device
    assert [f"memory {lane.device}" for lane in allocator_lanes(got)] == [lanes[1], lanes[3]]


def test_lane_names() -> None:
    assert rank_lane(3, "stream 7") == "rank 3 · stream 7"
    assert rank_lane(3, "memory cuda:0") == "memory rank 3 · cuda:0"
    assert [lane_rank(n) for n in ("rank 3 · stream 7", "memory rank 3 · cuda:0", "rank 3 · cuda:0", "memory cuda:0",
                                   "stream 7")] == [3, 3, 3, None, None]  # fmt: skip


def test_the_ranks_report_counts_ranks_without_profiler_steps(tmp_path: Path) -> None:
    # the same two ranks without their ProfilerStep#1 ranges: two ranks still (there are no steps to summarise)
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank in (0, 1):
        doc = kineto(rank)
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e["name"] != "ProfilerStep#1"]
        (folder / f"r{rank}.json").write_text(json.dumps(doc))
    convert_ranks(folder, tmp_path / "run.arrow", jobs=1)
    data = ranks_report_data(read_trace(tmp_path / "run.arrow"))
    assert (data["rank_count"], data["world_size"], data["steps"]) == (2, 2, [])
    assert format_ranks(data).splitlines()[0] == "ranks: 2 (world size 2)"

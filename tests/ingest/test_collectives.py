"""Collectives matched across ranks (ingest/collectives.py): arrivals, skews and waits worked out by hand.

Three CPU ranks (same clock, one ProfilerStep#1 over [0, 1000) µs each: no skew removed, times as written), host
thread 1 (µs):

    rank 0   c10d::broadcast_ [10, 20)   c10d::allreduce_ [100, 150) ⊃ record_param_comms [101, 149)
             aten::gather [200, 210)     c10d::allreduce_ [400, 450)   c10d::send [600, 610)   c10d::barrier [700, 710)
    rank 1   c10d::broadcast_ [30, 40)   c10d::allreduce_ [160, 170)   c10d::allreduce_ [300, 450)
             c10d::recv_ [605, 640)
    rank 2   c10d::broadcast_ [10, 12)   record_param_comms [118, 172) ⊃ c10d::allreduce_ [120, 170)
             c10d::allreduce_ [410, 450)

    broadcast #1   arrivals 10, 30, 10     first rank 0 (the lowest on a tie), last rank 1, skew 20; waits 20, 0, 20
    allreduce #1   arrivals 100, 160, 118  (rank 2's call starts with its outer record_param_comms, and is named after
                   the c10d::allreduce_ inside it) first 0, last 1, skew 60; waits 60, 0, 42
    allreduce #2   arrivals 400, 300, 410  first 1, last 2, skew 110; waits 10, 110, 0

aten::gather is a tensor operator, not a collective; send/recv are point-to-point (counted, not matched); the barrier
only rank 0 called matches nothing and is reported.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import read_trace
from portscope.ingest.collectives import collective_calls, is_point_to_point, match_collectives
from portscope.ingest.op_categories import is_communication
from portscope.ingest.rank_report import rank_steps, ranks_report_data
from portscope.ingest.ranks import convert_ranks

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_ranks import BASE, kineto  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HTA = ROOT / "tests" / "fixtures" / "kineto" / "hta_sampled_2ranks"

CALLS = {
    0: [("c10d::broadcast_", 10, 10), ("c10d::allreduce_", 100, 50), ("record_param_comms", 101, 48),
        ("aten::gather", 200, 10), ("c10d::allreduce_", 400, 50), ("c10d::send", 600, 10), ("c10d::barrier", 700, 10)],
    1: [("c10d::broadcast_", 30, 10), ("c10d::allreduce_", 160, 10), ("c10d::allreduce_", 300, 150), ("c10d::recv_", 605, 35)],
    2: [("c10d::broadcast_", 10, 2), ("record_param_comms", 118, 54), ("c10d::allreduce_", 120, 50),
        ("c10d::allreduce_", 410, 40)],
}  # fmt: skip


def cpu_rank(rank: int) -> dict:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}]
    events += [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}
               for name, ts, dur in CALLS[rank]]  # fmt: skip
    return {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": BASE,
            "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 3}}


def convert(tmp_path: Path, docs: dict[str, dict]):
    folder = tmp_path / "traces"
    folder.mkdir()
    for name, doc in docs.items():
        (folder / name).write_text(json.dumps(doc))
    convert_ranks(folder, tmp_path / "run.arrow", jobs=1)
    return read_trace(tmp_path / "run.arrow")


US = 1000  # ns


def test_collectives_matched_by_name_and_order(tmp_path: Path) -> None:
    run = convert(tmp_path, {f"rank{r}.json": cpu_rank(r) for r in range(3)})
    calls = collective_calls(run)
    assert calls[["rank", "name", "start_ns", "p2p"]].values.tolist() == [
        [0, "c10d::broadcast_", 10 * US, False], [0, "c10d::allreduce_", 100 * US, False],
        [0, "c10d::allreduce_", 400 * US, False], [0, "c10d::send", 600 * US, True], [0, "c10d::barrier", 700 * US, False],
        [1, "c10d::broadcast_", 30 * US, False], [1, "c10d::allreduce_", 160 * US, False],
        [1, "c10d::allreduce_", 300 * US, False], [1, "c10d::recv_", 605 * US, True],
        [2, "c10d::broadcast_", 10 * US, False], [2, "c10d::allreduce_", 118 * US, False],
        [2, "c10d::allreduce_", 410 * US, False]]  # fmt: skip
    matched = match_collectives(calls)
    table = matched.table
    assert table[["name", "occurrence", "step", "ranks", "first_rank", "last_rank", "skew_ns", "wait_ns", "clock"]].values.tolist() == [
        ["c10d::broadcast_", 1, 1, 3, 0, 1, 20 * US, 40 * US, "host"],
        ["c10d::allreduce_", 1, 1, 3, 0, 1, 60 * US, 102 * US, "host"],
        ["c10d::allreduce_", 2, 1, 3, 1, 2, 110 * US, 120 * US, "host"]]  # fmt: skip
    arrivals = matched.arrivals
    assert arrivals[["collective", "rank", "arrival_ns", "skew_ns", "wait_ns"]].values.tolist() == [
        [0, 0, 10 * US, 0, 20 * US], [0, 1, 30 * US, 20 * US, 0], [0, 2, 10 * US, 0, 20 * US],
        [1, 0, 100 * US, 0, 60 * US], [1, 1, 160 * US, 60 * US, 0], [1, 2, 118 * US, 18 * US, 42 * US],
        [2, 0, 400 * US, 100 * US, 10 * US], [2, 1, 300 * US, 0, 110 * US], [2, 2, 410 * US, 110 * US, 0]]  # fmt: skip
    per_rank = matched.per_rank
    assert per_rank[["rank", "collectives", "arrived_last", "arrived_first", "wait_ns", "point_to_point"]].values.tolist() == [
        [0, 3, 0, 2, 90 * US, 1], [1, 3, 2, 1, 110 * US, 1], [2, 3, 1, 0, 62 * US, 0]]
    assert per_rank["mean_skew_ns"].tolist() == pytest.approx([100 * US / 3, 80 * US / 3, 128 * US / 3])
    assert matched.problems == ["c10d::barrier: 1 call on rank 0, 0 on rank 1, 0 on rank 2: matched in order among the "
                                "ranks that made them"]


def test_report_lists_the_largest_skew_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    convert(tmp_path, {f"rank{r}.json": cpu_rank(r) for r in range(3)})
    data = ranks_report_data(read_trace(tmp_path / "run.arrow"))
    assert [(c["name"], c["occurrence"], c["skew_ns"], c["last_rank"]) for c in data["collectives"]] == [
        ("c10d::allreduce_", 2, 110 * US, 2), ("c10d::allreduce_", 1, 60 * US, 1), ("c10d::broadcast_", 1, 20 * US, 1)]
    assert data["point_to_point"] == 2
    assert main(["report", "--ranks", str(tmp_path / "run.arrow")]) == 0
    out = capsys.readouterr().out
    assert "collectives matched across ranks by name and order" in out
    assert "c10d::allreduce_                2      1     3       0.11     2     1  r0 +0.10 r1 +0.00 r2 +0.11" in out
    assert "point-to-point transfers (send/recv): 2" in out
    assert main(["report", "--ranks", "--json", str(tmp_path / "run.arrow")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [c["skew_ns"] for c in got["collectives"]] == [110 * US, 60 * US, 20 * US]
    assert len(got["collective_arrivals"]) == 9


def test_arrivals_on_the_device_when_every_rank_launched_a_kernel(tmp_path: Path) -> None:
    """test_ranks.kineto's ranks: nccl:all_reduce on the host at t+12 µs launches its NCCL kernel at t+30; rank 1's
    kernels are moved to t+45 (its GPU behind). Host arrivals would be equal; on the device rank 1 arrives 15 µs after
    ranks 0 and 2 in both steps."""
    late = copy.deepcopy(kineto(1))
    for e in late["traceEvents"]:
        if e["name"].startswith("ncclDevKernel"):
            e["ts"] += 15
    run = convert(tmp_path, {"rank0.json": kineto(0), "rank1.json": late, "rank2.json": kineto(2)})
    table = match_collectives(collective_calls(run)).table
    assert table[["name", "occurrence", "step", "first_rank", "last_rank", "skew_ns", "wait_ns", "clock"]].values.tolist() == [
        ["nccl:all_reduce", 1, 0, 0, 1, 15 * US, 30 * US, "device"],
        ["nccl:all_reduce", 2, 1, 0, 1, 15 * US, 30 * US, "device"]]  # fmt: skip


def test_tensor_operators_named_like_collectives_are_not_communication() -> None:
    assert not any(map(is_communication, ["aten::gather", "aten::scatter", "GatherBackward0"]))
    assert all(map(is_communication, ["c10d::gather_", "c10d::scatter_", "c10d::reduce_", "gloo:gather", "nccl:reduce"]))
    assert all(map(is_point_to_point, ["c10d::send", "c10d::recv_", "gloo:send", "nccl:recv", "c10d::recv_any_source_"]))
    assert not any(map(is_point_to_point, ["c10d::allreduce_", "ncclKernel_SendRecv_RING", "c10d::alltoall_base_"]))


def test_the_recorded_ddp_sample_names_the_slowed_rank_last() -> None:
    """sample_traces/ddp_gloo_3ranks.arrow: rank 1 sleeps 150 ms before each forward, so it reaches every collective
    last: two buffer broadcasts in step 1 and one gradient all-reduce a step; the all-reduces of steps 2 and 3 wait
    on it for about the sleep (the broadcasts of step 1 already waited for it there, so its first all-reduce does not)."""
    run = read_trace(ROOT / "sample_traces" / "ddp_gloo_3ranks.arrow")
    table = match_collectives(collective_calls(run)).table.set_index(["name", "occurrence"])
    assert table["last_rank"].tolist() == [1, 1, 1, 1, 1]
    assert table.loc[("c10d::allreduce_", 2), "step"] == 2 and table.loc[("c10d::allreduce_", 3), "step"] == 3
    for k in (2, 3):
        assert 130e6 < table.loc[("c10d::allreduce_", k), "skew_ns"] < 160e6
    assert table.loc[("c10d::broadcast_", 1), "skew_ns"] > 130e6


# Holistic Trace Analysis' tests/data/trace_filter/sampled_rank-{0,1}.json.gz (tests/fixtures/README.md): two ranks
# of a 128-rank NCCL job, steps 551 and 552. Raw times (µs, both files on one epoch clock):
#   ProfilerStep#551  rank 0 1682725898079292  rank 1 1682725898079484   (rank 1 192 µs later)
#   ProfilerStep#552  rank 0 1682725898686653  rank 1 1682725898687438   (785 µs later)
# so the merge removes rank 1's skew, the median of 192 and 785: 488.5 µs. Each collective's NCCL kernel (the kernel
# whose correlation is the cudaLaunchKernel inside its c10d call), in each rank's order of calls:
HTA_KERNELS = {  # name, occurrence: (rank 0's kernel ts, rank 1's kernel ts)
    ("c10d::alltoall_base_", 1): (1682725898094377, 1682725898129911),
    ("c10d::alltoall_base_", 2): (1682725898125052, 1682725898234342),
    ("c10d::allreduce_", 1): (1682725898295662, 1682725898298964),
    ("c10d::allreduce_", 2): (1682725898348496, 1682725898512687),
    ("c10d::_allgather_base_", 1): (1682725898585321, 1682725898585405),
    ("c10d::alltoall_base_", 3): (1682725898741096, 1682725898701451),
    ("c10d::alltoall_base_", 4): (1682725898854684, 1682725899038545),
    ("c10d::allreduce_", 3): (1682725899131066, 1682725898899992),
    ("c10d::allreduce_", 4): (1682725899146327, 1682725899168655),
    ("c10d::_allgather_base_", 2): (1682725899185890, 1682725899187182),
}


def test_public_two_rank_nccl_traces(tmp_path: Path) -> None:
    convert_ranks(HTA, tmp_path / "run.arrow", jobs=1)
    run = read_trace(tmp_path / "run.arrow")
    assert [r["skew_ns"] for r in run.run_info.extra["ranks"]] == [0, 488_500]
    # the steps' lengths, their ProfilerStep spans' raw durations (µs)
    assert rank_steps(run)[["rank", "step", "step_ns"]].values.tolist() == [
        [0, 551, 607_312_000], [0, 552, 622_928_000], [1, 551, 607_904_000], [1, 552, 630_639_000]]
    table = match_collectives(collective_calls(run)).table
    assert set(table["clock"]) == {"device"} and set(table["ranks"]) == {2}
    got = {(n, o): (s, last) for n, o, s, last in table[["name", "occurrence", "skew_ns", "last_rank"]].values.tolist()}
    expected = {}
    for key, (r0, r1) in HTA_KERNELS.items():
        late_ns = (r1 - r0) * 1000 - 488_500  # rank 1's arrival less rank 0's, in the merged run
        expected[key] = (abs(late_ns), 1 if late_ns > 0 else 0)
    assert got == expected
    assert got[("c10d::allreduce_", 3)] == (231_562_500, 0)  # one worked out: (899992 - 1131066) µs - 488.5 µs

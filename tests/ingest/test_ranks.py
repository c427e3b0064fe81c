"""Multi-rank runs (issue 31): tiny per-rank Kineto files written here, every figure worked out by hand.

Each rank's step k of `step` µs starting at t = k·step holds (µs from the step's start):

    host   aten::mm          [1, 11)   launches gemm_kernel (correlation 2k+1)
    host   nccl:all_reduce   [12, 17)  launches the NCCL kernel (correlation 2k+2)
    stream 7   gemm_kernel                       [5, 5+gemm)
    stream 20  ncclDevKernel_AllReduce_Sum_f32   [30, 60)

With gemm = 40: compute 40 µs, communication 30, comm ∪ compute = [5, 60) = 55, so exposed communication
55 − 40 = 15 µs (the NCCL kernel's [45, 60)); idle = step − 55; busy = step − 15.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import read_trace
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.rank_report import (
    is_communication,
    rank_steps,
    ranks_report_data,
    slow_operators,
    stragglers,
)
from portscope.ingest.ranks import convert_ranks, is_rank_input, rank_files, rank_of_regions

BASE = 1_700_000_000_000_000_000  # baseTimeNanoseconds


def kineto(rank: int | None, *, step: float = 100.0, gemm: float = 40.0, steps: int = 2, world: int = 3,
           base: int = BASE) -> dict:
    events = []
    for k in range(steps):
        t = k * step
        a, b = 2 * k + 1, 2 * k + 2
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1, "ts": t, "dur": step},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 1, "dur": 10, "args": {"External id": a}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2, "dur": 2,
             "args": {"correlation": a}},
            {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": t + 5, "dur": gemm,
             "args": {"correlation": a, "device": 0, "stream": 7}},
            {"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": t + 12, "dur": 5,
             "args": {"External id": b}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 13, "dur": 2,
             "args": {"correlation": b}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32", "pid": 0, "tid": 20, "ts": t + 30,
             "dur": 30, "args": {"correlation": b, "device": 0, "stream": 20}},
        ]  # fmt: skip
    doc: dict = {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": base}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return doc


def write(folder: Path, name: str, doc: dict | list) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def run(tmp_path: Path, docs: dict[str, dict], jobs: int = 1):
    folder = tmp_path / "traces"
    for name, doc in docs.items():
        write(folder, name, doc)
    trace, _ = convert_ranks(folder, tmp_path / "run.arrow", jobs=jobs)
    return read_trace(tmp_path / "run.arrow"), trace


# -- rank detection ---------------------------------------------------------------------------------------------------


def test_distributed_info_wins_over_the_file_name(tmp_path: Path) -> None:
    # the files are named against their ranks: distributedInfo decides
    got, _ = run(tmp_path, {"rank_1.json": kineto(0, world=2), "rank_0.json": kineto(1, world=2)})
    ranks = got.run_info.extra["ranks"]
    assert [(r["rank"], r["file"], r["rank_from"]) for r in ranks] == [
        (0, "rank_1.json", "distributedInfo"), (1, "rank_0.json", "distributedInfo")]
    assert got.run_info.extra["world_size"] == 2


@pytest.mark.parametrize("names", [["trace_rank-2.json", "trace_rank-0.json", "trace_rank-1.json"],
                                   ["rank_2.json", "rank_0.json", "rank_1.json"],
                                   ["host_rank2.pt.trace.json", "host_rank0.pt.trace.json", "host_rank1.pt.trace.json"]])
def test_rank_from_the_file_name(tmp_path: Path, names: list[str]) -> None:
    got, _ = run(tmp_path, {n: kineto(None) for n in names})
    ranks = got.run_info.extra["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2]
    assert [r["file"] for r in ranks] == [names[1], names[2], names[0]]
    assert {r["rank_from"] for r in ranks} == {"file name"}
    assert "problems" not in got.run_info.extra


def test_rank_from_file_order_with_a_warning(tmp_path: Path) -> None:
    got, _ = run(tmp_path, {"b.json": kineto(None), "a.json": kineto(None)})
    ranks = got.run_info.extra["ranks"]
    assert [(r["rank"], r["file"], r["rank_from"]) for r in ranks] == [(0, "a.json", "file order"), (1, "b.json", "file order")]
    assert len(got.run_info.extra["problems"]) == 2 and "taken as rank 0" in got.run_info.extra["problems"][0]


def test_a_rank_twice_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError) as err:
        run(tmp_path, {"a.json": kineto(1), "b.json": kineto(1)})
    assert "rank 1 appears twice: a.json and b.json" in str(err.value)


def test_ranks_disagreeing_on_the_world_size(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="disagree on the world size"):
        run(tmp_path, {"a.json": kineto(0, world=2), "b.json": kineto(1, world=4)})


def test_inputs_read_as_ranks(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    write(folder, "rank0.json", kineto(0))
    write(folder, "rank1.json.gz", {})  # named like a trace: listed (its content is the reader's business)
    (folder / "notes.txt").write_text("x")
    assert is_rank_input(folder) and is_rank_input(str(folder / "rank*.json"))
    assert not is_rank_input(folder / "rank0.json")
    assert [p.name for p in rank_files(folder)] == ["rank0.json", "rank1.json.gz"]
    assert [p.name for p in rank_files(str(folder / "rank*.json"))] == ["rank0.json"]
    with pytest.raises(TraceFormatError, match="no trace files"):
        rank_files(str(folder / "none*.json"))


# -- merge -----------------------------------------------------------------------------------------------------------


def test_merge_nests_each_rank_and_keeps_ids_distinct(tmp_path: Path) -> None:
    # rank 1's file says it started 1 ms after rank 0 (baseTimeNanoseconds), but its steps started as rank 0's did
    # (both at 0 and 100 µs into their files): that 1 ms is clock skew, removed, and its rows line up with rank 0's
    got, _ = run(tmp_path, {"r0.json": kineto(0, world=2), "r1.json": kineto(1, world=2, base=BASE + 1_000_000)}, jobs=2)
    regions = got["regions"].to_pylist()
    # rank 0: region 0 "rank 0" > 1 "r0.json" > 2, 3 steps; rank 1: 4 "rank 1" > 5 "r1.json" > 6, 7
    assert [(r["region_id"], r["parent_id"], r["name"]) for r in regions] == [
        (0, None, "rank 0"), (1, 0, "r0.json"), (2, 1, "ProfilerStep#0"), (3, 1, "ProfilerStep#1"),
        (4, None, "rank 1"), (5, 4, "r1.json"), (6, 5, "ProfilerStep#0"), (7, 5, "ProfilerStep#1")]
    assert [(r["start_ns"], r["dur_ns"]) for r in regions if r["name"].startswith("rank ")] == [(0, 200_000), (0, 200_000)]
    assert rank_of_regions(got) == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}
    ops = got["ops"].to_pylist()
    assert [o["op_id"] for o in ops] == list(range(8))  # 4 operators a rank, ids running on
    assert [o["region_id"] for o in ops] == [2, 2, 3, 3, 6, 6, 7, 7]
    assert ops[4]["start_ns"] == 1_000  # rank 1's aten::mm of step 0: 1 µs into its run, its 1 ms of skew removed
    assert [(r["file_offset_ns"], r["skew_ns"], r["start_offset_ns"]) for r in got.run_info.extra["ranks"]] == [
        (0, 0, 0), (1_000_000, 1_000_000, 0)]
    slices = got["engine_slices"].to_pylist()
    assert {s["engine"] for s in slices} == {f"rank {r} · {e}" for r in (0, 1) for e in ("host", "stream 7", "stream 20")}
    device = [s for s in slices if s["engine"].endswith("stream 7") or s["engine"].endswith("stream 20")]
    assert len({s["correlation"] for s in device}) == 8  # correlations 1..4 of each rank, made distinct
    calls = got["runtime_calls"].to_pylist()
    by_corr = {c["correlation"]: c["op_id"] for c in calls}
    assert all(by_corr[s["correlation"]] == s["op_id"] for s in device)  # launches still join their kernels
    assert got.run_info.converted_from == "kineto" and len(got.run_info.extra["ranks"]) == 2


def stepped(rank: int, base_us: int, steps: dict[int, int], world: int = 4) -> dict:
    """A CPU rank whose first event is at 0 (so its file's rows count from ts 0) and whose ProfilerStep#k starts at
    `steps[k]` µs, each 50 µs long with an aten::mm [1, 11) µs into it."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]
    for k, t in steps.items():
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1, "ts": t, "dur": 50},
                   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 1, "dur": 10}]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 400, "dur": 1})
    return {"traceEvents": events, "baseTimeNanoseconds": BASE + base_us * 1000,
            "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world}}


def test_ranks_aligned_on_their_step_starts(tmp_path: Path) -> None:
    # Step starts (µs into each file) and file starts (µs after BASE):
    #   rank 0 (the reference: lowest rank with steps), file +0:    #1 10, #2 110, #3 210
    #   rank 1, file +5000 (its clock 5 ms ahead):                  #1 7,  #2 108, #3 215
    #           placed by file start 5007, 5108, 5215; less rank 0's: 4997, 4998, 5005: median 4998 µs of skew
    #           -> its rows move 5000 - 4998 = +2 µs
    #   rank 2, file +3000, no steps: keeps its file start          -> +3000 µs
    #   rank 3, file +0:                                           #2 130, #3 232, #4 330
    #           steps in common with rank 0: #2, #3; differences 20, 22: median 21 µs -> -21 µs
    # No rank may start before 0: every rank moves by +21 µs more: rank 0 +21, 1 +23, 2 +3021, 3 +0.
    got, _ = run(tmp_path, {"r0.json": stepped(0, 0, {1: 10, 2: 110, 3: 210}), "r1.json": stepped(1, 5000, {1: 7, 2: 108, 3: 215}),
                            "r2.json": stepped(2, 3000, {}), "r3.json": stepped(3, 0, {2: 130, 3: 232, 4: 330})})
    ranks = got.run_info.extra["ranks"]
    assert [(r["rank"], r["file_offset_ns"], r["skew_ns"], r["start_offset_ns"], r["aligned_on"], r["common_steps"])
            for r in ranks] == [(0, 0, 0, 21_000, "steps", 3), (1, 5_000_000, 4_998_000, 23_000, "steps", 3),
                                (2, 3_000_000, 0, 3_021_000, "file start", 0), (3, 0, 21_000, 0, "steps", 2)]  # fmt: skip
    assert got.run_info.extra["reference_rank"] == 0
    by_region = rank_of_regions(got)
    starts = {(by_region[r["region_id"]], r["name"]): r["start_ns"] for r in got["regions"].to_pylist()}
    assert {k: v for k, v in starts.items() if k[1].startswith("ProfilerStep")} == {
        (0, "ProfilerStep#1"): 31_000, (0, "ProfilerStep#2"): 131_000, (0, "ProfilerStep#3"): 231_000,
        (1, "ProfilerStep#1"): 30_000, (1, "ProfilerStep#2"): 131_000, (1, "ProfilerStep#3"): 238_000,
        (3, "ProfilerStep#2"): 130_000, (3, "ProfilerStep#3"): 232_000, (3, "ProfilerStep#4"): 330_000}  # fmt: skip
    assert [starts[(r, f"rank {r}")] for r in range(4)] == [21_000, 23_000, 3_021_000, 0]
    # the run starts where rank 0's clock read 21 µs before its file's start
    assert got.run_info.start_time == "2023-11-14T22:13:19.999979+00:00"
    slices = got["engine_slices"].to_pylist()
    assert min(s["start"] for s in slices if s["engine"].startswith("rank 2 · ")) == 3_021_000
    assert "problems" not in got.run_info.extra


def test_a_rank_sharing_no_step_keeps_its_file_start(tmp_path: Path) -> None:
    # rank 1 ran steps #5, #6 only; rank 0 ran #1, #2: nothing to line up, a warning; rank 1 placed 2 ms later
    got, _ = run(tmp_path, {"r0.json": stepped(0, 0, {1: 10, 2: 110}, world=2), "r1.json": stepped(1, 2000, {5: 10, 6: 110}, world=2)})
    ranks = got.run_info.extra["ranks"]
    assert [(r["skew_ns"], r["start_offset_ns"], r["aligned_on"]) for r in ranks] == [
        (0, 0, "steps"), (0, 2_000_000, "file start")]
    assert got.run_info.extra["problems"] == ["rank 1 shares no ProfilerStep with rank 0: placed by its file's start time"]


def test_convert_command_reads_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "t"
    for r in range(2):
        write(folder, f"rank{r}.json", kineto(r, world=2))
    assert main(["convert", str(folder), "-o", str(tmp_path / "run.arrow"), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 ranks (0: rank0.json, 1: rank1.json)" in out
    assert main(["report", "--ranks", str(tmp_path / "run.arrow")]) == 0
    assert "stragglers" in capsys.readouterr().out


# -- analyses --------------------------------------------------------------------------------------------------------


def test_exposed_communication_per_rank_and_step(tmp_path: Path) -> None:
    got, _ = run(tmp_path, {"r0.json": kineto(0, world=2), "r1.json": kineto(1, world=2, step=150.0)})
    steps = rank_steps(got)
    # see the module docstring: rank 0 steps of 100 µs, rank 1 of 150 µs; gemm 40 µs, NCCL 30 µs of which 15 exposed
    assert steps[["rank", "step", "step_ns", "compute_ns", "communication_ns", "exposed_communication_ns", "idle_ns",
                  "busy_ns"]].values.tolist() == [
        [0, 0, 100_000, 40_000, 30_000, 15_000, 45_000, 85_000],
        [0, 1, 100_000, 40_000, 30_000, 15_000, 45_000, 85_000],
        [1, 0, 150_000, 40_000, 30_000, 15_000, 95_000, 135_000],
        [1, 1, 150_000, 40_000, 30_000, 15_000, 95_000, 135_000]]  # fmt: skip


def test_host_only_rank_counts_gloo_ranges_as_communication(tmp_path: Path) -> None:
    # a CPU rank (gloo): aten::mm [0, 20) on the main thread, gloo:all_reduce [10, 50) on the backend's thread:
    # compute 20, communication 40, comm ∪ compute [0, 50) = 50, exposed 50 − 20 = 30, idle 100 − 50 = 50
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 20},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 9, "ts": 10, "dur": 40},
    ]
    doc = {"traceEvents": events, "baseTimeNanoseconds": BASE, "distributedInfo": {"rank": 0, "world_size": 1}}
    got, _ = run(tmp_path, {"r0.json": doc})
    row = rank_steps(got).iloc[0]
    assert (row["compute_ns"], row["communication_ns"], row["exposed_communication_ns"], row["idle_ns"], row["busy_ns"]) == (
        20_000, 40_000, 30_000, 50_000, 70_000)


def test_host_communication_wait_on_a_gpu_rank(tmp_path: Path) -> None:
    # rank 0 (µs; ProfilerStep#0 [0, 100), #1 [100, 200)):
    #   thread 1: nccl:all_reduce [12, 40) holding cudaLaunchKernel [13, 15) and cudaStreamSynchronize [20, 38);
    #             aten::add [54, 58) holding cudaLaunchKernel [55, 57) (no collective on this thread then)
    #   thread 2: c10d::allreduce_ [50, 60) > record_param_comms [51, 59) > cudaLaunchKernel [52, 53);
    #             c10d::allreduce_ [195, 215), across the end of step 1
    # step 0: held [12, 40) ∪ [50, 60) = 38, less the launches inside them on their own thread, [13, 15) and
    #         [52, 53): 3 -> 35 µs (the synchronisation waits: counted; thread 1's [55, 57) is not inside a collective
    #         of its thread); step 1: [195, 200) = 5 µs.
    # rank 1 (`kineto`): nccl:all_reduce [12, 17) holding cudaLaunchKernel [13, 15): 3 µs a step.
    def x(name: str, cat: str, tid: int, ts: float, dur: float, **args: object) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    def k(name: str, stream: int, ts: float, dur: float, corr: int) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                "args": {"correlation": corr, "device": 0, "stream": stream}}

    events = [
        x("ProfilerStep#0", "user_annotation", 1, 0, 100), x("ProfilerStep#1", "user_annotation", 1, 100, 100),
        x("aten::mm", "cpu_op", 1, 1, 10, **{"External id": 1}), x("cudaLaunchKernel", "cuda_runtime", 1, 2, 2, correlation=1),
        k("gemm_kernel", 7, 5, 40, 1),
        x("nccl:all_reduce", "cpu_op", 1, 12, 28, **{"External id": 2}),
        x("cudaLaunchKernel", "cuda_runtime", 1, 13, 2, correlation=2), k("ncclDevKernel_AllReduce_Sum_f32", 20, 30, 30, 2),
        x("cudaStreamSynchronize", "cuda_runtime", 1, 20, 18, correlation=3),
        x("c10d::allreduce_", "cpu_op", 2, 50, 10), x("record_param_comms", "cpu_op", 2, 51, 8, **{"External id": 4}),
        x("cudaLaunchKernel", "cuda_runtime", 2, 52, 1, correlation=4), k("ncclDevKernel_AllReduce_Sum_f32", 20, 70, 10, 4),
        x("aten::add", "cpu_op", 1, 54, 4, **{"External id": 5}), x("cudaLaunchKernel", "cuda_runtime", 1, 55, 2, correlation=5),
        k("add_kernel", 7, 60, 5, 5),
        x("aten::mm", "cpu_op", 1, 101, 10, **{"External id": 6}), x("cudaLaunchKernel", "cuda_runtime", 1, 102, 2, correlation=6),
        k("gemm_kernel", 7, 105, 40, 6),
        x("c10d::allreduce_", "cpu_op", 2, 195, 20),
    ]  # fmt: skip
    gpu = {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": BASE,
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2}}  # fmt: skip
    got, _ = run(tmp_path, {"r0.json": gpu, "r1.json": kineto(1, world=2)})
    steps = rank_steps(got)
    assert steps[["rank", "step", "host_comm_wait_ns"]].values.tolist() == [[0, 0, 35_000], [0, 1, 5_000],
                                                                          [1, 0, 3_000], [1, 1, 3_000]]
    data = ranks_report_data(got)
    assert [(r["rank"], r["host_comm_wait_ns"]) for r in data["ranks"]] == [(0, 40_000), (1, 6_000)]


def test_the_straggler_and_what_made_it_slow(tmp_path: Path) -> None:
    # ranks 0 and 2: steps of 100 µs as in the docstring, busy 85 µs. Rank 1: steps of 150 µs whose gemm takes
    # 90 µs ([5, 95) covers the NCCL kernel's [30, 60): nothing exposed): compute 90, idle 150 − 90 = 60, busy 150.
    # Straggler rank 1 in both steps: 150 − 85 = 65 µs over the median of the others, 65 / 85 = 76.47 %.
    got, _ = run(tmp_path, {"r0.json": kineto(0), "r1.json": kineto(1, step=150.0, gemm=90.0), "r2.json": kineto(2)})
    steps = rank_steps(got)
    slow = stragglers(steps)
    assert slow[["step", "rank", "busy_ns", "median_ns", "slowdown_ns", "ranks"]].values.tolist() == [
        [0, 1, 150_000, 85_000, 65_000, 3], [1, 1, 150_000, 85_000, 65_000, 3]]
    assert slow["slowdown_pct"].round(2).tolist() == [76.47, 76.47]
    # aten::mm's device time: 90 µs a step on rank 1, 40 on the others: 50 µs more a step, 100 over both
    ops = slow_operators(got, steps, 1)
    assert ops.values.tolist() == [["aten::mm", 180_000.0, 80_000.0, 100_000.0]]
    assert slow_operators(got, steps, 1, step=0)["excess_ns"].tolist() == [50_000.0]
    data = ranks_report_data(got)
    assert data["slowest_rank"] == 1 and [r["straggler_steps"] for r in data["ranks"]] == [0, 2, 0]


def test_communication_names() -> None:
    assert all(map(is_communication, ["ncclDevKernel_AllReduce_Sum_f32", "gloo:all_reduce", "c10d::allreduce_",
                                      "rccl_kernel", "hcclAllReduce"]))  # fmt: skip
    assert not any(map(is_communication, ["gemm_kernel", "aten::mm", "ProfilerStep#1"]))


def test_the_committed_sample() -> None:
    # sample_traces/ddp_gloo_3ranks.arrow (bench/ddp_ranks.py, rank 1 sleeping 150 ms a step): see its README line
    sample = read_trace(Path(__file__).resolve().parents[2] / "sample_traces" / "ddp_gloo_3ranks.arrow")
    assert [r["rank"] for r in sample.run_info.extra["ranks"]] == [0, 1, 2]
    slow = stragglers(rank_steps(sample))
    assert slow["rank"].tolist() == [1, 1, 1]
    assert ((slow["slowdown_ns"] > 135e6) & (slow["slowdown_ns"] < 165e6)).all()


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_rank_that_cannot_be_read_is_named(tmp_path: Path, jobs: int) -> None:
    folder = tmp_path / "t"
    write(folder, "rank0.json", kineto(0, world=2))
    (folder / "rank1.json").write_text('{"traceEvents": [{"ph": "X", "name": "x", "ts": "soon"')  # cut short
    write(folder, "rank2.json", [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1}])  # generic Chrome JSON
    with pytest.raises(TraceFormatError) as err:
        convert_ranks(folder, tmp_path / "run.arrow", jobs=jobs)
    text = str(err.value)
    assert str(folder) in text and "rank1.json: " in text and "rank2.json: read as chrome" in text
    assert not (tmp_path / "run.arrow").exists()


def test_one_rank_has_steps_and_no_straggler(tmp_path: Path) -> None:
    from portscope.ingest.readers import read_kineto

    trace = read_kineto(write(tmp_path, "one.json", kineto(0, world=1)))
    steps = rank_steps(trace)  # a plain (single-file) run: every region is rank 0's
    assert steps[["rank", "step", "exposed_communication_ns", "busy_ns"]].values.tolist() == [[0, 0, 15_000, 85_000],
                                                                                            [0, 1, 15_000, 85_000]]
    assert stragglers(steps).empty
    data = ranks_report_data(trace)
    assert data["world_size"] == 1 and data["slowest_rank"] is None


def test_missing_ranks_are_a_warning(tmp_path: Path) -> None:
    got, _ = run(tmp_path, {"r0.json": kineto(0, world=3), "r2.json": kineto(2, world=3)})
    assert [r["rank"] for r in got.run_info.extra["ranks"]] == [0, 2]
    assert got.run_info.extra["problems"] == ["world size 3, 2 rank files: ranks [1] missing"]

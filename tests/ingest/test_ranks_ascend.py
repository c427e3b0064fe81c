"""torch_npu per-rank folders read as one multi-rank run (ingest/ranks.py): a folder holding one
``{worker}_{timestamp}_ascend_pt`` folder per rank, each with ``profiler_info_N.json`` (``rank_id``, as torch_npu's
``MsProfilerInterface.dump_info`` writes it when torch.distributed is initialised; ``profiler_info.json`` without one
otherwise) and ``ASCEND_PROFILER_OUTPUT/trace_view.json``. No real one is available here: the folders are written
by hand after that structure, each trace view tiny (µs from the run's start, both ranks on one clock):

    Python process, thread 1:  ProfilerStep#k [T, T+1000)  aten::mm [T+10, T+40)  c10d::allreduce_ [T+50, T+60)
    Ascend Hardware, NPU 0:    MatMul (stream 2) [T+20, T+120), launched by aten::mm (torch_to_npu flow)
                               hcom_allReduce_ (stream 9) [T+70+late, T+200), launched by c10d::allreduce_
    with T = 0 and 1000 for steps 1 and 2.

Per rank and step: compute 100 µs (MatMul), communication 130 − late, their union [T+20, T+200) = 180 µs, so exposed
communication 180 − 100 = 80 µs and idle 1000 − 180 = 820. Rank 1's all-reduce kernels start `late` = 30 µs after
rank 0's: it arrives last at both all-reduces, 30 µs after rank 0, read on the device.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import read_trace
from portscope.ingest.collectives import collective_calls, match_collectives
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.rank_report import rank_steps
from portscope.ingest.ranks import ASCEND_OUTPUT, convert_ranks, is_rank_input, rank_files

BASE_US = 1704161511420000
PY, CANN, HW = 12345, 1234502, 2077
US = 1000  # ns


def ts(us: float) -> str:
    return f"{BASE_US + us:.3f}"  # torch_npu quotes its µs, with a ns fraction


def trace_view(late: float = 0.0) -> list[dict]:
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": PY, "tid": 0, "args": {"name": "Python"}},
        {"name": "process_name", "ph": "M", "pid": CANN, "tid": 0, "args": {"name": "CANN"}},
        {"name": "process_name", "ph": "M", "pid": HW, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"name": "process_labels", "ph": "M", "pid": HW, "tid": 0, "args": {"labels": "NPU 0"}},
        {"name": "thread_name", "ph": "M", "pid": HW, "tid": 2, "args": {"name": "Stream 2"}},
        {"name": "thread_name", "ph": "M", "pid": HW, "tid": 9, "args": {"name": "Stream 9"}},
    ]
    for k, t in ((1, 0.0), (2, 1000.0)):
        flow = int(BASE_US + t) * 10
        events += [
            {"ph": "X", "name": f"ProfilerStep#{k}", "cat": "cpu_op", "pid": PY, "tid": 1, "ts": ts(t), "dur": 1000.0},
            {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": PY, "tid": 1, "ts": ts(t + 10), "dur": 30.0},
            {"ph": "X", "name": "c10d::allreduce_", "cat": "cpu_op", "pid": PY, "tid": 1, "ts": ts(t + 50), "dur": 10.0},
            {"ph": "X", "name": "MatMul", "pid": HW, "tid": 2, "ts": ts(t + 20), "dur": 100.0,
             "args": {"Task Type": "AI_CORE", "Stream Id": 2}},
            {"ph": "X", "name": "hcom_allReduce__123_0_1", "pid": HW, "tid": 9, "ts": ts(t + 70 + late), "dur": 130.0 - late,
             "args": {"Task Type": "HCCL", "Stream Id": 9}},
            {"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": flow + 1, "pid": PY, "tid": 1, "ts": ts(t + 10)},
            {"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": flow + 1, "pid": HW, "tid": 2, "ts": ts(t + 20), "bp": "e"},
            {"ph": "s", "name": "torch_to_npu", "cat": "async_npu", "id": flow + 2, "pid": PY, "tid": 1, "ts": ts(t + 50)},
            {"ph": "f", "name": "torch_to_npu", "cat": "async_npu", "id": flow + 2, "pid": HW, "tid": 9, "ts": ts(t + 70 + late),
             "bp": "e"},
        ]  # fmt: skip
    return events


def rank_folder(root: Path, name: str, info: tuple[str, str] | None, late: float = 0.0) -> Path:
    """`root/name/` with `info` (file name, its text) and ASCEND_PROFILER_OUTPUT/trace_view.json."""
    folder = root / name
    (folder / ASCEND_OUTPUT).mkdir(parents=True)
    (folder / ASCEND_OUTPUT / "trace_view.json").write_text(json.dumps(trace_view(late)))
    (folder / ASCEND_OUTPUT / "kernel_details.csv").write_text("")  # what else torch_npu writes there: not read
    if info is not None:
        (folder / info[0]).write_text(info[1])
    return folder


def test_rank_from_profiler_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "prof"
    # name order puts rank 1's folder first: the rank is its profiler info's, not its place
    rank_folder(root, "node_1002_20250101_ascend_pt", ("profiler_info_1.json", json.dumps({"config": {}, "rank_id": 1})), late=30)
    rank_folder(root, "node_1001_20250102_ascend_pt", ("profiler_info_0.json", json.dumps({"config": {}, "rank_id": 0})))
    assert is_rank_input(root)
    assert [p.relative_to(root).as_posix() for p in rank_files(root)] == [
        f"node_1001_20250102_ascend_pt/{ASCEND_OUTPUT}/trace_view.json", f"node_1002_20250101_ascend_pt/{ASCEND_OUTPUT}/trace_view.json"]
    assert main(["convert", str(root), "-o", str(tmp_path / "run.arrow")]) == 0
    assert "2 ranks (0: node_1001_20250102_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json, 1: node_1002" in capsys.readouterr().out
    run = read_trace(tmp_path / "run.arrow")
    ranks = run.run_info.extra["ranks"]
    assert [(r["rank"], r["rank_from"], r["file"].split("/")[0], r["aligned_on"], r["skew_ns"]) for r in ranks] == [
        (0, "profiler_info", "node_1001_20250102_ascend_pt", "steps", 0),
        (1, "profiler_info", "node_1002_20250101_ascend_pt", "steps", 0)]
    steps = rank_steps(run)
    assert steps[["rank", "step", "step_ns", "compute_ns", "exposed_communication_ns", "idle_ns"]].values.tolist() == [
        [0, 1, 1000 * US, 100 * US, 80 * US, 820 * US], [0, 2, 1000 * US, 100 * US, 80 * US, 820 * US],
        [1, 1, 1000 * US, 100 * US, 80 * US, 820 * US], [1, 2, 1000 * US, 100 * US, 80 * US, 820 * US]]
    assert steps["communication_ns"].tolist() == [130 * US, 130 * US, 100 * US, 100 * US]
    table = match_collectives(collective_calls(run)).table
    assert table[["name", "occurrence", "step", "last_rank", "skew_ns", "clock"]].values.tolist() == [
        ["c10d::allreduce_", 1, 1, 1, 30 * US, "device"], ["c10d::allreduce_", 2, 2, 1, 30 * US, "device"]]


def test_rank_from_the_info_file_name_the_folder_name_or_the_order(tmp_path: Path) -> None:
    root = tmp_path / "prof"
    rank_folder(root, "host_ascend_pt", None)  # nothing says: its place in name order, 0
    rank_folder(root, "rank5_host_ascend_pt", ("profiler_info.json", json.dumps({"config": {}})))  # not distributed
    rank_folder(root, "w_ascend_pt", ("profiler_info_3.json", "{broken"))  # unreadable: the N of its name
    rank_folder(root, "z_ascend_pt", ("profiler_info_7.json", json.dumps({"rank_id": -1})))  # no usable rank_id
    rank_folder(root, "y_ascend_pt", ("profiler_info_9.json", json.dumps({"rank_id": "2"})))  # digits: rank 2
    convert_ranks(root, tmp_path / "run.arrow", jobs=1)
    run = read_trace(tmp_path / "run.arrow")
    assert [(r["rank"], r["rank_from"], r["file"].split("/")[0]) for r in run.run_info.extra["ranks"]] == [
        (0, "file order", "host_ascend_pt"), (2, "profiler_info", "y_ascend_pt"), (3, "profiler_info", "w_ascend_pt"),
        (5, "file name", "rank5_host_ascend_pt"), (7, "profiler_info", "z_ascend_pt")]
    assert run.run_info.extra["problems"] == [
        f"host_ascend_pt/{ASCEND_OUTPUT}/trace_view.json: no profiler_info rank_id and no rank in the folder name: "
        "taken as rank 0 (its place in name order)"]


def test_two_folders_of_one_rank_is_one_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "prof"
    rank_folder(root, "a_ascend_pt", ("profiler_info_0.json", json.dumps({"rank_id": 0})))
    rank_folder(root, "b_ascend_pt", ("profiler_info_0.json", json.dumps({"rank_id": 0})))
    with pytest.raises(TraceFormatError, match="rank 0 appears twice: a_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json and "
                                        "b_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"):
        convert_ranks(root, tmp_path / "run.arrow", jobs=1)


def test_a_folder_without_rank_folders_is_not_ranks(tmp_path: Path) -> None:
    (tmp_path / "empty_ascend_pt" / ASCEND_OUTPUT).mkdir(parents=True)  # no trace view in it
    assert not is_rank_input(tmp_path)

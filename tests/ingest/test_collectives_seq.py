"""Collectives matched by process group and sequence number (ingest/collectives.py, the comms table), worked by hand.

Two CPU ranks (same clock, one ProfilerStep#1 over [0, 1000) µs each: no skew removed, times as written). Every call
is a c10d::allreduce_ [t, t+20) around a record_param_comms [t+1, t+19) whose args carry PyTorch's Process Group
Name and Seq. Two process groups, "0" and "1"; the ranks make their calls in a different order (µs):

    rank 0   pg 0 seq 1 @100   pg 1 seq 1 @200   pg 0 seq 2 @300   pg 1 seq 2 @400
    rank 1   pg 1 seq 1 @150   pg 0 seq 1 @260   pg 1 seq 2 @330   pg 0 seq 2 @500

By (process group, seq):                             By name and order (what the old rule would say):
    pg 0 seq 1   100, 260   skew 160, last rank 1        #1 100, 150   skew  50
    pg 1 seq 1   200, 150   skew  50, last rank 0        #2 200, 260   skew  60
    pg 0 seq 2   300, 500   skew 200, last rank 1        #3 300, 330   skew  30
    pg 1 seq 2   400, 330   skew  70, last rank 0        #4 400, 500   skew 100

waits: rank 0 160 + 0 + 200 + 0 = 360, rank 1 0 + 50 + 0 + 70 = 120; mean skew: rank 0 (0+50+0+70)/4 = 30,
rank 1 (160+0+200+0)/4 = 90.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import read_trace
from portscope.ingest.collectives import MatchRule, collective_calls, match_collectives
from portscope.ingest.rank_report import ranks_report_data
from portscope.ingest.readers.kineto import read_kineto
from portscope.ingest.readers.kineto_stream import Collector

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_collectives import US, convert  # noqa: E402
from test_ranks import BASE  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CALLS = {0: [("0", 1, 100), ("1", 1, 200), ("0", 2, 300), ("1", 2, 400)],
         1: [("1", 1, 150), ("0", 1, 260), ("1", 2, 330), ("0", 2, 500)]}  # fmt: skip


def comm_args(rank: int, group: str, seq: int, external: int) -> dict:
    """record_param_comms' args as recent PyTorch writes them (torch's test_c10d profiler tests)."""
    return {"External id": external, "Record function id": 0, "Collective name": "allreduce", "dtype": "Float",
            "In msg nelems": 3, "Out msg nelems": 3, "Group size": 2, "Process Group Name": group,
            "Process Group Description": "default_pg" if group == "0" else "undefined", "Process Group Ranks": "[0, 1]",
            "Rank": rank, "Seq": seq}  # fmt: skip


def seq_rank(rank: int) -> dict:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}]
    for k, (group, seq, ts) in enumerate(CALLS[rank]):
        events += [{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": ts, "dur": 20,
                    "args": {"External id": 2 * k + 1}},
                   {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": ts + 1, "dur": 18,
                    "args": comm_args(rank, group, seq, 2 * k + 2)}]  # fmt: skip
    return {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": BASE,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}


def test_matched_by_process_group_and_sequence_number(tmp_path: Path) -> None:
    run = convert(tmp_path, {"rank0.json": seq_rank(0), "rank1.json": seq_rank(1)})
    calls = collective_calls(run)
    assert calls[["rank", "name", "start_ns", "process_group", "seq"]].values.tolist() == [
        [0, "c10d::allreduce_", 100 * US, "0", 1], [0, "c10d::allreduce_", 200 * US, "1", 1],
        [0, "c10d::allreduce_", 300 * US, "0", 2], [0, "c10d::allreduce_", 400 * US, "1", 2],
        [1, "c10d::allreduce_", 150 * US, "1", 1], [1, "c10d::allreduce_", 260 * US, "0", 1],
        [1, "c10d::allreduce_", 330 * US, "1", 2], [1, "c10d::allreduce_", 500 * US, "0", 2]]  # fmt: skip
    matched = match_collectives(calls)
    assert matched.rule is MatchRule.SEQUENCE
    assert matched.table[["process_group", "seq", "occurrence", "ranks", "first_rank", "last_rank", "skew_ns",
                          "wait_ns", "clock"]].values.tolist() == [
        ["0", 1, 1, 2, 0, 1, 160 * US, 160 * US, "host"], ["1", 1, 2, 2, 1, 0, 50 * US, 50 * US, "host"],
        ["0", 2, 3, 2, 0, 1, 200 * US, 200 * US, "host"], ["1", 2, 4, 2, 1, 0, 70 * US, 70 * US, "host"]]  # fmt: skip
    assert matched.arrivals[["collective", "rank", "arrival_ns", "skew_ns", "wait_ns"]].values.tolist() == [
        [0, 0, 100 * US, 0, 160 * US], [0, 1, 260 * US, 160 * US, 0], [1, 0, 200 * US, 50 * US, 0],
        [1, 1, 150 * US, 0, 50 * US], [2, 0, 300 * US, 0, 200 * US], [2, 1, 500 * US, 200 * US, 0],
        [3, 0, 400 * US, 70 * US, 0], [3, 1, 330 * US, 0, 70 * US]]  # fmt: skip
    per_rank = matched.per_rank
    assert per_rank[["rank", "collectives", "arrived_last", "arrived_first", "wait_ns"]].values.tolist() == [
        [0, 4, 2, 2, 360 * US], [1, 4, 2, 2, 120 * US]]
    assert per_rank["mean_skew_ns"].tolist() == pytest.approx([30 * US, 90 * US])
    assert matched.problems == []


def test_the_comms_table_of_the_merged_run(tmp_path: Path) -> None:
    """One row per record_param_comms, its op_id the merged run's (rank 1's after rank 0's 9 operators... its own)."""
    run = convert(tmp_path, {"rank0.json": seq_rank(0), "rank1.json": seq_rank(1)})
    comms = run["comms"].to_pylist()
    assert [(c["process_group"], c["seq"], c["collective"], c["group_size"]) for c in comms] == [
        ("0", 1, "allreduce", 2), ("1", 1, "allreduce", 2), ("0", 2, "allreduce", 2), ("1", 2, "allreduce", 2),
        ("1", 1, "allreduce", 2), ("0", 1, "allreduce", 2), ("1", 2, "allreduce", 2), ("0", 2, "allreduce", 2)]  # fmt: skip
    assert {c["process_group_description"] for c in comms} == {"default_pg", "undefined"}
    ops = run["ops"].to_pandas().set_index("op_id")
    # each row's operator: a record_param_comms starting 1 µs after its call (rank 0's first at 101 µs, rank 1's at 151)
    assert [(ops.loc[c["op_id"], "name"], ops.loc[c["op_id"], "start_ns"]) for c in comms] == [
        ("record_param_comms", (t + 1) * US) for t in (100, 200, 300, 400, 150, 260, 330, 500)]


def test_a_call_without_a_sequence_number_falls_back_to_name_and_order(tmp_path: Path) -> None:
    """Rank 1's last record_param_comms loses its Seq: every call is then matched by name and order (the right-hand
    column of the module docstring), as before the comms table."""
    late = seq_rank(1)
    del late["traceEvents"][-1]["args"]["Seq"]
    run = convert(tmp_path, {"rank0.json": seq_rank(0), "rank1.json": late})
    matched = match_collectives(collective_calls(run))
    assert matched.rule is MatchRule.ORDER
    assert matched.table[["occurrence", "first_rank", "last_rank", "skew_ns"]].values.tolist() == [
        [1, 0, 1, 50 * US], [2, 0, 1, 60 * US], [3, 0, 1, 30 * US], [4, 0, 1, 100 * US]]
    assert matched.table["process_group"].isna().all()


def test_a_sequence_number_one_rank_lacks_is_reported(tmp_path: Path) -> None:
    """Rank 1 never calls pg 1 seq 2 (its call at 330 removed): three collectives matched, one problem."""
    short = seq_rank(1)
    short["traceEvents"] = [e for e in short["traceEvents"] if not 330 <= e["ts"] < 350]
    run = convert(tmp_path, {"rank0.json": seq_rank(0), "rank1.json": short})
    matched = match_collectives(collective_calls(run))
    assert matched.rule is MatchRule.SEQUENCE
    assert matched.table[["process_group", "seq", "skew_ns"]].values.tolist() == [["0", 1, 160 * US], ["1", 1, 50 * US],
                                                                                  ["0", 2, 200 * US]]  # fmt: skip
    assert matched.problems == ["process group 1: 1 sequence number not called on all of its 2 ranks (2): matched "
                                "among the ranks that called them"]


def test_report_says_which_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    convert(tmp_path, {"rank0.json": seq_rank(0), "rank1.json": seq_rank(1)})
    data = ranks_report_data(read_trace(tmp_path / "run.arrow"))
    assert data["collective_rule"] == "process group and sequence number"
    assert main(["report", "--ranks", str(tmp_path / "run.arrow")]) == 0
    out = capsys.readouterr().out
    assert "collectives matched across ranks by process group and sequence number (every call's" in out
    assert "c10d::allreduce_                3      1     2       0.20     1     0  r0 +0.00 r1 +0.20" in out
    assert main(["report", "--ranks", "--json", str(tmp_path / "run.arrow")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["collective_rule"] == "process group and sequence number"
    assert [(c["process_group"], c["seq"], c["skew_ns"]) for c in got["collectives"]] == [
        ("0", 2, 200 * US), ("0", 1, 160 * US), ("1", 2, 70 * US), ("1", 1, 50 * US)]


def test_files_without_comms_keep_name_and_order() -> None:
    """A file written before the comms table (sample_traces/ddp_gloo_3ranks.arrow) reads it as empty."""
    run = read_trace(ROOT / "sample_traces" / "ddp_gloo_3ranks.arrow")
    assert run["comms"].num_rows == 0
    assert match_collectives(collective_calls(run)).rule is MatchRule.ORDER


def test_sequence_numbers_survive_the_signature_cache(tmp_path: Path) -> None:
    """Three calls whose args differ only in Seq (5, 6, 5 again): each keeps its own, on the typed path (one slice of
    msgspec events) and on the general one (dicts), and through read_kineto."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 10 * k, "dur": 5,
               "args": {**comm_args(0, "3", seq, 1), "Ev Idx": k}} for k, seq in enumerate((5, 6, 5))]  # fmt: skip
    events.insert(0, {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 1,
                      "args": {"External id": 9, "Ev Idx": 9}})
    general, typed = Collector(tmp_path / "a.json", {}), Collector(tmp_path / "a.json", {})
    general.add(copy.deepcopy(events))
    typed.add_typed(typed.decode(json.dumps(events).encode()))
    for collector in (general, typed):
        ops = collector.finish().ops
        assert ops.comm_rows == [1, 2, 3]
        assert [(c.process_group, c.seq, c.collective, c.group_size, c.description) for c in ops.comm_values] == [
            ("3", 5, "allreduce", 2, "undefined"), ("3", 6, "allreduce", 2, "undefined"),
            ("3", 5, "allreduce", 2, "undefined")]  # fmt: skip
    (tmp_path / "a.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    assert read_kineto(tmp_path / "a.json")["comms"].to_pydict() == {
        "op_id": [1, 2, 3], "process_group": ["3", "3", "3"], "process_group_description": ["undefined"] * 3,
        "seq": [5, 6, 5], "collective": ["allreduce"] * 3, "group_size": [2, 2, 2]}

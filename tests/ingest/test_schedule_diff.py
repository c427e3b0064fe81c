"""Two schedules compared (ingest/schedule_diff.py) on a hand-made baseline/changed pair.

The pair (app/dev_samples.py SCHEDULE_BASELINE, SCHEDULE_CHANGED), in ns (engine: slice start..end, what it waited on):

    A "baseline"   dma   load x 0..10, load w 10..20
                   matrix mm 10..40 (transfer)
                   vector add 40..60 (dependency)
    B "changed"    the DMA twice as fast, the add split into add + relu; B's slices start at 1000
                   dma   load x 1000..1005, load w 1005..1010
                   matrix mm 1005..1035 (transfer)
                   vector add 1035..1045 (dependency), relu 1045..1050

Worked out by hand: A spans 60, B 50. Busy: dma 20 -> 10, matrix 30 -> 30, vector 20 -> 15.
Idle: matrix waits 10 -> 5 on transfer, vector 40 -> 35 on dependency. Critical path A: add <- mm <- load x
(60 = 20 + 30 + 10); B: relu <- add <- mm <- load x (50 = 5 + 10 + 30 + 5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.app.dev_samples import SCHEDULE_BASELINE as BASELINE
from portscope.app.dev_samples import SCHEDULE_CHANGED as CHANGED
from portscope.app.dev_samples import schedule_trace
from portscope.ingest.convert import load_any
from portscope.ingest.errors import UsageError
from portscope.ingest.schedule_diff import (
    Change,
    aligned_slices,
    diff_record,
    diff_schedules,
    format_schedule_diff,
    verdict,
)
from portscope.ingest.schema import EngineKind, SliceKind, TimeUnit
from portscope.ingest.trace import Trace, write_trace


@pytest.fixture
def pair() -> Trace:
    return schedule_trace(("baseline", BASELINE), ("changed", CHANGED))


def test_busy_idle_and_critical_time_per_engine(pair: Trace) -> None:
    diff = diff_schedules(pair, 0, pair, 1)
    assert diff.headline() == {"schedule": (60, 50), "critical path": (60, 50)}
    table = diff.engines_table().to_pylist()
    assert [r["engine"] for r in table] == ["dma", "matrix", "vector"]  # engine-kind order: DMA, matrix, vector
    dma, matrix, vector = table
    assert (dma["busy_a"], dma["busy_b"], dma["delta"], dma["percent"]) == (20, 10, -10, -50.0)
    assert (matrix["busy_a"], matrix["busy_b"], matrix["delta"], matrix["percent"]) == (30, 30, 0, 0.0)
    assert (vector["busy_a"], vector["busy_b"], vector["delta"], vector["percent"]) == (20, 15, -5, -25.0)
    assert [(r["idle_a"], r["idle_b"]) for r in table] == [(0, 0), (10, 5), (40, 35)]
    assert [(r["critical_a"], r["critical_b"]) for r in table] == [(10, 5), (30, 30), (20, 15)]
    assert [(r["slices_a"], r["slices_b"]) for r in table] == [(2, 2), (1, 1), (1, 2)]


def test_what_is_on_the_critical_path(pair: Trace) -> None:
    rows = diff_schedules(pair, 0, pair, 1).critical_table().to_pylist()
    got = [(r["change"], r["engine"], r["name"], r["time_a"], r["time_b"], r["delta"], r["count_a"], r["count_b"]) for r in rows]
    assert got == [
        ("shorter", "vector", "add", 20, 10, -10, 1, 1),
        ("shorter", "dma", "load x", 10, 5, -5, 1, 1),  # ties on |Δ|: the longer part first
        ("added", "vector", "relu", 0, 5, 5, 0, 1),
        ("same", "matrix", "mm", 30, 30, 0, 1, 1),
    ]  # load w is on no critical path


def test_idle_by_cause(pair: Trace) -> None:
    rows = diff_schedules(pair, 0, pair, 1).idle_table().to_pylist()
    assert rows == [{"cause": "dependency", "idle_a": 40, "idle_b": 35, "delta": -5},
                    {"cause": "transfer", "idle_a": 10, "idle_b": 5, "delta": -5}]


def test_engine_on_one_side_and_idle_on_the_path() -> None:
    # B adds a host engine, drops the DMA, and the vector waits 5 ns after mm with nothing running: a gap on the path
    only_b = [("host", EngineKind.HOST, SliceKind.FALLBACK, "pow", 0, 4, None),
              ("matrix", EngineKind.MATRIX, SliceKind.COMPUTE, "mm", 4, 30, "fallback"),
              ("vector", EngineKind.VECTOR, SliceKind.COMPUTE, "add", 39, 20, "dependency")]
    trace = schedule_trace(("baseline", BASELINE), ("changed", only_b))
    diff = diff_schedules(trace, 0, trace, 1)
    table = {r["engine"]: r for r in diff.engines_table().to_pylist()}
    assert list(table) == ["host", "dma", "matrix", "vector"]
    assert (table["host"]["busy_a"], table["host"]["busy_b"], table["host"]["percent"]) == (0, 4, None)
    assert (table["dma"]["busy_a"], table["dma"]["busy_b"], table["dma"]["percent"]) == (20, 0, -100.0)
    parts = {(r["engine"], r["name"]): (r["change"], r["time_a"], r["time_b"]) for r in diff.critical_table().to_pylist()}
    assert parts[("idle", "")] == ("added", 0, 5)
    assert parts[("dma", "load x")] == ("removed", 10, 0)
    assert parts[("host", "pow")] == ("added", 0, 4)
    assert diff.headline()["critical path"] == (60, 59)


def test_text_json_and_verdict(pair: Trace) -> None:
    diff = diff_schedules(pair, 0, pair, 1)
    assert verdict(diff) == ("B: schedule 60 ns -> 50 ns (-10 ns, -16.7%); critical path 60 ns -> 50 ns (-10 ns, -16.7%); "
                             "on the critical path: dma -5 ns, vector -5 ns")
    text = format_schedule_diff(diff)
    assert "  dma              dma_h2d         20 ns      10 ns      -10 ns   -50.0%       0 ns       0 ns      10 ns       5 ns\n" in text
    assert "  matrix           matrix          30 ns      30 ns        0 ns    +0.0%" in text
    assert "shorter  vector           add" in text and "added    vector           relu" in text
    assert "mm " not in text.split("critical path: what changed")[1].split("idle")[0]  # unchanged parts not listed
    record = diff_record(diff)
    assert record["a"] == {"region": "baseline", "schedule": 60, "critical_path": 60}
    assert record["engines"][2]["busy_b"] == 15 and record["idle"][0]["cause"] == "dependency"


def test_aligned_slices_start_at_zero(pair: Trace) -> None:
    table = aligned_slices(pair, 1)
    assert table.column("start").to_pylist() == [0, 5, 5, 35, 45]
    assert aligned_slices(pair, 0).column("start").to_pylist() == [0, 10, 10, 40]


def test_two_traces_and_what_cannot_be_compared(pair: Trace) -> None:
    other = schedule_trace(("changed", CHANGED))
    assert diff_schedules(pair, 0, other, 0).headline()["schedule"] == (60, 50)
    cycles = schedule_trace(("changed", CHANGED), unit=TimeUnit.CYCLES)
    with pytest.raises(UsageError, match="A's schedule is in ns, B's in cycles"):
        diff_schedules(pair, 0, cycles, 0)
    empty = schedule_trace(("nothing", []))
    with pytest.raises(UsageError, match="B: region 0 has no engine slices"):
        diff_schedules(pair, 0, empty, 0)


def test_change_kinds_are_an_enum(pair: Trace) -> None:
    parts = diff_schedules(pair, 0, pair, 1).critical_path
    assert {p.change for p in parts} == {Change.SHORTER, Change.ADDED, Change.SAME}


def test_cli_diff_schedule(pair: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(write_trace(pair, tmp_path / "pair.arrow"))
    assert main(["diff", path, "--region-a", "baseline", "--region-b", "changed", "--schedule"]) == 0
    out = capsys.readouterr().out
    assert "schedules: B: schedule 60 ns -> 50 ns (-10 ns, -16.7%)" in out
    assert "  vector           vector          20 ns      15 ns       -5 ns   -25.0%      40 ns      35 ns      20 ns      15 ns" in out
    assert "added    vector           relu" in out and "--schedule compares them" not in out
    assert main(["diff", path, "--region-a", "baseline", "--region-b", "changed", "--schedule", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schedule"]["b"] == {"region": "changed", "schedule": 50, "critical_path": 50}
    assert [(r["engine"], r["busy_a"], r["busy_b"]) for r in data["schedule"]["engines"]] == [
        ("dma", 20, 10), ("matrix", 30, 30), ("vector", 20, 15)]
    # without the flag: a hint, no tables
    assert main(["diff", path, "--region-a", "baseline", "--region-b", "changed"]) == 0
    out = capsys.readouterr().out
    assert "--schedule compares them" in out and "busy A" not in out


def test_cli_diff_schedule_refuses_ns_against_cycles(pair: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = str(write_trace(pair, tmp_path / "a.arrow"))
    b = str(write_trace(schedule_trace(("changed", CHANGED), unit=TimeUnit.CYCLES), tmp_path / "b.arrow"))
    assert main(["diff", a, b, "--region-a", "baseline", "--schedule"]) == 2
    assert "A's schedule is in ns, B's in cycles" in capsys.readouterr().err


VENDOR = Path(__file__).resolve().parents[1] / "vendor" / "fixtures"


def test_a_furiosa_baseline_and_one_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # furiosa_schedule_changed.json loads w_q on a second DMA queue (DmaEngine1, cycles 0..50) in parallel with x, so
    # the contraction starts at 100, not 150, and everything after it 50 cycles earlier: makespan 600 -> 550.
    # Critical path A: store <- sync <- softmax <- (gap 20) <- contraction <- load w_q <- load x; B: load w_q is off it.
    a, b = (load_any(VENDOR / name) for name in ("furiosa_schedule.json", "furiosa_schedule_changed.json"))
    diff = diff_schedules(a, 0, b, 0)
    assert diff.unit == "cycles" and diff.headline() == {"schedule": (600, 550), "critical path": (600, 550)}
    table = {r["engine"]: r for r in diff.engines_table().to_pylist()}
    assert list(table) == ["DmaEngine", "DmaEngine1", "MainContext", "VectorEngine", "SubContext"]
    assert (table["DmaEngine"]["busy_a"], table["DmaEngine"]["busy_b"], table["DmaEngine"]["critical_b"]) == (245, 195, 195)
    assert (table["DmaEngine1"]["busy_b"], table["DmaEngine1"]["percent"], table["DmaEngine1"]["critical_b"]) == (50, None, 0)
    assert (table["MainContext"]["idle_a"], table["MainContext"]["idle_b"]) == (150, 100)  # waiting for its loads
    changed = [(p.change, p.engine, p.name, p.time_a, p.time_b) for p in diff.critical_path if p.change is not Change.SAME]
    assert changed == [(Change.REMOVED, "DmaEngine", "load w_q: Dram -> Sram", 50, 0)]
    assert {(p.engine, p.time_a) for p in diff.critical_path if p.engine == "idle"} == {("idle", 20)}
    assert [(c.cause, c.idle_a, c.idle_b) for c in diff.idle] == [("dependency", 1275, 1175), ("transfer", 150, 100)]
    # the CLI on the converted pair, in cycles
    paths = [str(write_trace(t, tmp_path / f"{k}.arrow")) for k, t in (("a", a), ("b", b))]
    assert main(["diff", *paths, "--schedule"]) == 0
    assert "schedule 600 cycles -> 550 cycles (-50 cycles, -8.3%)" in capsys.readouterr().out


def test_the_one_engine_each_side_lacks_is_paired_by_kind() -> None:
    # a measured run names host threads by thread id: thread 11 in A, thread 22 in B -- the only host lane on each side
    a = [("thread 11", EngineKind.HOST, SliceKind.COMPUTE, "aten::zeros", 0, 40, None),
         ("stream 7", EngineKind.STREAM, SliceKind.COMPUTE, "kernel", 40, 100, "dispatch")]
    b = [("thread 22", EngineKind.HOST, SliceKind.COMPUTE, "aten::zeros", 0, 30, None),
         ("stream 7", EngineKind.STREAM, SliceKind.COMPUTE, "kernel", 30, 100, "dispatch")]
    trace = schedule_trace(("a", a), ("b", b))
    diff = diff_schedules(trace, 0, trace, 1)
    assert [(r["engine"], r["engine_b"], r["busy_a"], r["busy_b"], r["critical_b"]) for r in diff.engines_table().to_pylist()] == [
        ("thread 11", "thread 22", 40, 30, 30), ("stream 7", None, 100, 100, 100)]
    assert [(p.change, p.engine, p.name, p.time_a, p.time_b) for p in diff.critical_path][0] == (
        Change.SHORTER, "thread 11", "aten::zeros", 40, 30)
    assert "  thread 11 is thread 22 in B" in format_schedule_diff(diff)
    # two host threads in B that A lacks: which one is A's is a guess, so none is paired
    b2 = [*b, ("thread 33", EngineKind.HOST, SliceKind.COMPUTE, "aten::empty", 0, 5, None)]
    trace = schedule_trace(("a", a), ("b", b2))
    names = [(r["engine"], r["engine_b"]) for r in diff_schedules(trace, 0, trace, 1).engines_table().to_pylist()]
    assert names == [("thread 11", None), ("thread 22", None), ("thread 33", None), ("stream 7", None)]

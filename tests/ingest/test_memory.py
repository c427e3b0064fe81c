"""Memory per region from a trace's memory lanes (`report --memory`, `diff --memory`): a tiny Kineto trace written
here with [memory] instant events, every figure worked out by hand, and the real BERT pair's figures read from its
raw events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_pair import event as ev
from memory_trace import EVENTS, mem

from portscope.app.cli import main
from portscope.ingest import read_trace, write_trace
from portscope.ingest.memory import MemoryAt, allocator_lanes, memory_at, memory_diff, region_memory
from portscope.ingest.readers import read_kineto
from portscope.ingest.region_tree import region_ids
from portscope.ingest.schema import memory_device, memory_engine

SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "kineto"


@pytest.fixture
def trace(tmp_path: Path):
    source = tmp_path / "mem.json"
    source.write_text(json.dumps({"schemaVersion": 1, "traceEvents": EVENTS}))
    return read_trace(write_trace(read_kineto(source), tmp_path / "mem.arrow"))


def test_memory_lane_holds_totals_and_changes(trace) -> None:
    [lane] = allocator_lanes(trace)
    assert lane.device == "cuda:0"
    assert lane.total.tolist() == [1000, 1500, 3500, 3000, 7000]  # led by the total before the first event
    assert lane.delta.tolist() == [0, 500, 2000, -500, 4000]
    assert lane.reserved.tolist() == [2048, 4096, 4096, 8192]


def test_memory_at_a_time_by_hand(trace) -> None:
    # what a click on the timeline's memory lane shows (times in ns from the trace's start: EVENTS' µs x 1000)
    [lane] = allocator_lanes(trace)
    assert memory_at(lane, 5_000) is None  # before the first event
    # an event at exactly the time counts: aten::empty's 500 B (op 0) in ProfilerStep#1 (region 1), 2048 B reserved
    assert memory_at(lane, 7_000) == MemoryAt("cuda:0", 7_000, 1500, 2048, 7_000, 500, 0, 1)
    # inside aten::mm's allocation of 2000 B at 35 µs (op 1): the peak of the step
    assert memory_at(lane, 40_000) == MemoryAt("cuda:0", 40_000, 3500, 4096, 35_000, 2000, 1, 1)
    # the free of 500 B at 60 µs happens inside no operator
    assert memory_at(lane, 60_000) == MemoryAt("cuda:0", 60_000, 3000, 4096, 60_000, -500, -1, 1)
    # after the step: the second aten::empty (op 2) allocates 4000 B, 8192 B reserved, in the run's root region
    assert memory_at(lane, 10**9) == MemoryAt("cuda:0", 10**9, 7000, 8192, 151_000, 4000, 2, 0)


def test_region_memory_by_hand(trace) -> None:
    step = region_memory(trace, region_ids(trace, "ProfilerStep#1")[0])
    assert step.devices.to_dict("records") == [{"device": "cuda:0", "peak_bytes": 3500, "live_at_exit_bytes": 3000,
                                                "allocations": 2, "allocated_bytes": 2500, "peak_reserved_bytes": 4096}]  # fmt: skip
    assert step.sites[["call_site", "allocations", "allocated_bytes"]].values.tolist() == [
        ["model.py:20 (forward)", 1, 2000], ["model.py:10 (forward)", 1, 500]]
    run = region_memory(trace, region_ids(trace, "mem.json")[0])
    assert run.devices.loc[0, ["peak_bytes", "live_at_exit_bytes", "allocations", "allocated_bytes"]].tolist() == [7000, 7000, 3, 6500]
    # the regions table's peak is the same figure
    regions = trace["regions"].to_pylist()
    assert {r["name"]: r["peak_memory_bytes"] for r in regions} == {"mem.json": 7000, "ProfilerStep#1": 3500}


def test_report_and_diff_memory_cli(trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "mem.arrow")
    assert main(["report", path, "--memory", "--region", "ProfilerStep#1", "--json"]) == 0
    [region] = json.loads(capsys.readouterr().out)["regions"]
    assert region["devices"][0]["peak_bytes"] == 3500 and region["sites"][0]["call_site"] == "model.py:20 (forward)"
    assert main(["report", path, "--memory", "--region", "ProfilerStep#1"]) == 0
    out = capsys.readouterr().out
    assert "  cuda:0         3.5 KB        3.0 KB            2     2.5 KB         4.1 KB\n" in out
    assert main(["diff", path, path, "--region-a", "ProfilerStep#1", "--region-b", "mem.json", "--memory", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["memory"]
    assert data["devices"][0]["a_peak_bytes"] == 3500 and data["devices"][0]["b_peak_bytes"] == 7000
    assert data["sites"][0]["call_site"] == "(no call site)" and data["sites"][0]["delta_bytes"] == 4000  # the 4000 B after the step


def test_real_bert_memory(tmp_path: Path) -> None:
    """From the raw events of the H100 file (Device Type 1, inside ProfilerStep#6): 218 [memory] events, peak Total
    Allocated 101,305,344, 109 with Bytes > 0 summing to 47,460,864, the last Total Allocated 91,360,768, peak
    Total Reserved 121,634,816."""
    path = SHARED / "bert_small_h100.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    trace = read_trace(write_trace(read_kineto(path), tmp_path / "h100.arrow"))
    step = region_memory(trace, region_ids(trace, "ProfilerStep#6")[0]).devices.set_index("device")
    assert step.loc["cuda:0"].tolist() == [101_305_344, 91_360_768, 109, 47_460_864, 121_634_816]
    diff = memory_diff(trace, region_ids(trace, "ProfilerStep#6")[0], trace, region_ids(trace, "ProfilerStep#6")[0])
    assert diff.devices.loc[diff.devices["device"] == "cuda:0", "delta_peak_bytes"].tolist() == [0]


def test_a_memory_lane_is_told_by_its_prefix_only() -> None:
    assert memory_engine("cuda:0") == "memory cuda:0"
    assert memory_device("memory cuda:0") == "cuda:0"
    assert memory_device("memory rank 3 · cuda:0") == "rank 3 · cuda:0"  # a merged run's rank lane
    assert [memory_device(e) for e in ("stream 7", "HBM memory copy", "rank 3 · stream 7", None)] == [None] * 4


# Three steps on one device: step 1 [0, 100) allocates 3000 B at 10 µs; step 2 [200, 300) frees 2000 B at 250 µs,
# holding 3000 B from its start until then: its peak is 3000 (not the 1000 it ends with); step 3 [400, 500) has no
# memory event and holds 1000 B throughout: its peak is 1000 (not none).
CARRIED = [
    ev("user_annotation", "step 1", 0, 100), ev("cpu_op", "aten::empty", 10, 5), mem(10, 3000, 3000, 4096),
    ev("user_annotation", "step 2", 200, 100), ev("cpu_op", "aten::resize_", 250, 5), mem(250, -2000, 1000, 4096),
    ev("user_annotation", "step 3", 400, 100), ev("cpu_op", "aten::add", 450, 5),
]


def test_a_region_peak_counts_what_it_held_when_it_began(tmp_path: Path) -> None:
    source = tmp_path / "carried.json"
    source.write_text(json.dumps({"schemaVersion": 1, "traceEvents": CARRIED}))
    trace = read_trace(write_trace(read_kineto(source), tmp_path / "carried.arrow"))
    peaks = {n: region_memory(trace, region_ids(trace, n)[0]).devices["peak_bytes"].tolist() for n in ("step 1", "step 2", "step 3")}
    assert peaks == {"step 1": [3000], "step 2": [3000], "step 3": [1000]}
    regions = {r["name"]: r["peak_memory_bytes"] for r in trace["regions"].to_pylist()}
    assert regions == {"carried.json": 3000, "step 1": 3000, "step 2": 3000, "step 3": 1000}

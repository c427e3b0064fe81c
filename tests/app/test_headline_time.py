"""A predicted run's headline time is its predicted device time; the CPU's wall is context."""

from __future__ import annotations

from pathlib import Path

from portscope.app.data.runs import run_row
from portscope.app.data.tables import predicted_spans
from portscope.app.dev_samples import demo_trace
from portscope.app.time_axis import fmt_duration
from portscope.ingest.schema import TimeUnit


def test_predicted_spans_are_the_extent_of_each_regions_slices() -> None:
    # demo regions: 40 slices 1000 ns apart, 900 ns long -> 0 .. 39,900 and 200,000 .. 239,900
    assert predicted_spans(demo_trace("predicted")) == {0: 39_900, 1: 39_900}
    assert predicted_spans(demo_trace("eager")) == {}  # measured: its time is the wall


def test_run_rows_carry_the_headline_time() -> None:
    predicted = run_row(demo_trace("predicted"), "p", "p.arrow")
    assert (predicted.time, predicted.time_unit, predicted.predicted_time) == (79_800, "ns", True)
    measured = run_row(demo_trace("eager"), "e", "e.arrow")  # walls of the top-level regions: 100 + 60 + 20 us
    assert (measured.time, measured.predicted_time) == (180_000, False)


def test_covered_time_counts_overlaps_once() -> None:
    from portscope.app.data.runs import covered_ns

    assert covered_ns([(0, 4), (10, 10), (5, 10)]) == 4 + 15  # [0, 4) and [5, 20)
    assert covered_ns([(0, 100), (20, 30), (None, 50), (200, None)]) == 100  # inside another; no time: none
    assert covered_ns([]) == 0


def test_a_multi_rank_runs_time_is_its_wall_not_the_sum_of_its_ranks() -> None:
    from portscope.ingest.trace import read_trace

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "ddp_gloo_3ranks.arrow"
    # its regions "rank 0/1/2": starts 880,562 / 0 / 880,562 ns, lasting 529,732,053 / 517,474,090 / 526,460,847 ns:
    # rank 0 ends last, at 530,612,615 ns; rank 1 starts first, at 0
    assert run_row(read_trace(sample), "d", sample.name).time == 530_612_615


def test_fmt_duration() -> None:
    assert [fmt_duration(v) for v in (12, 73_000, 3.44e6, 337.2e6, 7.5e9)] == ["12 ns", "73 µs", "3.44 ms", "337 ms", "7.5 s"]
    assert fmt_duration(1_234_567, TimeUnit.CYCLES) == "1.23M cycles"
    assert fmt_duration(None) == ""


def test_a_nested_predicted_region_counts_in_its_parents_band_and_time() -> None:
    from portscope.app.data.tables import region_bands
    from portscope.ingest.builder import TraceBuilder
    from portscope.ingest.schema import Source
    from portscope.ingest.trace import RunInfo

    b = TraceBuilder(RunInfo(source=Source.PREDICTED, target="demo-npu"))
    outer = b.add_region("outer", start_ns=0, dur_ns=9_000_000)  # measured host times: not the predicted axis
    inner = b.add_region("inner", start_ns=5_000_000, dur_ns=1_000_000, parent_id=outer)
    later = b.add_region("later", start_ns=20_000_000, dur_ns=1_000_000)
    for region, start, dur in ((outer, 0, 400), (inner, 400, 600), (later, 1000, 50)):  # back to back, as build_trace lays them
        b.engine_slices.append(region_id=region, engine="vector", engine_kind="vector", kind="compute", name="x", start=start, dur=dur)
    trace = b.build()
    assert region_bands(trace) == [(0.0, 1000.0, "outer"), (1000.0, 1050.0, "later")]
    assert predicted_spans(trace) == {outer: 1000, inner: 600, later: 50}

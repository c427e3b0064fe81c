"""The viewer's papercuts (issue 34 item 5) as plain functions, on hand-written inputs: what a not-clean verdict
names, which counts a source cannot record, the model and torch a run shows, and the slices a compared schedule
takes (those the timeline draws over the region, nested regions' too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from portscope.app.data.runs import run_model, run_row, torch_text
from portscope.app.data.seen import seen_signals, seen_text, unrecorded_columns
from portscope.app.pages.compare_schedules import with_nested
from portscope.ingest import TraceBuilder, write_trace
from portscope.ingest.catalog import RegionFigures
from portscope.ingest.schedule_diff import diff_schedules
from portscope.ingest.schema import EngineKind, Phase, SignalKind, SliceKind, Source
from portscope.ingest.trace import RunInfo

# what the Kineto reader and the kernel_details reader say they cannot record (ingest/readers)
KINETO_MISSING = ["dispatch/recompile (not in profiler traces)", "host_bounce/* (Kineto records no tensor devices)",
                  "dispatch/cpu_fallback (Kineto records no tensor devices; operators that launched no GPU work are "
                  "placed on the host)", "memory (recorded without profile_memory=True)",
                  "events of categories this reader does not read: gpu_user_annotation (1)"]  # fmt: skip
KERNELS_MISSING = ["host operators, syncs, transfers and compiles (kernel_details lists device kernels only)",
                   "dispatch/cpu_fallback on the host (AI CPU kernels are counted as device-side fallbacks, reason ai-cpu)"]


def _figures(counts: dict[SignalKind, int], phase: Phase = Phase.NONE) -> RegionFigures:
    return RegionFigures(counts, {}, phase)


def test_a_not_clean_verdict_names_what_was_seen() -> None:
    cuda = seen_signals([_figures({SignalKind.TRANSFER_D2H: 60, SignalKind.SYNC: 67, SignalKind.TRANSFER_H2D: 150})])
    assert seen_text(cuda) == "60 d2h copies · 67 syncs"  # h2d is no reason: not named
    ascend = seen_signals([_figures({SignalKind.CPU_FALLBACK: 7})])
    assert seen_text(ascend, ai_cpu_fallbacks=7) == "7 AI-CPU fallbacks"
    assert seen_text(ascend, ai_cpu_fallbacks=2) == "7 fallbacks (2 on the AI CPU)"
    assert seen_text(seen_signals([_figures({SignalKind.CPU_FALLBACK: 1, SignalKind.TRANSFER_D2H: 1})])) == "1 fallback · 1 d2h copy"
    # two regions summed; the three bounce kinds read as one; a recompile counts in a warm region only
    two = seen_signals([_figures({SignalKind.BOUNCE_DTYPE: 3, SignalKind.RECOMPILE: 4}, Phase.COLD),
                        _figures({SignalKind.BOUNCE_STRIDED: 2, SignalKind.RECOMPILE: 5}, Phase.WARM)])
    assert seen_text(two) == "5 warm recompiles · 5 host bounces"
    assert seen_text(seen_signals([_figures({SignalKind.COMPILE_GRAPH: 1, SignalKind.TRANSFER_H2D: 2})])) == ""


@pytest.mark.parametrize(("missing", "columns"), [
    (KINETO_MISSING, {"fallbacks", "bounces", "compiles"}),
    (KINETO_MISSING[:2] + ["dispatch/cpu_fallback inferred from operators that launched no GPU work",
                           "transfer bytes (memcpy events carry no size)"], {"bounces", "compiles", "d2h_bytes"}),
    (["transfers, syncs and cpu_fallback (CPU-only trace: no device activity)"], {"fallbacks", "d2h_bytes"}),
    (KERNELS_MISSING, {"fallbacks", "compiles", "d2h_bytes"}),
    (["operators that ran on the device (the log lists fallbacks only)", "transfers and bytes", "host_bounce/*",
      "sync", "compiles"], {"bounces", "compiles", "d2h_bytes"}),  # a fallback log: fallbacks are what it records
    (["events of categories this reader does not read: compile_events (3)"], set()),
    ([], set()),
])  # fmt: skip
def test_columns_a_source_cannot_record(missing: list[str], columns: set[str]) -> None:
    found = unrecorded_columns(missing)
    assert set(found) == columns
    assert all(found[c] in missing for c in found)  # each says why in the source's own words


def _converted(metadata: dict[str, Any] | None, missing: list[str] = KINETO_MISSING) -> TraceBuilder:
    info = RunInfo(source=Source.CONVERTED, converted_from="kineto", devices=["cpu", "cuda:0"], missing_signals=missing,
                   extra={"metadata": metadata} if metadata is not None else {})
    return TraceBuilder(info)


def test_a_converted_run_is_named_by_its_metadata_else_its_file() -> None:
    harness = {"metadata": {"experiment": {"repo_id": "org/tiny-bert"},
                            "system": {"torch_env_info": {"torch_version": "2.6.0+cu124"}}}}
    info = _converted(harness).run_info
    assert run_model(info, "run.json.gz") == ("org/tiny-bert", False) and torch_text(info) == "2.6.0+cu124"
    bare = _converted(None).run_info
    assert run_model(bare, "bert_small_h100.arrow") == ("bert_small_h100", True) and torch_text(bare) is None
    recorded = RunInfo(source=Source.MEASURED, model={"class": "LlamaForCausalLM", "layers": 2}, torch_version="2.13.0")
    assert run_model(recorded, "x.arrow") == ("LlamaForCausalLM, layers=2", False) and torch_text(recorded) == "2.13.0"


def test_the_run_row_of_a_converted_run(make_app: Any, tmp_path: Path) -> None:
    b = _converted(None)
    rid = b.add_region("step", start_ns=0, dur_ns=1_000, device="cuda:0")
    for i in range(3):  # three copies of 4 KiB to the host, the host waiting twice
        b.signals.append(region_id=rid, kind=SignalKind.TRANSFER_D2H, count=1, bytes=4096, time_ns=100 * i)
        b.transfers.append(region_id=rid, direction="d2h", bytes=4096, start_ns=100 * i, dur_ns=10)
    b.signals.append(region_id=rid, kind=SignalKind.SYNC, count=2, bytes=0)
    trace = b.build()
    row = run_row(trace, "r", "x7.arrow")
    assert (row.model, row.model_from_file, row.status, row.seen) == ("x7", True, "not-clean", "3 d2h copies · 2 syncs")
    assert (row.fallbacks, row.bounces, row.compiles, row.d2h_bytes) == (0, 0, 0, 12_288)
    assert set(row.not_recorded) == {"fallbacks", "bounces", "compiles"}
    # an upload is stored as <run id>.arrow: the runs page names it after the file the browser sent
    app = make_app(trace_paths=())
    path = write_trace(trace, tmp_path / "upload.arrow")
    with app.server.test_request_context("/"):
        from portscope.app.context import store

        run_id = store().add_upload(path, "bert_on_h100.json.gz")
        assert store().run_row(run_id).model == run_id
        assert store().run_row(run_id, "bert_on_h100.json.gz").model == "bert_on_h100"


def nested_run(forward_ns: int = 30) -> Any:
    """A step (region 1, inside the file's root region 0) whose kernels sit in a nested annotation (region 2), as a
    converted trace nests them: stream 7 runs 10 + 30 + 20 = 60 ns (forward_ns = 30), 20 ns in region 1 itself."""
    b = TraceBuilder(RunInfo(source=Source.CONVERTED, converted_from="kineto"))
    root = b.add_region("run.json", start_ns=0, dur_ns=200)
    step = b.add_region("ProfilerStep#1", start_ns=0, dur_ns=150, parent_id=root)
    inner = b.add_region("## forward ##", start_ns=10, dur_ns=100, parent_id=step)
    for rid, start, dur in ((inner, 10, 10), (inner, 40, forward_ns), (step, 120, 20)):
        b.engine_slices.append(region_id=rid, engine="stream 7", engine_kind=EngineKind.STREAM, kind=SliceKind.COMPUTE,
                               name="gemm", start=start, dur=dur)
    b.engine_slices.append(region_id=root, engine="host", engine_kind=EngineKind.HOST, kind=SliceKind.COMPUTE,
                           name="setup", start=0, dur=5)
    return b.build()


def test_a_compared_schedule_takes_the_slices_of_its_nested_regions() -> None:
    trace = nested_run()
    busy = {e.engine: e.busy_a for e in diff_schedules(with_nested(trace, 0), 0, with_nested(trace, 0), 0).engines}
    assert busy == {"host": 5, "stream 7": 60}  # what the timeline draws inside the run: every slice
    busy = {e.engine: e.busy_a for e in diff_schedules(with_nested(trace, 1), 1, with_nested(trace, 1), 1).engines}
    assert busy == {"stream 7": 60}  # the step: its own 20 ns and its annotation's 40 ns; not the root's host slice
    assert with_nested(trace, 2) is trace  # nothing nested: the run as it is
    own = {e.engine: e.busy_a for e in diff_schedules(trace, 1, trace, 1).engines}
    assert own == {"stream 7": 20}  # what the section showed before: the stream idle while its annotation ran
    # rows keep their order: row k of the view is row k of the run (a clicked slice's facts are read by row)
    assert with_nested(trace, 0)["engine_slices"].column("start").to_pylist() == trace["engine_slices"].column("start").to_pylist()


def test_compared_memory_shows_a_dash_where_one_run_has_no_such_device() -> None:
    """A has npu:0 (a predicted run's memory lane), B no memory at all: B's cells say "-", nothing raises."""
    import pandas as pd

    from portscope.app.pages.memory_sections import compare_view
    from portscope.ingest.memory import MemoryDiff

    nan = float("nan")
    devices = pd.DataFrame({"device": ["npu:0"], "a_peak_bytes": [2048], "a_live_at_exit_bytes": [1024],
                            "a_allocations": [3], "a_allocated_bytes": [4096], "b_peak_bytes": [nan],
                            "b_live_at_exit_bytes": [nan], "b_allocations": [nan], "b_allocated_bytes": [nan],
                            "delta_peak_bytes": [nan]})
    sites = pd.DataFrame({"device": [], "call_site": [], "a_allocations": [], "a_allocated_bytes": [],
                          "b_allocations": [], "b_allocated_bytes": [], "delta_bytes": []})
    view = compare_view(MemoryDiff(devices=devices, sites=sites))
    text = str(view[1])
    assert "2.0 KB" in text and "1.0 KB" in text
    assert text.count("'-'") == 3  # B peak, B live at exit, delta


def test_timeline_of_a_run_whose_operators_have_no_module(tmp_path: Path) -> None:
    """explain() around plain torch calls records no module: the derived lanes still build (they raised)."""
    from portscope.app.data.tables import timeline_slices
    from portscope.ingest import read_trace
    from portscope.ingest.schema import Placement

    b = TraceBuilder(RunInfo(source=Source.MEASURED))
    b.add_region("plain", start_ns=0, dur_ns=100)
    for op_id, name in enumerate(["aten::ones", "aten::mm"]):
        b.ops.append(op_id=op_id, region_id=0, name=name, start_ns=10 + 40 * op_id, dur_ns=30,
                     placement=Placement.HOST, bytes_in=0, bytes_out=0, thread=0)
    slices, derived = timeline_slices(read_trace(write_trace(b.build(), tmp_path / "plain.arrow")))
    assert derived
    assert slices.column("name").to_pylist() == ["aten::ones", "aten::mm"]
    assert slices.column("module").to_pylist() == [None, None]

"""Vendor formats (issue 9): explain dumps, NPU Kineto lanes, Furiosa schedules and runtime traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest import read_trace
from portscope.ingest.convert import load_any
from portscope.ingest.diff import diff_operators, diff_signals
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.report import trace_report_data
from portscope.ingest.schedule_summary import schedule_summaries

FIXTURES = Path(__file__).parent / "fixtures"
ALL = ["rbln_explain_residency.json", "rbln_explain_runtime.json", "npu_kineto_eager.json", "npu_kineto_compiled.json",
       "furiosa_schedule.json", "furiosa_runtime_trace.json"]  # fmt: skip


FORMATS = {  # written from the files: what each one is
    "rbln_explain_residency.json": "rbln-explain", "rbln_explain_runtime.json": "rbln-explain",
    "npu_kineto_eager.json": "kineto", "npu_kineto_compiled.json": "kineto",
    "furiosa_schedule.json": "furiosa-schedule", "furiosa_runtime_trace.json": "furiosa-trace",
}  # fmt: skip


@pytest.mark.parametrize("name", ALL)
def test_every_variant_converts(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.arrow"
    assert main(["convert", str(FIXTURES / name), "-o", str(out)]) == 0
    trace = read_trace(out)
    assert trace.run_info.converted_from == FORMATS[name]
    assert main(["report", str(out)]) == 0
    assert "Region" in capsys.readouterr().out


# Figures read off the dumps by hand, one region per dump: host bounces are the dump's hidden_host_bounce
# total_count / total_bytes (its *_batch_to_per_entry sites are bookkeeping, not bounces: 10+2+1 = 13 and
# 40960+1024+64 = 42048 B; 28+2+1 = 31 and 114688+56+128 = 114872 B); cpu_fallback is dispatch.cpu_fallback;
# recompiles are dispatch.recompile_miss (recompile_by_op lists 11 of the residency dump's 12); d2h is the
# v2h primitive's calls with its bytes, or, where the runtime table has none (residency dumps), the
# real_host_sync_d2h bytes.
DUMPS = {
    "rbln_explain_residency.json": [
        {"bounce": (13, 42048), "dispatch/cpu_fallback": (30, 0), "dispatch/recompile": (12, 0),
         "transfer/d2h": (6, 12288), "wall_ns": 48_211_000, "peak": 3_145_728,
         "fallback_ops": {"aten::pow": 5, "aten::mean": 5, "aten::rsqrt": 5, "aten::neg": 4, "aten::cat": 11}},
    ],
    "rbln_explain_runtime.json": [
        {"bounce": (31, 114872), "dispatch/cpu_fallback": (40, 0), "dispatch/recompile": (25, 0),
         "transfer/d2h": (5, 10240), "wall_ns": 91_000_000, "peak": 6_291_456, "fallback_ops": {"aten::neg": 40}},
        {"bounce": (0, 0), "dispatch/cpu_fallback": (0, 0), "dispatch/recompile": (2, 0),
         "transfer/d2h": (0, 0), "wall_ns": 12_000_000, "peak": 6_291_456, "fallback_ops": {}},
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(DUMPS))
def test_report_of_a_dump_shows_the_dumps_counts_and_bytes(name: str, tmp_path: Path) -> None:
    out = tmp_path / "d.arrow"
    assert main(["convert", str(FIXTURES / name), "-o", str(out)]) == 0
    report = trace_report_data(read_trace(out))
    assert len(report["regions"]) == len(DUMPS[name])
    for want, region in zip(DUMPS[name], report["regions"], strict=True):
        got = {s["signal"]: (s["count"], s["bytes"]) for s in region["signals"]}
        bounce = [v for k, v in got.items() if k.startswith("host_bounce/")]
        assert (sum(c for c, _ in bounce), sum(b for _, b in bounce)) == want["bounce"]
        for kind in ("dispatch/cpu_fallback", "dispatch/recompile", "transfer/d2h"):
            assert got.get(kind, (0, 0)) == want[kind], kind
        assert region["transfers"]["d2h"] == {"count": want["transfer/d2h"][0], "bytes": want["transfer/d2h"][1]}
        assert (region["wall_ns"], region["peak_memory_bytes"]) == (want["wall_ns"], want["peak"])
        ops = {o["operator"]: o["count"] for o in region["operators"] if o["signal"] == "dispatch/cpu_fallback"}
        assert ops == want["fallback_ops"]


def test_dump_variants_sites_notes_and_unknown_keys() -> None:
    old = load_any(FIXTURES / "rbln_explain_residency.json")
    new = load_any(FIXTURES / "rbln_explain_runtime.json")
    assert old.run_info.extra["explain_variants"] == {"rbln_explain_residency": "residency"}
    assert set(new.run_info.extra["explain_variants"].values()) == {"runtime"}
    assert old.run_info.extra["unknown_keys"]["rbln_explain_residency"] == {"future_counter": {"whatever": 1}}
    assert any("future_counter" in p for p in old.run_info.extra["problems"])
    assert old.run_info.extra["excluded_sites"]["rbln_explain_residency"] == {"v2v_batch_to_per_entry": {"count": 4, "bytes": 8192}}
    signals = old["signals"].to_pandas()
    neg = signals[signals["op_name"] == "aten::neg"].iloc[0]
    assert neg["call_site"] == "/work/model.py:85 (rotate_half) <- /work/model.py:97 (apply_rotary_pos_emb)"  # line <- caller
    assert neg["note"] == "compute RMSNorm in float16"
    stack = old["stacks"].to_pylist()[int(neg["stack_id"])]["frame_ids"]
    assert [old["frames"].to_pylist()[f]["function"] for f in stack] == ["rotate_half", "apply_rotary_pos_emb", "_call_impl"]
    assert set(signals[signals["kind"] == "host_bounce/dtype_cast"]["reason"]) == {"copy_d2d_host_bounce"}
    assert any("transfer bytes" in m for m in old.run_info.missing_signals)
    cold = new["signals"].to_pandas()
    reasons = cold[(cold["op_name"] == "aten::neg")].set_index("reason")["count"].to_dict()
    assert reasons == {"dtype-not-fp16": 32, "all-scalar inputs": 8}
    phases = new["regions"].column("phase").to_pylist()
    assert phases == ["cold", "warm"]


@pytest.mark.parametrize(("name", "words"), [
    ("rbln_explain_partial.json", ["by_site", "'four'", "by_primitive"]),
    ("furiosa_schedule_partial.json", ["tensors", "instructions[0]", "lifetime"]),
])  # fmt: skip
def test_partial_files_give_one_clear_error(name: str, words: list[str]) -> None:
    with pytest.raises(TraceFormatError) as err:
        load_any(FIXTURES / name)
    text = str(err.value)
    assert name in text and all(w in text for w in words)


def test_bad_inputs_name_the_file(tmp_path: Path) -> None:
    not_a_dump = tmp_path / "x.json"
    not_a_dump.write_text('[{"hidden_host_bounce": {"by_site": {}}}, {"foo": 1}]')
    with pytest.raises(TraceFormatError, match=r"x\.json: item 1 has none of the explain dump keys"):
        load_any(not_a_dump)
    other = tmp_path / "y.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(TraceFormatError) as err:
        load_any(other)
    assert "rbln-explain" in str(err.value) and "furiosa-schedule" in str(err.value) and "furiosa-trace" in str(err.value)
    no_npu = tmp_path / "z.json"
    no_npu.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "args": {"pe_index": 0}}],'
                      ' "x": "NPU 0"}')  # fmt: skip
    with pytest.raises(TraceFormatError, match="no spans on NPU rows"):
        load_any(no_npu, format="furiosa-trace")


def test_schedule_numbers_past_2_53_are_refused_by_name(tmp_path: Path) -> None:
    """Cycles or sizes no 64-bit column holds (a fuzzer's find: OverflowError from Arrow) are problems in the file."""
    doc = json.loads((FIXTURES / "furiosa_schedule.json").read_text())
    doc["instructions"][0]["lifetime"]["end"] = 2**63
    late = tmp_path / "late.json"
    late.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=r"late\.json: instructions\[0\] \(index 0\) lacks 'lifetime' .*<= 2\*\*53"):
        load_any(late)
    doc = json.loads((FIXTURES / "furiosa_schedule.json").read_text())
    for t in doc["tensors"]:
        t["size"] = 2**53  # each allowed; an instruction moving two of them adds up past the limit
    doc["instructions"][0]["output_tensors"] = [t["index"] for t in doc["tensors"][:2]]
    big = tmp_path / "big.json"
    big.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=r"big\.json: instructions\[0\] \(index 0\) moves tensors whose sizes add up past 2\*\*53"):
        load_any(big)


def test_unknown_extra_keys_never_fail(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "furiosa_schedule.json").read_text())
    doc["brand_new"] = {"a": [1]}
    doc["instructions"][0]["new_field"] = 3
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    trace = load_any(path)
    assert trace.run_info.extra["unknown_keys"] == ["brand_new", "compiler_version"]
    assert trace.run_info.extra["unknown_instruction_keys"] == ["new_field"]


def test_cycle_schedule_has_engine_lanes_in_cycles(tmp_path: Path) -> None:
    out = tmp_path / "s.arrow"
    assert main(["convert", str(FIXTURES / "furiosa_schedule.json"), "-o", str(out)]) == 0
    trace = read_trace(out)
    assert trace.run_info.time_unit.value == "cycles"
    slices = trace["engine_slices"].to_pandas()
    assert dict(zip(slices["engine"], slices["engine_kind"], strict=False)) == {
        "DmaEngine": "dma_d2d", "MainContext": "matrix", "VectorEngine": "vector", "SubContext": "other"}
    assert int((slices["start"] + slices["dur"]).max()) == trace.run_info.extra["makespan_cycles"] == 600
    dma = slices[slices["engine"] == "DmaEngine"].sort_values("start")
    assert dma["bytes"].tolist() == [4096, 8192, 2048]
    main_row = slices[slices["engine"] == "MainContext"].iloc[0]
    assert list(main_row["depends_on"]) == [0, 1] and main_row["waited_on"] == "transfer"
    assert main_row["call_site"] == "model/attn.py:42"
    (summary,) = schedule_summaries(trace)
    use = {e.engine: e for e in summary.engines}
    assert summary.total == 600 and use["MainContext"].busy == 250 and use["DmaEngine"].busy == 245
    assert use["MainContext"].idle_by_cause == {"transfer": 150}
    assert summary.critical_path == 600 and summary.critical_by_engine["MainContext"] == 250


def test_left_margin_fits_the_longest_lane_name() -> None:
    """Lane names decide the timeline's left margin (an MTIA row's "NPU 17 Stream 102 Submission Queue" was cut to
    "2 Submission Queue" in a fixed 110 px): 7 px a character plus 16, at least 110 px and at most 420 px."""
    from portscope.app.figures import lane_margin_px

    assert lane_margin_px(["NPU 17 Stream 102 Submission Queue"]) == 254  # 34 characters: 238 + 16
    assert lane_margin_px(["host", "stream 7"]) == 110
    assert lane_margin_px(["x" * 100]) == 420
    assert lane_margin_px([]) == 110


def test_cycle_axis_is_labelled_cycles_and_never_matched_with_ns() -> None:
    from portscope.app.data.tables import region_bands, timeline_slices
    from portscope.app.figures import Panel, timeline_figure
    from portscope.ingest.viewport import build_lanes, reduce_viewport

    def panel(trace) -> Panel:  # noqa: ANN001  (as app/pages/timeline.panels builds it)
        lanes = build_lanes(timeline_slices(trace)[0])
        return Panel(title="t", lanes=lanes, viewport=reduce_viewport(lanes, 0, 600, 800), bands=region_bands(trace),
                     unit=trace.run_info.time_unit.value)  # fmt: skip

    cycles = load_any(FIXTURES / "furiosa_schedule.json")
    ns = load_any(FIXTURES / "furiosa_runtime_trace.json")
    one = timeline_figure([panel(cycles)])["layout"]
    assert one["xaxis"]["title"]["text"] == "cycles"  # ticks are cycle counts; a time axis says "time"
    longest = max(len(t) for t in one["yaxis"]["ticktext"])
    assert one["margin"]["l"] == max(110, min(420, math.ceil(7 * longest) + 16))
    both = timeline_figure([panel(ns), panel(cycles)])["layout"]
    assert both["xaxis"]["title"]["text"] == "time" and both["xaxis2"]["title"]["text"] == "cycles"
    assert "matches" not in both["xaxis2"]


def test_npu_kineto_lanes_links_and_missing_copy_bytes() -> None:
    # figures from the fixtures, by hand: device row pid 0 (sort index 5000000), lanes by thread_name;
    # launch 7 -> add_fp16 and rbln_submit, launch 8 -> Memcpy DtoH (256 B) and the driver sync rbln_sync
    eager = load_any(FIXTURES / "npu_kineto_eager.json")
    slices = eager["engine_slices"].to_pandas()
    lanes = dict(zip(slices["engine"], zip(slices["engine_kind"], slices["kind"], strict=True), strict=False))
    assert lanes == {"host": ("host", "compute"), "NPU 0 compute": ("stream", "compute"), "NPU 0 dma": ("dma_d2h", "transfer"),
                     "NPU 0 driver": ("other", "sync"), "NPU 0 runtime": ("dispatch", "dispatch")}  # fmt: skip
    ops = eager["ops"].column("name").to_pylist()
    by_name = {row["name"]: row for _, row in slices.iterrows()}
    assert ops[int(by_name["add_fp16"]["op_id"])] == "aten::add" and int(by_name["add_fp16"]["correlation"]) == 7
    assert ops[int(by_name["rbln_submit"]["op_id"])] == "aten::add"
    assert ops[int(by_name["Memcpy DtoH"]["op_id"])] == "aten::_to_copy" and int(by_name["Memcpy DtoH"]["correlation"]) == 8
    signals = eager["signals"].to_pandas()
    assert sorted(zip(signals["kind"], signals["op_name"], signals["bytes"], strict=True)) == [
        ("sync", "aten::_to_copy", 0), ("transfer/d2h", "aten::_to_copy", 256)]
    assert not any(m.startswith("copy bytes") for m in eager.run_info.missing_signals)
    assert eager.run_info.devices == ["cpu", "npu:0"]
    assert eager.run_info.extra["npu"]["device_slices_linked_by_launch_id"] == 4
    fallback_note = next(m for m in eager.run_info.missing_signals if m.startswith("dispatch/cpu_fallback"))
    assert "NPU work" in fallback_note and "GPU" not in fallback_note
    compiled = load_any(FIXTURES / "npu_kineto_compiled.json")
    cs = compiled["engine_slices"].to_pandas()
    device = cs[cs["engine"].str.startswith("NPU 1")]
    assert len(device) == 3 and set(device["op_id"]) == {0} and set(device["correlation"]) == {21}
    assert compiled["ops"].column("name").to_pylist()[0] == "Torch-Compiled Region: 0/0"
    assert compiled.run_info.devices == ["cpu", "npu:1"]
    transfers = compiled["transfers"].to_pandas()
    assert dict(zip(transfers["direction"], transfers["bytes"], strict=True)) == {"h2d": 4096, "d2h": 0}
    assert "copy bytes (the NPU copy lane carries no byte counts)" in compiled.run_info.missing_signals


def test_furiosa_runtime_trace_rows() -> None:
    trace = load_any(FIXTURES / "furiosa_runtime_trace.json")
    slices = trace["engine_slices"].to_pandas()
    assert set(slices["engine"]) == {"runtime", "NPU 0", "NPU 0 operators", "NPU 0 load", "NPU 0 store", "NPU 1",
                                     "NPU 1 operators"}  # fmt: skip
    assert trace.run_info.devices == ["cpu", "npu:0", "npu:1"]
    transfers = trace["transfers"].to_pandas()
    assert transfers["bytes"].tolist() == [65536, 0] and any("transfer bytes" in m for m in trace.run_info.missing_signals)


def test_dump_lines_up_with_a_prediction_by_kind_and_operator() -> None:
    dump = trace_report_data(load_any(FIXTURES / "rbln_explain_runtime.json"))["regions"][0]
    predicted = {"signals": [{"signal": "dispatch/cpu_fallback", "count": 38, "bytes": 0}],
                 "operators": [{"signal": "dispatch/cpu_fallback", "operator": "aten::neg.default", "count": 38, "bytes": 0},
                               {"signal": "dispatch/recompile", "operator": "aten::mul.Tensor", "count": 5, "bytes": 0},
                               {"signal": "dispatch/recompile", "operator": "aten::add.Tensor", "count": 1, "bytes": 0}],
                 "d2h_bytes": 0}  # fmt: skip
    signals = diff_signals(predicted, dump).set_index("signal")
    assert signals.loc["dispatch/cpu_fallback", "a_count"] == 38 and signals.loc["dispatch/cpu_fallback", "b_count"] == 40
    ops = diff_operators(predicted, dump).set_index(["signal", "operator"])
    assert ops.loc[("dispatch/cpu_fallback", "aten::neg"), ["a_count", "b_count"]].tolist() == [38, 40]
    assert ops.loc[("dispatch/recompile", "aten::mul"), "change"] == "same"
    assert ops.loc[("dispatch/recompile", "aten::add.Tensor"), "change"] == "removed"  # no bare aten::add: full name kept

"""NPU and Chrome trace readers (issue 16): torch_npu trace view and tables, Mobilint, Furiosa, generic Chrome.

Expected figures are written by hand from the fixture files (see fixtures/README.md) and from the two
real kernel_details files of ../shared/fixtures/ascend.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from portscope.app.cli import main
from portscope.app.figures import MEMORY_AXIS, Panel, timeline_figure
from portscope.ingest import read_trace
from portscope.ingest.convert import detect, load_any
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.memory_lanes import memory_lanes
from portscope.ingest.readers import chrome_stream
from portscope.ingest.readers.chrome_stream import event_batches, micros_to_ns
from portscope.ingest.report import trace_report_data
from portscope.ingest.viewport import KINDS, build_lanes, reduce_viewport

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"

DETECTED = {
    "ascend_trace_view.json": "ascend-trace",
    "ascend_op_statistic.csv": "ascend-op-statistic",
    "mobilint_core_trace.json": "mobilint-trace",
    "furiosa_legacy_trace.json": "furiosa-trace",
    "furiosa_rngd_trace.json": "furiosa-trace",
    "chrome_generic.json": "chrome",
}


@pytest.mark.parametrize(("name", "fmt"), sorted(DETECTED.items()))
def test_detected_by_content_and_converted(name: str, fmt: str, tmp_path: Path) -> None:
    copy = tmp_path / "input.bin"  # no telling extension
    copy.write_bytes((FIXTURES / name).read_bytes())
    assert detect(copy) == fmt
    out = tmp_path / "out.arrow"
    assert main(["convert", str(copy), "-o", str(out)]) == 0
    assert read_trace(out).run_info.converted_from == fmt


# ---- exact time ------------------------------------------------------------------------------------


def test_decimal_microseconds_are_exact_nanoseconds() -> None:
    assert micros_to_ns("1704161511420306.491") == 1704161511420306491
    assert round(float("1704161511420306.491") * 1000) != 1704161511420306491  # what a float parse would give
    assert micros_to_ns("1736413971558972.912\t") == 1736413971558972912  # the TAB kernel_details keeps
    assert micros_to_ns("12") == 12000 and micros_to_ns("0.5") == 500 and micros_to_ns("-3.25") == -3250
    assert micros_to_ns("1.0004") == 1000  # below a nanosecond: cut
    assert micros_to_ns(7) == 7000 and micros_to_ns(2.5) == 2500
    assert micros_to_ns("abc") is None and micros_to_ns(None) is None and micros_to_ns(float("nan")) is None


def test_bare_array_in_chunks_equals_one_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # separators inside strings and nested lists of objects: a cut there must not split an event
    events = [{"ph": "X", "name": f'k}}, {{"x{i}', "pid": 1, "tid": 1, "ts": str(i), "dur": 1,
               "args": {"list": [{"a": i}, {"b": "}, {"}]}} for i in range(400)]  # fmt: skip
    path = tmp_path / "a.json"
    path.write_bytes(orjson.dumps(events, option=orjson.OPT_INDENT_2))
    monkeypatch.setattr(chrome_stream, "CHUNK_BYTES", 512)
    _, batches = event_batches(path)
    got = [ev for batch in batches for ev in batch]
    assert got == events
    path.write_bytes(orjson.dumps(events)[:-40])
    with pytest.raises(TraceFormatError, match="not closed"):
        list(event_batches(path)[1])


# ---- torch_npu trace_view.json -----------------------------------------------------------------------


def test_ascend_trace_view_operators_kernels_and_lanes() -> None:
    trace = load_any(FIXTURES / "ascend_trace_view.json")
    ops = trace["ops"].to_pylist()
    assert [o["name"] for o in ops] == ["aten::add", "aten::mm", "aten::cumsum", "aten::argmax", "aten::item",
                                        "aten::_local_scalar_dense"]  # fmt: skip
    assert [o["placement"] for o in ops] == ["device"] * 4 + ["host"] * 2
    # ns exact: aten::mm at 340.250 - 306.491 us
    assert ops[1]["start_ns"] == 33_759 and ops[1]["dur_ns"] == 30_000
    assert ops[1]["input_shapes"] == "64x128;128x256" and ops[1]["input_dtypes"] == "bfloat16;bfloat16"
    assert ops[1]["bytes_in"] == (64 * 128 + 128 * 256) * 2
    slices = {s["name"]: s for s in trace["engine_slices"].to_pylist()}
    kernel = slices["aclnnAdd_AddAiCore_Add"]
    assert kernel["start"] == 23_510 and kernel["dur"] == 3_200 and kernel["engine"] == "NPU Stream 2"
    assert kernel["op_id"] == 0  # torch_to_npu flow, id beyond 2^53
    assert slices["ArgMaxV2"]["op_id"] == 3  # flow id beyond 2^64
    assert slices["Cumsum"]["op_id"] == 2 and slices["Cumsum"]["kind"] == "fallback"  # string flow id; AI_CPU
    # the CANN lane draws the calls as the host's dispatch (what they are, sync or compile, is the rule layer's)
    assert slices["aclopCompileAndExecute"]["kind"] == "compile"  # the CANN lane names calls without "AscendCL@"
    assert slices["aclrtSynchronizeDevice"]["kind"] == "sync" and slices["aclrtSynchronizeDevice"]["engine"] == "CANN"
    assert slices["Dequeue@aten::add"]["engine"] == "host queue"
    assert slices["Free"]["engine"] == "overlap Free" and slices["Free"]["kind"] == "annotation"
    assert {s["engine"] for s in slices.values()} == {"host", "host queue", "CANN", "NPU Stream 2", "NPU Stream 9",
                                                       "overlap Computing", "overlap Free"}  # fmt: skip
    assert trace.run_info.devices == ["cpu", "npu:0"]
    assert trace.run_info.start_time.startswith("2024-01-02T02:11:51.420306")


def test_ascend_trace_view_signals() -> None:
    trace = load_any(FIXTURES / "ascend_trace_view.json")
    signals = sorted((s["kind"], s["reason"], s["op_name"], s["op_id"]) for s in trace["signals"].to_pylist())
    assert signals == [
        ("dispatch/cpu_fallback", "ai-cpu", "aten::cumsum", 2),
        ("dispatch/recompile", "online-aclopCompileAndExecute", "aten::argmax", 3),
        ("sync", "aclrtSynchronizeDevice", "aclrtSynchronizeDevice", None),  # inside no operator: the call is the reason
        ("sync", "item", "aten::item", 4),  # aclrtSynchronizeStream inside aten::item: the wait item made
    ]
    compiles = trace["compiles"].to_pylist()
    assert [(c["kind"], c["key"], c["compile_ns"]) for c in compiles] == [("program", "aten::argmax", 250_000)]
    report = trace_report_data(trace)["regions"][0]
    assert {s["signal"]: s["count"] for s in report["signals"]} == {"dispatch/cpu_fallback": 1, "dispatch/recompile": 1, "sync": 2}


# ---- torch_npu tables ----------------------------------------------------------------------------------


def test_kernel_details_591_real(shared_fixtures: Path) -> None:
    trace = load_any(shared_fixtures / "ascend" / "kernel_details_591.csv")
    assert trace.run_info.converted_from == "ascend-kernels"
    assert trace["ops"].num_rows == 591 and trace["engine_slices"].num_rows == 591
    slices = trace["engine_slices"].to_pylist()
    engines: dict[str, int] = {}
    for s in slices:
        engines[s["engine"]] = engines.get(s["engine"], 0) + 1
    assert engines == {"NPU stream 16": 558, "NPU stream 17": 14, "NPU HCCL": 19}
    first, hccl = slices[0], slices[1]
    assert (first["name"], first["start"], first["dur"]) == ("ZerosLike46", 0, 607_980)
    # hcom_broadcast__445_0: 1699529622793969.5 - 1699529622790614.8 us, 308926.68 us
    assert (hccl["name"], hccl["start"], hccl["dur"], hccl["engine_kind"]) == ("hcom_broadcast__445_0", 3_354_700, 308_926_680, "collective")
    fallbacks = [s for s in trace["signals"].to_pylist() if s["kind"] == "dispatch/cpu_fallback"]
    assert len(fallbacks) == 7 and {s["op_name"] for s in fallbacks} == {"Cast"} and {s["reason"] for s in fallbacks} == {"ai-cpu"}
    assert min(s["time_ns"] for s in fallbacks) == 325_440_400  # trans_Cast_5 at 1699529623116055.2 us
    ops = trace["ops"].to_pylist()
    assert ops[0]["name"] == "ZerosLike" and ops[0]["input_shapes"] == "544404480" and ops[0]["input_dtypes"] == "float16"
    assert ops[1]["input_shapes"] is None  # N/A
    assert trace.run_info.extra["accelerator_cores"] == {"AI_CORE": 13, "AI_CPU": 7, "AI_VECTOR_CORE": 520, "DSA_SQE": 7,
                                                         "HCCL": 19, "MIX_AIV": 25}  # fmt: skip


def test_kernel_details_29_real(shared_fixtures: Path) -> None:
    trace = load_any(shared_fixtures / "ascend" / "kernel_details_29.csv")
    ops = trace["ops"].to_pylist()
    assert len(ops) == 29 and not trace["signals"].num_rows  # no AI_CPU kernel
    # row 1 (MatMulV2): "1736413971558972.912<TAB>" - the earliest start 1736413971411629.128 (FlashAttentionScore)
    assert ops[0]["name"] == "FlashAttentionScore" and ops[0]["start_ns"] == 0
    row1 = next(o for o in ops if o["start_ns"] == 147_343_784)
    assert row1["name"] == "MatMulV2" and row1["dur_ns"] == 185_504
    assert row1["input_shapes"] == "81920x4096;8192x512" and row1["input_dtypes"] == "bfloat16;bfloat16"
    assert row1["output_shapes"] == "4096x512"
    assert {s["engine"] for s in trace["engine_slices"].to_pylist()} == {"NPU stream 2"}
    assert trace["regions"].column("name").to_pylist() == ["kernel_details_29", "step 19"]


def test_op_statistic_with_and_without_device_id(tmp_path: Path) -> None:
    trace = load_any(FIXTURES / "ascend_op_statistic.csv")
    fallbacks = {(s["op_name"], s["count"]) for s in trace["signals"].to_pylist()}
    assert fallbacks == {("Cast", 7), ("NonZero", 2)}
    assert trace["regions"].column("dur_ns").to_pylist() == [7_321_596]  # 4483.096 + 812.5 + 960 + 60.25 + 1005.75 us
    older = tmp_path / "op_statistic.csv"
    older.write_text("\n".join(line.split(",", 1)[1] for line in (FIXTURES / "ascend_op_statistic.csv").read_text().splitlines()))
    assert detect(older) == "ascend-op-statistic"
    assert {(s["op_name"], s["count"]) for s in load_any(older)["signals"].to_pylist()} == fallbacks


def test_kernel_details_bad_rows_are_listed(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us)\nA,Add,AI_CORE,10.5,1\nB,Add,AI_CORE,N/A,2\nC,Add,AI_CPU,12,-1\n")
    with pytest.raises(TraceFormatError) as err:
        load_any(path)
    text = str(err.value)
    assert "2 of 3 rows are malformed" in text and "line 3 ('B')" in text and "line 4 ('C')" in text


# ---- Mobilint, Furiosa, generic Chrome -----------------------------------------------------------------------


def test_mobilint_core_trace() -> None:
    trace = load_any(FIXTURES / "mobilint_core_trace.json")
    slices = {s["name"]: s for s in trace["engine_slices"].to_pylist()}
    assert slices["infer"]["engine"] == "host" and slices["infer"]["dur"] == 565_000
    assert slices["lock core"]["engine"] == "core worker 4250"
    assert (slices["copy to npu"]["engine"], slices["copy to npu"]["start"], slices["copy to npu"]["dur"]) == ("NPU h2d", 12_000, 19_000)
    assert (slices["wait core"]["engine"], slices["wait core"]["kind"], slices["wait core"]["dur"]) == ("NPU core", "sync", 500_000)
    assert slices["read device"]["engine"] == "NPU d2h"
    transfers = [(t["direction"], t["start_ns"], t["dur_ns"], t["bytes"]) for t in trace["transfers"].to_pylist()]
    assert transfers == [("h2d", 12_000, 19_000, 0), ("d2h", 537_000, 14_000, 0)]
    kinds = sorted(s["kind"] for s in trace["signals"].to_pylist())
    assert kinds == ["sync", "transfer/d2h", "transfer/h2d"]
    assert any("transfer bytes" in m for m in trace.run_info.missing_signals)


def test_mobilint_unbalanced_pairs(tmp_path: Path) -> None:
    events = json.loads((FIXTURES / "mobilint_core_trace.json").read_text())
    path = tmp_path / "t.json"
    path.write_text(json.dumps([e for e in events if not (e["name"] == "lock core" and e["ph"] == "B")]))
    with pytest.raises(TraceFormatError, match="an 'E' without a matching 'B'"):
        load_any(path)


def _be(name: str, tid: int, begin: int, end: int) -> list[dict]:
    return [{"name": name, "cat": "", "ph": "B", "pid": 1, "tid": tid, "ts": begin},
            {"name": name, "cat": "", "ph": "E", "pid": 1, "tid": tid, "ts": end}]  # fmt: skip


def test_mobilint_lanes_transfers_and_the_wait(tmp_path: Path) -> None:
    events = sorted(
        _be("infer", 1, 100, 200) + _be("convert to buffer", 1, 101, 105) + _be("lock core", 2, 106, 108)
        + _be("copy to npu", 2, 110, 120) + _be("write device", 2, 111, 115) + _be("wait core", 2, 130, 150)
        + _be("copy from npu", 2, 160, 170),
        key=lambda e: (e["ts"], e["ph"] == "E"),
    )
    path = tmp_path / "npu_core_trace.json"
    path.write_text(json.dumps(events))
    trace = load_any(path)
    rows = sorted((s["engine"], s["engine_kind"], s["kind"], s["name"], s["start"], s["dur"]) for s in trace["engine_slices"].to_pylist())
    assert rows == [  # t0 = 100 us
        ("NPU core", "stream", "sync", "wait core", 30_000, 20_000),
        ("NPU d2h", "dma_d2h", "transfer", "copy from npu", 60_000, 10_000),
        ("NPU h2d", "dma_h2d", "transfer", "copy to npu", 10_000, 10_000),
        ("NPU h2d", "dma_h2d", "transfer", "write device", 11_000, 4_000),  # a part of the copy: no transfer of its own
        ("core worker 2", "dispatch", "dispatch", "lock core", 6_000, 2_000),
        ("host", "host", "compute", "convert to buffer", 1_000, 4_000),
        ("host", "host", "compute", "infer", 0, 100_000),
    ]
    transfers = [(t["direction"], t["bytes"], t["src_device"], t["dst_device"], t["start_ns"], t["dur_ns"], t["cause"])
                 for t in trace["transfers"].to_pylist()]  # fmt: skip
    assert transfers == [("h2d", 0, "cpu", "npu:0", 10_000, 10_000, "explicit"), ("d2h", 0, "npu:0", "cpu", 60_000, 10_000, "explicit")]
    signals = [(s["kind"], s["reason"], s["op_name"], s["time_ns"], s["count"]) for s in trace["signals"].to_pylist()]
    assert signals == [("transfer/h2d", "copy to npu", "copy to npu", 10_000, 1), ("sync", "wait core", "wait core", 30_000, 1),
                       ("transfer/d2h", "copy from npu", "copy from npu", 60_000, 1)]  # fmt: skip
    assert [(r["name"], r["device"], r["dur_ns"]) for r in trace["regions"].to_pylist()] == [("npu_core_trace", "npu:0", 100_000)]
    assert trace.run_info.extra["spans_by_name"] == {"convert to buffer": 1, "copy from npu": 1, "copy to npu": 1, "infer": 1,
                                                     "lock core": 1, "wait core": 1, "write device": 1}  # fmt: skip


def _x(name: str, pid: int, tid: int, ts: float, dur: float, args: dict, cat: str = "") -> dict:
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_furiosa_lanes_copies_and_cycles(tmp_path: Path) -> None:
    events = {"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "runtime"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 10000000, "args": {"name": "NPU 0"}},
        _x("Execution", 1, 10000000, 20, 30, {"pe_index": 0, "execution_index": 1}),
        _x("submit", 1, 1, 10, 5, {"execution_index": 1}),
        _x("Load", 1, 10000000, 15, 5, {"pe_index": 0, "execution_index": 1, "bytes": 4096}),
        _x("MatMul", 1, 10000000, 20, 10, {"pe_index": 0, "execution_index": 1, "operator_index": 0}),
        _x("Store", 1, 10000000, 50, 2, {"pe_index": 0, "execution_index": "x"}),  # no size; an index that is no int
        _x("Load", 2, 5, 60, 1, {"pe_index": 3, "size": 128, "begin_cycle": 100, "end_cycle": 1100}, "NPU"),  # NPU by its cat
        _x("Quantize", 2, 6, 5, 1, {}, "Nux"),
    ]}  # fmt: skip
    path = tmp_path / "furiosa.json"
    path.write_text(json.dumps(events))
    trace = load_any(path)
    rows = [(s["engine"], s["engine_kind"], s["kind"], s["name"], s["start"], s["dur"], s["correlation"], s["bytes"])
            for s in trace["engine_slices"].to_pylist()]  # fmt: skip
    assert sorted(rows, key=lambda r: (r[4], -r[5])) == [  # by start, the longest first; t0 = 5 us
        ("host Nux", "dispatch", "dispatch", "Quantize", 0, 1_000, None, None),
        ("runtime", "dispatch", "dispatch", "submit", 5_000, 5_000, 1, None),
        ("NPU 0 load", "dma_h2d", "transfer", "Load", 10_000, 5_000, 1, 4096),
        ("NPU 0", "stream", "compute", "Execution", 15_000, 30_000, 1, None),
        ("NPU 0 operators", "other", "compute", "MatMul", 15_000, 10_000, 1, None),
        ("NPU 0 store", "dma_d2h", "transfer", "Store", 45_000, 2_000, None, None),
        ("NPU 3 load", "dma_h2d", "transfer", "Load", 55_000, 1_000, None, 128),
    ]
    transfers = [(t["direction"], t["bytes"], t["src_device"], t["dst_device"], t["start_ns"], t["dur_ns"])
                 for t in trace["transfers"].to_pylist()]  # fmt: skip
    assert transfers == [("h2d", 4096, "cpu", "npu:0", 10_000, 5_000), ("d2h", 0, "npu:0", "cpu", 45_000, 2_000),
                         ("h2d", 128, "cpu", "npu:3", 55_000, 1_000)]  # fmt: skip
    signals = [(s["kind"], s["reason"], s["op_name"], s["bytes"], s["time_ns"]) for s in trace["signals"].to_pylist()]
    assert signals == [("transfer/h2d", "Load", "Load", 4096, 10_000), ("transfer/d2h", "Store", "Store", 0, 45_000),
                       ("transfer/h2d", "Load", "Load", 128, 55_000)]  # fmt: skip
    assert [(r["name"], r["device"], r["dur_ns"]) for r in trace["regions"].to_pylist()] == [("furiosa", "npu", 56_000)]
    assert trace.run_info.devices == ["cpu", "npu:0", "npu:3"]
    assert trace.run_info.extra["npu_rows"] == ["NPU 0", "NPU 3"]
    assert trace.run_info.extra["npu_cycles"] == {"spans": 1, "cycles": 1000, "cycles_per_us": 1000.0}
    assert "transfer bytes (Load/Store spans carry no size)" in trace.run_info.missing_signals


def test_furiosa_legacy_and_rngd() -> None:
    legacy = load_any(FIXTURES / "furiosa_legacy_trace.json")
    engines = {(s["engine"], s["name"]) for s in legacy["engine_slices"].to_pylist()}
    assert ("host Nux", "Quantize") in engines and ("NPU 0 operators", "Conv") in engines and ("NPU 1", "Execution") in engines
    conv = next(s for s in legacy["engine_slices"].to_pylist() if s["name"] == "Conv")
    assert (conv["start"], conv["dur"]) == (26_500, 40_250)
    assert legacy.run_info.devices == ["cpu", "npu:0", "npu:1"]
    rngd = load_any(FIXTURES / "furiosa_rngd_trace.json")
    lanes = {s["name"]: (s["engine"], s["start"]) for s in rngd["engine_slices"].to_pylist()}
    assert lanes == {"submit": ("submit", 0), "Load": ("npu:0:0-7 PE 0 load", 4_125), "Execution": ("npu:0:0-7 PE 0", 6_125),
                     "Store": ("npu:0:0-7 PE 0 store", 16_125)}  # fmt: skip
    assert rngd.run_info.devices == ["cpu", "npu:0"]
    assert rngd.run_info.extra["npu_cycles"] == {"spans": 3, "cycles": 13_000, "cycles_per_us": 1000.0}
    assert [(t["direction"], t["bytes"]) for t in rngd["transfers"].to_pylist()] == [("h2d", 4096), ("d2h", 1024)]


def test_generic_chrome_lanes_and_what_it_cannot_provide() -> None:
    trace = load_any(FIXTURES / "chrome_generic.json")
    rows = [(s["engine"], s["name"], s["start"], s["dur"], s["kind"], s["correlation"]) for s in trace["engine_slices"].to_pylist()]
    assert sorted(rows) == sorted([
        ("Renderer / CrRendererMain", "Layout", 0, 20_250, "compute", None),
        ("Renderer / CrRendererMain", "V8.Execute", 29_500, 30_125, "compute", None),
        ("Renderer / CrRendererMain", "V8.GC", 34_500, 5_000, "compute", 77),  # the flow starts inside the GC
        ("Renderer / CrRendererMain", "FirstPaint", 60_500, 0, "annotation", None),
        ("GPU Process / VizCompositorThread", "DrawFrame", 49_500, 12_000, "compute", 77),
        ("GPU Process / tid 7", "SwapBuffers", 64_500, 3_000, "compute", None),
    ])  # fmt: skip
    assert not trace["ops"].num_rows and not trace["signals"].num_rows
    missing = " ".join(trace.run_info.missing_signals)
    assert all(w in missing for w in ("operators", "cpu_fallback", "transfers and syncs", "compile"))


def test_generic_chrome_flows_instants_and_the_root_named_after_the_file(tmp_path: Path) -> None:
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Browser"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 10, "args": {"name": "Main"}},
        {"ph": "M", "name": "process_sort_index", "pid": 2, "tid": 0, "args": {"sort_index": -1}},
        {"ph": "X", "name": "A", "cat": "c", "pid": 1, "tid": 10, "ts": 100, "dur": 50},
        {"ph": "X", "name": "B", "cat": "c", "pid": 1, "tid": 10, "ts": 110, "dur": 10},
        {"ph": "B", "name": "C", "cat": "c", "pid": 2, "tid": 20, "ts": 105},
        {"ph": "s", "name": "f", "cat": "c", "id": 5, "pid": 2, "tid": 20, "ts": 90},  # before every span of its thread
        {"ph": "f", "name": "f", "cat": "c", "id": 5, "pid": 1, "tid": 10, "ts": 115, "bp": "e"},  # inside B (inside A)
        {"ph": "i", "name": "Mark", "cat": "c", "pid": 1, "tid": 10, "ts": 160, "s": "t"},
        {"ph": "E", "pid": 2, "tid": 20, "ts": 130.5},
    ]
    path = tmp_path / "generic.json"
    path.write_text(json.dumps({"traceEvents": events, "traceName": "/tmp/recorder-1234/trace.json"}))
    trace = load_any(path)
    rows = [(s["engine"], s["engine_kind"], s["name"], s["start"], s["dur"], s["kind"], s["correlation"])
            for s in trace["engine_slices"].to_pylist()]  # fmt: skip
    assert rows == [  # t0 = 100 us (A); instants first, then spans in the order they closed
        ("Browser / Main", "other", "Mark", 60_000, 0, "annotation", None),
        ("Browser / Main", "other", "A", 0, 50_000, "compute", None),
        ("Browser / Main", "other", "B", 10_000, 10_000, "compute", 5),  # the flow's end: the innermost span open at 115
        ("pid 2 / tid 20", "other", "C", 5_000, 25_500, "compute", 5),  # its start at 90: the first span after it
    ]
    assert sorted(trace["engine_slices"].column("engine").chunk(0).dictionary.to_pylist()) == ["Browser / Main", "pid 2 / tid 20"]
    regions = trace["regions"].to_pylist()
    assert [(r["name"], r["dur_ns"], r["device"]) for r in regions] == [("generic.json", 60_000, None)]  # not the traceName
    assert trace.run_info.extra["lanes"] == 2 and trace.run_info.extra["flows"] == 2


def test_generic_chrome_bare_array(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "chrome_generic.json").read_text())
    path = tmp_path / "perfetto.json"
    path.write_text(json.dumps(doc["traceEvents"]))
    assert detect(path) == "chrome"
    assert load_any(path)["engine_slices"].num_rows == 6


@pytest.mark.parametrize("sliced", [False, True])
def test_generic_chrome_async_spans_pair_begin_and_end(tmp_path: Path, sliced: bool) -> None:
    """Async spans (nestable "b"/"e" paired by category and id, nested ones innermost first, "id2" local ids;
    legacy "S"/"F" by id and name) become slices on one lane per name in their process; an end whose begin is
    not in the file is counted, not drawn (catapult's async_begin_end test data has one)."""
    events = [
        {"ph": "X", "name": "step", "cat": "c", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "b", "name": "load", "cat": "io", "id": 5, "pid": 1, "tid": 1, "ts": 10},
        {"ph": "b", "name": "decode", "cat": "io", "id": 5, "pid": 1, "tid": 2, "ts": 20},
        {"ph": "e", "cat": "io", "id": 5, "pid": 1, "tid": 2, "ts": 30},  # closes "decode" (innermost), no name
        {"ph": "e", "name": "load", "cat": "io", "id": 5, "pid": 1, "tid": 1, "ts": 50},
        {"ph": "b", "name": "rpc", "cat": "net", "id2": {"local": "0x1"}, "pid": 2, "tid": 9, "ts": 40},
        {"ph": "e", "name": "rpc", "cat": "net", "id2": {"local": "0x1"}, "pid": 2, "tid": 9, "ts": 70},
        {"ph": "S", "name": "frame", "cat": "gfx", "id": "f1", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "F", "name": "frame", "cat": "gfx", "id": "f1", "pid": 1, "tid": 1, "ts": 95},
        {"ph": "F", "name": "orphan", "cat": "gfx", "id": "f9", "pid": 1, "tid": 1, "ts": 60},
    ]
    path = tmp_path / "async.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_any(path, sliced=sliced)
    rows = sorted((s["engine"], s["name"], s["start"], s["dur"]) for s in trace["engine_slices"].to_pylist())
    assert rows == [
        ("pid 1 / async decode", "decode", 20_000, 10_000),
        ("pid 1 / async frame", "frame", 5_000, 90_000),
        ("pid 1 / async load", "load", 10_000, 40_000),
        ("pid 1 / tid 1", "step", 0, 100_000),
        ("pid 2 / async rpc", "rpc", 40_000, 30_000),
    ]
    assert trace.run_info.extra["unmatched_async_ends"] == 1 and trace.run_info.extra["unmatched_begins"] == 0


# ---- memory lanes -------------------------------------------------------------------------------------------


def test_schedule_tensors_and_memory_lanes() -> None:
    trace = load_any(FIXTURES / "furiosa_schedule.json")
    rows = trace.run_info.extra["tensors"]["rows"]
    assert ["q", "Sram", 12288, 2048, 150, 500] in rows and ["y", "Dram", 8192, 2048, 505, 600] in rows and len(rows) == 7
    memory = memory_lanes(trace)
    assert memory.tiers == ["Sram", "Dram"] and memory.tier_bytes == [16384, 12288]  # p ends at 14336 + 2048; w_q at 4096 + 8192
    q = memory.labels.index("q (Sram): 2,048 B at 0x3000, 150-500")
    assert (memory.x0[q], memory.x1[q]) == (150, 500)
    assert memory.y0[q] == pytest.approx(0.9 * 12288 / 16384) and memory.y1[q] == pytest.approx(0.9 * 14336 / 16384)
    lanes = build_lanes(trace["engine_slices"])
    panel = Panel("s", lanes, reduce_viewport(lanes, 0, 600, 1000), [], "cycles", memory=memory)
    fig = timeline_figure([panel])
    axis = fig["layout"][f"yaxis{MEMORY_AXIS}"]
    assert axis["ticktext"] == ["Sram (16,384 B)", "Dram (12,288 B)"]
    assert axis["domain"][0] > fig["layout"]["yaxis"]["domain"][1]  # memory above the resource lanes
    memory_traces = [d for d in fig["data"] if d["yaxis"] == f"y{MEMORY_AXIS}"]
    assert [d["name"] for d in memory_traces] == ["memory Sram", "memory Dram"]
    first = next(i for i, d in enumerate(fig["data"]) if d["yaxis"] == f"y{MEMORY_AXIS}")
    assert first >= len(KINDS)  # after every bar trace: zoom patches (panel * len(KINDS) + kind) keep their indices
    assert memory_traces[1]["x"][:6] == [0, 100, 100, 0, 0, None]  # x in Dram: cycles 0-100


# ---- the converted sample --------------------------------------------------------------------------------------


def test_converted_ascend_sample_matches_its_source(shared_fixtures: Path, tmp_path: Path) -> None:
    out = tmp_path / "k.arrow"
    assert main(["convert", str(shared_fixtures / "ascend" / "kernel_details_591.csv"), "-o", str(out), "--compression", "zstd"]) == 0
    sample = read_trace(SAMPLES / "ascend_kernel_details_591.arrow")
    fresh = read_trace(out)
    for table in ("ops", "signals", "engine_slices", "regions"):
        assert fresh[table].num_rows == sample[table].num_rows, table
    assert fresh["signals"].to_pylist() == sample["signals"].to_pylist()
    assert "ascend_kernel_details_591.arrow" in (SAMPLES / "README.md").read_text()


def test_trace_view_detected_by_its_quoted_timestamps(tmp_path: Path) -> None:
    # torch_npu may write the host process first: no Ascend word in the first bytes, only quoted decimal times
    events = [e for e in json.loads((FIXTURES / "ascend_trace_view.json").read_text()) if e.get("pid") == 12345 and e["ph"] == "X"]
    path = tmp_path / "head.json"
    path.write_text(json.dumps(events))
    assert detect(path) == "ascend-trace"
    assert load_any(path)["ops"].num_rows == 6
    for e in events:
        e["ts"] = float(e["ts"])  # numbers: a PyTorch profiler trace
    path.write_text(json.dumps(events))
    assert detect(path) != "ascend-trace"


def test_kernel_details_led_by_device_id(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text("Device_id,Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
                    "0,1,4294967295,5,2,MatMul_1,MatMul,AI_CORE,100.000,10\n"
                    "1,1,4294967295,6,2,Cast_2,Cast,AI_CPU,105.5,2.25\n")  # fmt: skip
    assert detect(path) == "ascend-kernels"
    trace = load_any(path)
    assert trace.run_info.devices == ["cpu", "npu:0", "npu:1"]
    assert [(s["engine"], s["start"], s["dur"], s["kind"]) for s in trace["engine_slices"].to_pylist()] == [
        ("NPU 0 stream 2", 0, 10_000, "compute"), ("NPU 1 stream 2", 5_500, 2_250, "fallback")]
    assert [o["device"] for o in trace["ops"].to_pylist()] == ["npu:0", "npu:1"]


def test_a_schedules_synthetic_sync_is_drawn_as_a_sync() -> None:
    # furiosa_schedule.json: instruction "sync_0" ("synthetic sync before store", SubContext, cycles 500-505) is a
    # sync; the contraction on MainContext (index 2, 150-400) is compute
    slices = load_any(FIXTURES / "furiosa_schedule.json")["engine_slices"].to_pydict()
    kinds = {(n, e): k for n, e, k in zip(slices["name"], slices["engine"], slices["kind"], strict=True)}
    assert kinds[("synthetic sync before store", "SubContext")] == "sync"
    assert kinds[("contraction q = x @ w_q", "MainContext")] == "compute"

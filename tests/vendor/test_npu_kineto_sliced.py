"""Kineto traces with NPU lanes (torch-rbln's Kineto plugin layout) converted sliced: links made on disk
(`ingest/readers/_npu_link.py`), tables by the GPU sliced path with NPU lanes (`_npu_lanes.py`), equal to the whole
conversion's, with tiny slices, buckets and chunks and the link columns spilled past 2 values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.readers import _chrome_stream, _kineto_ops, _kineto_rows, _kineto_sweep
from portscope.ingest.readers.kineto import read_kineto
from portscope.ingest.trace import read_trace, write_trace

FIXTURES = Path(__file__).parent / "fixtures"
SLICED = ["engine_slices", "ops", "runtime_calls", "signals", "transfers"]
HOST, NPU = 100, 3


def _x(cat: str, name: str, pid: int, tid: int, ts: float, dur: float, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _flow(ph: str, flow_id: object, pid: int, tid: int, ts: float) -> dict:
    return {"ph": ph, "cat": "ac2g", "name": "ac2g", "id": flow_id, "pid": pid, "tid": tid, "ts": ts}


def _meta(kind: str, pid: int, tid: int, **args: object) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "ts": 0, "args": args}


# Host thread (100, 100): O0 aten::mm [10, 40), O1 "Torch-Compiled Region: 0/0" [100, 200) (graph mode), O2 aten::add
# [300, 320). Markers rbln_run: M0 at 20 (launch 11); M1 at 110 on the NPU runtime lane (3, 9) (launch 12): no
# operator runs there, so it moves to the main thread, inside O1; M2 at 305 without a launch id; M3 at 306 (launch 13).
# NPU 3 (pid 3, sort index 5000003, named "rbln 3"), lanes compute (1), dma (2), driver (3), runtime (9).
# Device slices: K0 [25, 35) launch 11; K1 [120, 170) no launch id: flow 501 from M1's place (launch 12) ends on its
# lane at 120; C0 HtoD [130, 135) no launch id, no bytes: flow 900 (no start) ends at 132 -> id 900, the correlation
# of the host runtime call rbln_copy at 150 (inside O1); C1 DtoH [310, 315) launch 13, 64 bytes; K2 [400, 405): flow
# 502 ends at 410, after it (not linked); K3 [500, 510): flow "a1" from M2's place (no launch id) -> linked, no
# correlation; K4 [600, 900): flow 503 from M3's place (launch 13) ends at 890. Runtime work on the NPU row
# (rbln_submit at 22, launch 11; driver rbln_sync at 315, launch 13) becomes device slices of its lanes.
EVENTS = [
    _x("user_annotation", "step", HOST, HOST, 0, 600),
    _x("cpu_op", "aten::mm", HOST, HOST, 10, 30, **{"External id": 1}),
    _x("privateuse1_runtime", "rbln_run", HOST, HOST, 20, 0, launch_id=11),
    _x("privateuse1_runtime", "rbln_submit", NPU, 9, 22, 2, launch_id=11),
    _x("kernel", "mm_kernel", NPU, 1, 25, 10, launch_id=11),
    _x("cpu_op", "Torch-Compiled Region: 0/0", HOST, HOST, 100, 100, **{"External id": 2}),
    _x("privateuse1_runtime", "rbln_run", NPU, 9, 110, 0, launch_id=12),
    _x("kernel", "graph_kernel", NPU, 1, 120, 50),
    _x("gpu_memcpy", "Memcpy HtoD", NPU, 2, 130, 5),
    _x("privateuse1_runtime", "rbln_copy", HOST, HOST, 150, 1, correlation=900),
    _x("cpu_op", "aten::add", HOST, HOST, 300, 20, **{"External id": 3}),
    _x("privateuse1_runtime", "rbln_run", HOST, HOST, 305, 0),
    _x("privateuse1_runtime", "rbln_run", HOST, HOST, 306, 0, launch_id=13),
    _x("gpu_memcpy", "Memcpy DtoH", NPU, 2, 310, 5, launch_id=13, bytes=64),
    _x("privateuse1_driver", "rbln_sync", NPU, 3, 315, 3, launch_id=13),
    _x("kernel", "late", NPU, 1, 400, 5),
    _x("kernel", "str_flow", NPU, 1, 500, 10),
    _x("kernel", "long", NPU, 1, 600, 300),
    _flow("s", 501, NPU, 9, 110), _flow("f", 501, NPU, 1, 120),
    _flow("f", 900, NPU, 2, 132),
    _flow("s", 502, HOST, HOST, 20), _flow("f", 502, NPU, 1, 410),
    _flow("s", "a1", HOST, HOST, 305), _flow("f", "a1", NPU, 1, 505),
    _flow("s", 503, HOST, HOST, 306), _flow("f", 503, NPU, 1, 890),
    _meta("process_name", HOST, 0, name="python3"), _meta("process_name", NPU, 0, name="rbln 3"),
    _meta("process_sort_index", NPU, 0, sort_index=5_000_003),
    *(_meta("thread_name", NPU, t, name=n) for t, n in ((1, "compute"), (2, "dma"), (3, "driver"), (9, "runtime"))),
]


def _write(path: Path, events: list) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "npu"}, indent=1))
    return path


def _tiny(monkeypatch: pytest.MonkeyPatch, bucket: int) -> None:
    """Slices of 2 events, buckets of ~`bucket` events, chunks of 2 rows; link columns spilled past 2 values, read and
    written 3 at a time."""
    for module, knob, value in ((_kineto_ops, "SPILL_ROWS", 2), (_kineto_rows, "SPILL_ROWS", 2), (_kineto_sweep, "BUCKET_EVENTS", bucket),
                                (_kineto_sweep, "CHUNK_ROWS", 2), (_kineto_sweep, "HOLD_ROWS", 2), (_kineto_sweep, "WINDOW_ROWS", 3)):  # fmt: skip
        monkeypatch.setattr(module, knob, value)


def _same_tables(tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch, bucket: int, *, slices: list[str] = SLICED) -> tuple:
    """(the sliced trace written and read back, the sliced trace); asserts every table and the run info equal the
    whole conversion's (slices: the tables the sliced conversion gives as slices)."""
    whole = read_kineto(source)
    assert not whole.slices
    write_trace(whole, tmp_path / "whole.arrow")
    _tiny(monkeypatch, bucket)
    sliced = read_kineto(source, sliced=True)
    assert sorted(sliced.slices) == slices
    write_trace(sliced, tmp_path / "sliced.arrow")
    got, want = read_trace(tmp_path / "sliced.arrow"), read_trace(tmp_path / "whole.arrow")
    for name in want.tables:
        assert got[name].equals(want[name]), name
    assert got.run_info == want.run_info
    assert sliced.content_hash() == whole.content_hash() == got.content_hash()
    return got, sliced


@pytest.mark.parametrize("bucket", [100, 1])
def test_hand_written_npu_lanes_sliced_give_the_hand_computed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   bucket: int) -> None:  # fmt: skip
    # bucket 1: every join (markers, flow ids, slices and flow ends by time, the sort) one distinct key a bucket, so
    # K4 [600, 900) waits for its flow end (890) across buckets
    got, _ = _same_tables(tmp_path, _write(tmp_path / "npu.json", EVENTS), monkeypatch, bucket)
    ops = got["ops"].to_pydict()
    assert ops["name"] == ["aten::mm", "Torch-Compiled Region: 0/0", "aten::add"]
    assert ops["placement"] == ["device"] * 3 and ops["device"] == ["npu:3"] * 3

    calls = got["runtime_calls"].to_pydict()  # rbln_submit and rbln_sync left for the NPU lanes
    assert calls["name"] == ["rbln_run", "rbln_run", "rbln_copy", "rbln_run", "rbln_run"]
    assert calls["op_id"] == [0, 1, 1, 2, 2]  # M1 claimed by O1 on the main thread
    assert calls["correlation"] == [11, 12, 900, None, 13]
    assert calls["start_ns"] == [20000, 110000, 150000, 305000, 306000]

    lanes = got["engine_slices"].to_pydict()  # host lanes, then device slices in start order
    assert lanes["engine"] == ["host"] * 3 + ["NPU 3 runtime", "NPU 3 compute", "NPU 3 compute", "NPU 3 dma", "NPU 3 dma",
                                              "NPU 3 driver", "NPU 3 compute", "NPU 3 compute", "NPU 3 compute"]  # fmt: skip
    assert lanes["name"][3:] == ["rbln_submit", "mm_kernel", "graph_kernel", "Memcpy HtoD", "Memcpy DtoH", "rbln_sync", "late",
                                 "str_flow", "long"]  # fmt: skip
    assert lanes["engine_kind"][3:] == ["dispatch", "stream", "stream", "dma_h2d", "dma_d2h", "other", "stream", "stream", "stream"]
    assert lanes["kind"][3:] == ["dispatch", "compute", "compute", "transfer", "transfer", "sync", "compute", "compute", "compute"]
    assert lanes["op_id"] == [0, 1, 2, 0, 0, 1, 1, 2, 2, None, None, 2]
    assert lanes["correlation"][3:] == [11, 11, 12, 900, 13, 13, None, None, 13]
    assert lanes["start"][3:] == [22000, 25000, 120000, 130000, 310000, 315000, 400000, 500000, 600000]
    assert lanes["bytes"][3:] == [None, None, None, 0, 64, None, None, None, None]

    transfers = got["transfers"].to_pydict()
    assert transfers["direction"] == ["h2d", "d2h"] and transfers["bytes"] == [0, 64] and transfers["op_id"] == [1, 2]
    assert transfers["src_device"] == ["cpu", "npu:3"] and transfers["dst_device"] == ["npu:3", "cpu"]

    signals = got["signals"].to_pydict()  # copies, then the driver slice's sync
    assert signals["kind"] == ["transfer/h2d", "transfer/d2h", "sync"]
    assert signals["op_name"] == ["Torch-Compiled Region: 0/0", "aten::add", "aten::add"]
    assert signals["reason"] == ["Memcpy HtoD", "Memcpy DtoH", "sync-call"]
    assert signals["time_ns"] == [130000, 310000, 315000]
    assert signals["note"][2].startswith("rbln_sync: ")

    info = got.run_info
    assert info.devices == ["cpu", "npu:3"]
    assert info.extra["npu"] == {"processes": {"3": "NPU 3"}, "lanes": ["compute", "dma", "driver", "runtime"],
                                 "launch_markers": 4, "device_slices_linked_by_launch_id": 4,
                                 "device_slices_linked_by_flow": 4}  # fmt: skip
    assert "copy bytes (the NPU copy lane carries no byte counts)" in info.missing_signals


def test_flows_met_before_the_first_word_of_an_npu_row_are_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Flows first, in slices of their own (no launch id, no "NPU", no device sort index in them): the collector
    skips them, then reads the file's flows again once the metadata shows an NPU row."""
    flows = [e for e in EVENTS if e["ph"] in ("s", "f")]
    spans = [{**e, "args": {k: v for k, v in e["args"].items() if k != "launch_id"}} for e in EVENTS if e["ph"] == "X"]
    source = _write(tmp_path / "late.json", [*flows, *spans, *(e for e in EVENTS if e["ph"] == "M")])
    monkeypatch.setattr(_chrome_stream, "CHUNK_BYTES", 256)
    got, _ = _same_tables(tmp_path, source, monkeypatch, 3)
    lanes = got["engine_slices"].to_pydict()
    # without launch ids only flows link: K1 (501 from M1's place, which has no launch id now: the id), C0 (900),
    # K3 ("a1"), K4 (503: the id); the rest have no correlation
    assert dict(zip(lanes["name"][3:], lanes["correlation"][3:], strict=True)) == {
        "rbln_submit": None, "mm_kernel": None, "graph_kernel": 501, "Memcpy HtoD": 900, "Memcpy DtoH": None,
        "rbln_sync": None, "late": None, "str_flow": None, "long": 503}  # fmt: skip
    assert got.run_info.extra["npu"]["device_slices_linked_by_flow"] == 4
    assert got.run_info.extra["npu"]["device_slices_linked_by_launch_id"] == 0


def test_an_odd_correlation_on_an_npu_row_is_linked_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime call on the NPU row whose correlation is a list is kept aside: the sliced path hands the trace to
    the whole linker (same tables); the call is a device slice without a correlation, and looks for no flow."""
    events = [*EVENTS]
    events[3] = _x("privateuse1_runtime", "rbln_submit", NPU, 9, 22, 2, correlation=[5])
    got, _ = _same_tables(tmp_path, _write(tmp_path / "odd.json", events), monkeypatch, 3, slices=[])
    lanes = got["engine_slices"].to_pydict()
    assert (lanes["name"][3], lanes["op_id"][3], lanes["correlation"][3]) == ("rbln_submit", None, None)
    assert got.run_info.extra["npu"]["device_slices_linked_by_launch_id"] == 3


@pytest.mark.parametrize("name", ["npu_kineto_eager.json", "npu_kineto_compiled.json"])
def test_npu_fixtures_sliced_equal_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    got, _ = _same_tables(tmp_path, FIXTURES / name, monkeypatch, 2)
    lanes = got["engine_slices"].to_pydict()
    if name == "npu_kineto_eager.json":  # launch 7: rbln_submit, add_fp16 (aten::add); launch 8: DtoH, rbln_sync (_to_copy)
        assert lanes["name"] == ["aten::add", "aten::_to_copy", "rbln_submit", "add_fp16", "Memcpy DtoH", "rbln_sync"]
        assert lanes["engine"][2:] == ["NPU 0 runtime", "NPU 0 compute", "NPU 0 dma", "NPU 0 driver"]
        assert lanes["op_id"] == [0, 1, 0, 0, 1, 1] and lanes["correlation"][2:] == [7, 7, 8, 8]
        signals = got["signals"].to_pydict()
        assert signals["kind"] == ["transfer/d2h", "sync"] and signals["op_name"] == ["aten::_to_copy"] * 2
        assert signals["bytes"] == [256, 0]
    else:  # one launch (21) inside the compiled region: copy in, the decoder, copy out
        assert lanes["name"] == ["Torch-Compiled Region: 0/0", "rbln_copy_h2d", "decoder_layers", "rbln_copy_d2h"]
        assert lanes["engine"][1:] == ["NPU 1 dma", "NPU 1 compute", "NPU 1 dma"]
        assert lanes["op_id"] == [0, 0, 0, 0] and lanes["correlation"][1:] == [21, 21, 21]
        assert got["transfers"].column("bytes").to_pylist() == [4096, 0]


def test_gpu_rows_next_to_npu_rows_keep_their_cuda_lanes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA device (pid 7, no NPU word) in the same trace: its kernel and copy join their runtime calls by
    correlation and keep the GPU lanes, prefixed by the device as there are two; the NPU rows are as before."""
    gpu = [_x("cuda_runtime", "cudaLaunchKernel", HOST, HOST, 12, 2, correlation=77),
           _x("kernel", "gemm", 7, 7, 14, 3, correlation=77, device=7, stream=7),
           _x("cuda_runtime", "cudaMemcpyAsync", HOST, HOST, 30, 2, correlation=78),
           _x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 7, 8, 33, 1, correlation=78, device=7, stream=8, bytes=32)]  # fmt: skip
    got, _ = _same_tables(tmp_path, _write(tmp_path / "mixed.json", [*gpu, *EVENTS]), monkeypatch, 3)
    lanes = got["engine_slices"].to_pydict()
    rows = dict(zip(lanes["name"], zip(lanes["engine"], lanes["engine_kind"], lanes["op_id"], strict=True), strict=False))
    assert rows["gemm"] == ("cuda:7 stream 7", "stream", 0) and rows["Memcpy HtoD (Pageable -> Device)"] == ("cuda:7 DMA h2d", "dma_h2d", 0)
    assert rows["mm_kernel"] == ("NPU 3 compute", "stream", 0) and rows["Memcpy DtoH"] == ("NPU 3 dma", "dma_d2h", 2)
    transfers = got["transfers"].to_pydict()
    assert transfers["dst_device"] == ["cuda:7", "npu:3", "cpu"] and transfers["bytes"] == [32, 0, 64]


@pytest.mark.parametrize("sliced", [False, True])
def test_a_gpu_row_beside_npu_rows_keeps_its_device(tmp_path: Path, sliced: bool) -> None:
    """A trace with an NPU row (torch-rbln, "rbln 0") and a GPU row (process_labels "GPU 2", a kernel on stream 7):
    run_info lists both devices (the NPU naming used to replace the list with the npu:* ones only)."""
    doc = json.loads((FIXTURES / "npu_kineto_eager.json").read_text())
    doc["traceEvents"] += [
        {"ph": "M", "name": "process_labels", "pid": 2, "tid": 0, "args": {"labels": "GPU 2"}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 2, "tid": 7, "ts": 1001.0, "dur": 2,
         "args": {"device": 2, "stream": 7, "correlation": 999}},
    ]  # fmt: skip
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(doc))
    trace = read_kineto(path, sliced=sliced)
    assert trace.run_info.devices == ["cpu", "cuda:2", "npu:0"]
    engines = set(trace["engine_slices"].column("engine").to_pylist())
    assert "cuda:2 stream 7" in engines and "NPU 0 compute" in engines
    assert read_kineto(FIXTURES / "npu_kineto_eager.json", sliced=sliced).run_info.devices == ["cpu", "npu:0"]

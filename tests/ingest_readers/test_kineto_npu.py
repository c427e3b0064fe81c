"""NPU lanes of a Kineto trace (torch-rbln's layout) translated, then linked by the one linker: launch ids, ``ac2g``
flows and markers placed where their operators run. Every figure below is worked out by hand from the events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.readers import kineto, kineto_rows
from portscope.ingest.readers.kineto import read_kineto


def _x(cat: str, name: str, pid: int, tid: int, ts: float, dur: float, **args: int) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _flow(ph: str, fid: int, pid: int, tid: int, ts: float) -> dict:
    return {"ph": ph, "cat": "ac2g", "name": "ac2g", "id": fid, "pid": pid, "tid": tid, "ts": ts, **({"bp": "e"} if ph == "f" else {})}


EVENTS = [
    # host process 100: thread 100 holds three operators (the main one), thread 101 one
    _x("cpu_op", "aten::mm", 100, 100, 1000, 100),
    _x("privateuse1_runtime", "rbln_run", 100, 100, 1010, 0, launch_id=5),  # marker of launch 5, inside aten::mm
    _flow("s", 900, 100, 100, 1010),  # ... flow 900 starts at it
    _x("privateuse1_runtime", "rbln_submit", 0, 4, 1012, 3, launch_id=5),  # runtime work on the NPU row
    _x("kernel", "k_flow", 0, 1, 1020, 10),  # no launch id of its own: flow 900 ends in it
    _flow("f", 900, 0, 1, 1020),
    _x("cpu_op", "aten::add", 100, 100, 1200, 100),
    _x("privateuse1_runtime", "rbln_run", 0, 4, 1210, 0, launch_id=6),  # a marker on an NPU lane: no operator there
    _x("kernel", "k_add", 0, 1, 1220, 10, launch_id=6),
    _x("cpu_op", "aten::relu", 100, 100, 1400, 100),
    _flow("s", 901, 100, 100, 1410),  # flow 901 starts in aten::relu, at no marker
    _x("kernel", "k_relu", 0, 1, 1420, 10),
    _flow("f", 901, 0, 1, 1420),
    _x("cpu_op", "aten::sub", 100, 101, 1600, 100),
    {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rbln 0"}},
    {"name": "process_sort_index", "ph": "M", "pid": 0, "tid": 0, "args": {"sort_index": 5000000}},
    {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "compute"}},
    {"name": "thread_name", "ph": "M", "pid": 0, "tid": 4, "args": {"name": "runtime"}},
]


@pytest.mark.parametrize("sliced", [False, True])
@pytest.mark.parametrize("slice_rows", [None, 1])
def test_launch_ids_flows_and_markers(tmp_path: Path, sliced: bool, slice_rows: int | None,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if slice_rows:  # the runtime calls and device rows translated one at a time, read back from a spill file, and
        monkeypatch.setattr(kineto, "SLICE_ROWS", slice_rows)  # the events kept in temporary files while linked
        monkeypatch.setattr(kineto_rows, "SPILL_ROWS", 2)
        monkeypatch.setattr(kineto, "SPILL_EVENTS", 1)
    path = tmp_path / "npu.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": EVENTS}))
    trace = read_kineto(path, sliced=sliced)
    ops = trace["ops"].column("name").to_pylist()
    assert ops == ["aten::mm", "aten::add", "aten::relu", "aten::sub"]
    device = [(s["engine"], s["name"], s["kind"], s["correlation"], None if s["op_id"] is None else ops[s["op_id"]])
              for s in trace["engine_slices"].to_pylist() if s["engine"].startswith("NPU")]  # fmt: skip
    # k_flow: flow 900 starts at the marker of launch 5 -> its launch; the runtime work has launch 5 of its own;
    # k_add: launch 6, whose marker sits where aten::add runs; k_relu: flow 901 starts at no marker -> the flow's
    # own id, and no runtime call launched it (aten::relu takes no id: it did not run as k_relu)
    assert sorted(device) == [("NPU 0 compute", "k_add", "compute", 6, "aten::add"),
                              ("NPU 0 compute", "k_flow", "compute", 5, "aten::mm"),
                              ("NPU 0 compute", "k_relu", "compute", 901, None),
                              ("NPU 0 runtime", "rbln_submit", "dispatch", 5, "aten::mm")]  # fmt: skip
    calls = [(c["name"], c["start_ns"], c["correlation"], ops[c["op_id"]]) for c in trace["runtime_calls"].to_pylist()]
    assert calls == [("rbln_run", 10_000, 5, "aten::mm"), ("rbln_run", 210_000, 6, "aten::add")]
    placement = dict(zip(ops, trace["ops"].column("placement").to_pylist(), strict=True))
    assert placement == {"aten::mm": "device", "aten::add": "device", "aten::relu": "host", "aten::sub": "host"}
    npu = trace.run_info.extra["npu"]
    assert (npu["launch_markers"], npu["device_slices_linked_by_launch_id"], npu["ac2g_flow_points"]) == (2, 2, 4)
    assert trace.run_info.devices == ["cpu", "npu:0"]


@pytest.mark.parametrize("sliced", [False, True])
def test_flows_read_before_the_metadata_that_names_the_npu_row(tmp_path: Path, sliced: bool,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """No launch id anywhere: only the device row's sort index, the file's last event (in the last slice read), says
    NPU lanes, after the flow was met. The flow is read again: k_flow takes flow 900's id (the marker it starts at has
    none of its own) and so the marker's operator, aten::mm."""
    from portscope.ingest.readers import chrome_stream

    monkeypatch.setattr(chrome_stream, "CHUNK_BYTES", 200)  # the events in two slices: all but the last, the last
    events = [_x("cpu_op", "aten::mm", 100, 100, 1000, 100), _x("privateuse1_runtime", "rbln_run", 100, 100, 1010, 0),
              _flow("s", 900, 100, 100, 1010), _x("kernel", "k_flow", 0, 1, 1020, 10), _flow("f", 900, 0, 1, 1020),
              {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "compute"}},
              {"name": "process_sort_index", "ph": "M", "pid": 0, "tid": 0, "args": {"sort_index": 5000000}}]
    path = tmp_path / "npu.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = read_kineto(path, sliced=sliced)
    ops = trace["ops"].column("name").to_pylist()
    device = [(s["engine"], s["name"], s["correlation"], ops[s["op_id"]]) for s in trace["engine_slices"].to_pylist()
              if s["engine"].startswith("NPU")]  # fmt: skip
    assert device == [("NPU 0 compute", "k_flow", 900, "aten::mm")]
    assert trace.run_info.extra["npu"]["ac2g_flow_points"] == 2


def test_metadata_that_may_name_an_npu_row() -> None:
    from portscope.ingest.readers.npu_kineto import names_npu_row

    assert names_npu_row("process_name", {"name": "NPU 0"}) and names_npu_row("thread_name", {"name": "NPU 0 dma"})
    assert names_npu_row("process_labels", {"labels": "NPU 1"})
    assert names_npu_row("process_sort_index", {"sort_index": 5000003})
    assert not names_npu_row("process_sort_index", {"sort_index": 100}) and not names_npu_row("process_name", {"name": "python3"})
    assert not names_npu_row("process_sort_index", {"sort_index": 50000000})  # 8 digits: not a device row's
    assert not names_npu_row("process_name", ["NPU 0"])  # args that are no object

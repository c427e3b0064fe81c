"""Chrome trace export: tracks, slices, instants and flows; converting the export back loses no operator."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from portscope.ingest import write_trace
from portscope.ingest.convert import detect, load_any
from portscope.ingest.export_chrome import write_chrome
from portscope.ingest.readers import read_fallback_log, read_kineto, read_torch_trace

from .conftest import FIXTURES

ALEXNET = FIXTURES / "kineto" / "cuda_alexnet_small.json.gz"


def _export(trace, tmp_path: Path) -> dict:
    out = write_chrome(trace, tmp_path / "out.json")
    return json.loads(out.read_text())


def _tracks(doc: dict) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}


def test_export_of_cuda_trace(tmp_path: Path) -> None:
    trace = read_kineto(ALEXNET)
    doc = _export(trace, tmp_path)
    events = doc["traceEvents"]
    tracks = _tracks(doc)
    names = set(tracks.values())
    assert {"regions", "host", "stream 7", "stream 20", "DMA h2d"} <= names
    assert len(tracks) == len(names)  # one track per engine
    assert any(e["ph"] == "M" and e["name"] == "process_name" for e in events)
    by_track = collections.Counter((tracks[e["tid"]], e["cat"]) for e in events if e["ph"] == "X")
    assert by_track[("host", "cpu_op")] == trace["ops"].num_rows
    assert by_track[("DMA h2d", "gpu_memcpy")] == 16
    assert by_track[("stream 7", "kernel")] == 75
    assert by_track[("regions", "user_annotation")] == trace["regions"].num_rows
    # every transfer caused by an operator has a flow from that operator's slice to the copy's slice
    starts = [e for e in events if e["ph"] == "s"]
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(finishes) == 16
    ops_by_ts = collections.defaultdict(set)
    for e in events:
        if e.get("cat") == "cpu_op":
            ops_by_ts[(e["tid"], e["ts"])].add(e["name"])
    copies = {(e["tid"], e["ts"]): e for e in events if e.get("cat") == "gpu_memcpy"}
    for s in starts:
        assert "aten::copy_" in ops_by_ts[(s["tid"], s["ts"])]
        f = finishes[s["id"]]
        assert f["bp"] == "e" and (f["tid"], f["ts"]) in copies
    instants = [e for e in events if e["ph"] == "i"]
    assert collections.Counter(e["name"] for e in instants) == {"transfer/h2d": 16, "sync": 21}
    assert all("reason" in e["args"] for e in instants)
    assert {e["args"]["reason"] for e in instants if e["name"] == "sync"} == {"cudaStreamSynchronize", "cudaDeviceSynchronize"}


@pytest.mark.slow
def test_converting_the_export_loses_no_operator(kineto_cpu: dict[str, Path], tmp_path: Path) -> None:
    first = read_kineto(kineto_cpu["shapes_stack"])
    out = write_chrome(first, tmp_path / "export.json")
    assert detect(out) == "kineto"
    again = load_any(out)
    a = first["ops"].select(["name", "start_ns", "dur_ns", "input_shapes", "input_dtypes"]).to_pylist()
    b = again["ops"].select(["name", "start_ns", "dur_ns", "input_shapes", "input_dtypes"]).to_pylist()
    assert len(a) == len(b)
    assert collections.Counter(r["name"] for r in a) == collections.Counter(r["name"] for r in b)
    origin = min(r["start_ns"] for r in a) - min(r["start_ns"] for r in b)
    assert all(abs(x["start_ns"] - (y["start_ns"] + origin)) <= 1 and x["input_shapes"] == y["input_shapes"]
               for x, y in zip(a, b, strict=True))  # fmt: skip
    regions = again["regions"].column("name").to_pylist()
    assert "prefill" in regions and "decode" in regions


def test_roundtrip_cuda_export_keeps_transfers(tmp_path: Path) -> None:
    first = read_kineto(ALEXNET)
    again = load_any(write_chrome(first, tmp_path / "e.json"))
    assert again["ops"].num_rows == first["ops"].num_rows
    assert sorted(again["transfers"].column("bytes").to_pylist()) == sorted(first["transfers"].column("bytes").to_pylist())


def test_export_of_logs(tmp_path: Path) -> None:
    log = tmp_path / "f.log"
    log.write_text("[2026-09-14 19:49:00.145][I] `aten::neg` op ran on CPU instead of RBLN\n")
    doc = _export(read_fallback_log(log), tmp_path)
    instants = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert [e["name"] for e in instants] == ["dispatch/cpu_fallback"] and instants[0]["args"]["operator"] == "aten::neg"
    trace = read_torch_trace(FIXTURES / "torch_trace" / "graph_breaks_small.log")
    doc = _export(trace, tmp_path)
    compiles = [e for e in doc["traceEvents"] if e.get("cat") == "compile"]
    assert len(compiles) == trace["compiles"].num_rows
    assert "compiles" in _tracks(doc).values()


def test_export_of_a_written_trace_via_cli(tmp_path: Path) -> None:
    from portscope.app.cli import main

    arrow = write_trace(read_kineto(ALEXNET), tmp_path / "a.arrow")
    assert main(["export", "--chrome", str(arrow), "-o", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["traceEvents"]

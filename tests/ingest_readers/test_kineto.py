"""Kineto / PyTorch profiler traces -> Trace: counts match an independent json reading."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from portscope.ingest import Direction, EngineKind, Placement, SignalKind, Source, read_trace, write_trace
from portscope.ingest.callsites import site_line
from portscope.ingest.convert import detect, load_any
from portscope.ingest.readers import read_kineto
from portscope.ingest.report import format_trace

from . import plain
from .conftest import FIXTURES, shared

ALEXNET = FIXTURES / "kineto" / "cuda_alexnet_small.json.gz"
ROCM = FIXTURES / "kineto" / "rocm_mi250_small.json.gz"
OLD_CATEGORIES = FIXTURES / "kineto" / "cuda_old_categories.json.gz"
MTIA = FIXTURES / "kineto" / "mtia_inference.json.gz"


def _col(trace, table: str, column: str) -> list:
    col = trace[table].column(column)
    return col.cast("string").to_pylist() if str(col.type).startswith("dictionary") else col.to_pylist()


def _signals(trace, kind: SignalKind) -> int:
    return sum(c for k, c in zip(_col(trace, "signals", "kind"), _col(trace, "signals", "count"), strict=True) if k == kind.value)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "shapes_stack"])
def test_cpu_llama_trace_counts(kineto_cpu: dict[str, Path], variant: str, tmp_path: Path) -> None:
    path = kineto_cpu[variant]
    ops = plain.complete(path, "cpu_op")
    annotations = plain.complete(path, "user_annotation")
    assert detect(path) == "kineto"
    trace = load_any(path)
    assert trace.run_info.source is Source.CONVERTED and trace.run_info.converted_from == "kineto"
    assert trace["ops"].num_rows == len(ops) > 100
    assert collections.Counter(_col(trace, "ops", "name")) == collections.Counter(e["name"] for e in ops)
    assert set(_col(trace, "ops", "placement")) == {Placement.HOST.value}
    assert _col(trace, "regions", "name")[1:] == ["prefill", "decode"] == [e["name"] for e in annotations]
    assert trace["regions"].num_rows == len(annotations) + 1  # plus the root region over the whole trace
    # every op lies in the region whose span contains it
    names = dict(zip(_col(trace, "regions", "region_id"), _col(trace, "regions", "name"), strict=True))
    starts = {e["args"]["External id"]: e["ts"] for e in ops}
    prefill, decode = annotations
    expected_prefill = sum(prefill["ts"] <= t < prefill["ts"] + prefill["dur"] for t in starts.values())
    assert collections.Counter(names[r] for r in _col(trace, "ops", "region_id"))["prefill"] == expected_prefill
    # CPU trace: no device, so no transfers and no syncs, and the run says so
    assert trace["transfers"].num_rows == 0 and trace["signals"].num_rows == 0
    assert any("CPU-only" in m for m in trace.run_info.missing_signals)
    # host lane: one slice per top-level op
    assert set(_col(trace, "engine_slices", "engine_kind")) == {EngineKind.HOST.value}
    shapes = _col(trace, "ops", "input_shapes")
    sites = _col(trace, "ops", "call_site")
    if variant == "plain":
        assert set(shapes) == {None} and set(sites) == {None}
        assert any("with_stack" in m for m in trace.run_info.missing_signals)
    else:
        embedding = next(e for e in ops if e["name"] == "aten::embedding")
        row = _col(trace, "ops", "name").index("aten::embedding")
        assert shapes[row] == ";".join("x".join(map(str, d)) if t in ("float", "long int") else ""
                                       for d, t in zip(embedding["args"]["Input Dims"], embedding["args"]["Input type"], strict=True))
        assert _col(trace, "ops", "input_dtypes")[row].split(";")[:2] == ["float32", "int64"]
        assert _col(trace, "ops", "bytes_in")[row] == 128 * 64 * 4 + 7 * 8
        assert sum(s is not None for s in sites) == len(ops)
        # the model's line (transformers, package-relative) or the script's; the norm's pow at the norm's line
        lines = [site_line(s) for s in sites]
        assert all(line.startswith("transformers/") or "profile_llama.py" in line for line in lines), set(lines)
        pow_lines = {line for line, name in zip(lines, _col(trace, "ops", "name"), strict=True) if name.startswith("aten::pow")}
        assert pow_lines and all(line.startswith("transformers/models/llama/modeling_llama.py:") for line in pow_lines)
        assert trace["frames"].num_rows > 5 and trace["stacks"].num_rows > 1
    out = write_trace(trace, tmp_path / "t.arrow")
    again = read_trace(out)
    assert again["ops"].num_rows == len(ops)
    assert "Region 'prefill'" in format_trace(again)


def test_alexnet_cuda_hand_checked() -> None:
    """Hand-checked: 16 `Memcpy HtoD (Pageable -> Device)` of 244,403,360 bytes in all, each launched by
    aten::copy_ via cudaMemcpyAsync; 16 cudaStreamSynchronize + 5 cudaDeviceSynchronize; kernels on streams 7 and 20."""
    assert plain.memcpy_by_direction(ALEXNET) == {"h2d": (16, 244_403_360)}  # the independent reading agrees
    trace = read_kineto(ALEXNET)
    directions = _col(trace, "transfers", "direction")
    assert directions == [Direction.H2D.value] * 16
    assert sum(_col(trace, "transfers", "bytes")) == 244_403_360
    assert _col(trace, "transfers", "bytes")[:3] == [92928, 256, 1228800]
    op_names = _col(trace, "ops", "name")
    assert {op_names[i] for i in _col(trace, "transfers", "op_id")} == {"aten::copy_"}
    assert _signals(trace, SignalKind.TRANSFER_H2D) == 16
    assert _signals(trace, SignalKind.TRANSFER_D2H) == 0
    assert _signals(trace, SignalKind.SYNC) == 21
    engines = collections.Counter(_col(trace, "engine_slices", "engine"))
    assert engines["DMA h2d"] == 16
    per_stream = collections.Counter(e["tid"] for cat in ("kernel", "gpu_memset") for e in plain.complete(ALEXNET, cat))
    assert per_stream == {7: 75, 20: 7}  # 79 kernels (73 + 6) and 3 memsets
    assert engines["stream 7"] == 75 and engines["stream 20"] == 7
    assert trace["regions"].num_rows == 1 + len(plain.complete(ALEXNET, "user_annotation"))
    assert trace.run_info.devices == ["cpu", "cuda:0"]
    assert trace.run_info.start_time.startswith("2023-09-27")  # absolute epoch microseconds
    report = format_trace(trace)
    assert "transfer/h2d" in report and "244.4 MB" in report


def test_rocm_relative_timestamps_and_runtime_sizes() -> None:
    trace = read_kineto(ROCM)
    assert trace.run_info.start_time.startswith("2025-")  # baseTimeNanoseconds + relative ts
    assert min(_col(trace, "ops", "start_ns")) >= 0
    # ROCm memcpys carry no bytes; the hipMemcpyWithStream runtime call has size "2560"
    assert _col(trace, "transfers", "bytes") == [2560, 2560]
    assert trace["ops"].num_rows == len(plain.complete(ROCM, "cpu_op"))
    assert _signals(trace, SignalKind.SYNC) == 1  # hipDeviceSynchronize


@pytest.mark.parametrize("sliced", [False, True])
def test_older_kineto_category_names_read_as_todays(sliced: bool) -> None:
    """An older Kineto build writes "Runtime" and "Kernel": the file (read by hand) holds 4 Kernel events on pid 0
    tid 7 (thread "stream 7") at ts 1665536373729077 / ..730531 / ..730669 / ..730701 us lasting 4 / 6 / 15 / 5 us,
    correlations 538860 / 538873 / 538885 / 538890, and 8 Runtime calls (4 cudaLaunchKernel, 4 occupancy queries);
    the first event in time is the cudaLaunchKernel at ..729065. Detected as Kineto, not as a generic Chrome trace."""
    assert detect(OLD_CATEGORIES) == "kineto"
    trace = load_any(OLD_CATEGORIES, sliced=sliced)
    assert _col(trace, "engine_slices", "engine") == ["stream 7"] * 4
    assert _col(trace, "engine_slices", "engine_kind") == [EngineKind.STREAM.value] * 4
    assert _col(trace, "engine_slices", "start") == [12_000, 1_466_000, 1_604_000, 1_636_000]
    assert _col(trace, "engine_slices", "dur") == [4_000, 6_000, 15_000, 5_000]
    assert _col(trace, "engine_slices", "correlation") == [538860, 538873, 538885, 538890]
    assert trace["runtime_calls"].num_rows == 8
    assert trace.run_info.devices == ["cpu", "cuda:0"]
    assert trace.run_info.extra["categories"] == {"Kernel": 4, "Runtime": 8, "Trace": 1}  # as the file names them


@pytest.mark.parametrize("broken", [False, True])
def test_older_operator_and_memcpy_names_give_ops_and_transfers(tmp_path: Path, broken: bool) -> None:
    """The oldest Kineto form ("Operator", "Memcpy", "Memset"), with and without an event that sends its slice
    through the per-event path (an operator without "dur"): one aten::copy_ whose cudaMemcpyAsync moved 4096 bytes
    host to device; the memset is device work on stream 7; operators are drawn on the host lane."""
    events = [
        {"ph": "X", "cat": "Operator", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 100, "dur": 50, "args": {"External id": 3}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 110, "dur": 20,
         "args": {"correlation": 9, "external id": 3}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 140, "dur": 8,
         "args": {"device": 0, "stream": 7, "correlation": 9, "external id": 3, "bytes": 4096}},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 150, "dur": 1,
         "args": {"device": 0, "stream": 7, "correlation": 10, "bytes": 64}},
    ]  # fmt: skip
    if broken:
        events.append({"ph": "X", "cat": "Operator", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 200})  # no "dur"
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert detect(path) == "kineto"
    trace = load_any(path)
    assert _col(trace, "ops", "name") == ["aten::copy_", "aten::empty"] if broken else ["aten::copy_"]
    assert _col(trace, "transfers", "direction") == [Direction.H2D.value]
    assert _col(trace, "transfers", "bytes") == [4096]
    assert collections.Counter(_col(trace, "engine_slices", "engine")) == {"DMA h2d": 1, "stream 7": 1, "host": 2 if broken else 1}


@pytest.mark.parametrize("sliced", [False, True])
def test_mtia_device_events_become_lanes_and_dma_transfers(sliced: bool) -> None:
    """Meta MTIA (read by hand from the file): 877 mtia_ccp_events "dma_request" -- 427 HOST_TO_DEVICE of
    788,439,608 bytes and 450 DEVICE_TO_HOST of 460,800 bytes -- and 436 other device events (291 event_record,
    48 event_wait, ...), on the threads of process "MTIA 17"; thread 3570 ("Stream 102") holds 72 of the others."""
    trace = load_any(MTIA, sliced=sliced)
    transfers = collections.Counter(_col(trace, "transfers", "direction"))
    assert transfers == {Direction.H2D.value: 427, Direction.D2H.value: 450}
    by_direction = collections.defaultdict(int)
    for d, n in zip(_col(trace, "transfers", "direction"), _col(trace, "transfers", "bytes"), strict=True):
        by_direction[d] += n
    assert by_direction == {Direction.H2D.value: 788_439_608, Direction.D2H.value: 460_800}
    assert _signals(trace, SignalKind.TRANSFER_H2D) == 427 and _signals(trace, SignalKind.TRANSFER_D2H) == 450
    kinds = collections.Counter(zip(_col(trace, "engine_slices", "engine"), _col(trace, "engine_slices", "kind"), strict=True))
    device_work = {e: n for (e, k), n in kinds.items() if k == "compute" and not e.startswith("host")}
    assert sum(device_work.values()) == 436
    assert [n for e, n in device_work.items() if e.endswith("Stream 102")] == [72]
    assert [d for d in trace.run_info.devices if d != "cpu"] == ["npu:17"]
    assert not [m for m in trace.run_info.missing_signals if "mtia_ccp_events" in m]


@pytest.mark.parametrize("sliced", [False, True])
def test_categories_not_read_are_named_with_their_counts(tmp_path: Path, sliced: bool) -> None:
    """Spans of categories the reader does not interpret (MTIA Insight events, CUDA sync records) are listed in
    the run's missing signals with their counts, and a trace whose only device spans are such is not called
    CPU-only."""
    ccp = {"ph": "X", "cat": "mtia_insight", "name": "insight", "pid": 17, "tid": 3910, "dur": 5, "args": {}}
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50, "args": {}},
        *({**ccp, "ts": 10 + i} for i in range(3)),
        {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 20, "dur": 1, "args": {}},
    ]
    path = tmp_path / "mtia.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    missing = load_any(path, sliced=sliced).run_info.missing_signals
    assert "events of categories this reader does not read: mtia_insight (3), cuda_sync (1)" in missing
    assert "transfers, syncs and cpu_fallback (no device activity in the categories read)" in missing
    assert not [m for m in missing if "CPU-only" in m]
    plain_cpu = tmp_path / "cpu.json"
    plain_cpu.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events[:1]}))
    missing = load_any(plain_cpu, sliced=sliced).run_info.missing_signals
    assert "transfers, syncs and cpu_fallback (CPU-only trace: no device activity)" in missing
    assert not [m for m in missing if "does not read" in m]


@pytest.mark.parametrize("sliced", [False, True])
def test_rocm_gpu_rows_are_not_npu_lanes(sliced: bool) -> None:
    """Newer Kineto gives a ROCm/CUDA device row the sort index 5000000 + id, as torch-rbln's NPU rows have;
    its process_labels "GPU 2" says it is a GPU: device cuda:2, a stream lane and a DMA lane, no NPU lanes."""
    trace = read_kineto(ROCM, sliced=sliced)
    assert trace.run_info.devices == ["cpu", "cuda:2"]
    assert set(_col(trace, "regions", "device")) == {"cuda:2"}
    lanes = collections.Counter(zip(_col(trace, "engine_slices", "engine"), _col(trace, "engine_slices", "engine_kind"), strict=True))
    # the file: 14 "kernel" events on pid 2 tid 0 (thread "stream 0 "), 2 "gpu_memcpy" HtoD events
    assert lanes[("stream 0", "stream")] == 14
    assert lanes[("DMA h2d", "dma_h2d")] == 2
    assert not [e for e, _ in lanes if e.startswith("NPU")]


@pytest.mark.parametrize("name", ["cuda_sampled_rank0.json.gz", "cuda_diff_control.json.gz", "cuda_diff_test.json.gz"])
def test_shared_cuda_traces_match_json(name: str) -> None:
    path = shared(f"kineto/{name}")
    trace = read_kineto(path)
    assert trace["ops"].num_rows == len(plain.complete(path, "cpu_op"))
    expected = plain.memcpy_by_direction(path)
    got: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for d, b in zip(_col(trace, "transfers", "direction"), _col(trace, "transfers", "bytes"), strict=True):
        got[d][0] += 1
        got[d][1] += b
    assert {k: tuple(v) for k, v in got.items()} == expected
    kernels = len(plain.complete(path, "kernel")) + len(plain.complete(path, "gpu_memset"))
    stream_slices = pc.sum(pc.equal(trace["engine_slices"].column("engine_kind").cast("string"), "stream")).as_py()
    assert stream_slices == kernels
    # every memcpy whose runtime call is in the trace is traced back to the operator that made that call
    calls = {e["args"].get("correlation") for e in plain.complete(path, "cuda_runtime")}
    launched = sum(e["args"].get("correlation") in calls for e in plain.complete(path, "gpu_memcpy"))
    linked = pc.sum(pc.is_valid(trace["transfers"].column("op_id"))).as_py()
    assert linked == launched > 0


def test_eager_vs_compiled_pair_differs_in_d2d() -> None:
    control = read_kineto(shared("kineto/cuda_diff_control.json.gz"))
    test = read_kineto(shared("kineto/cuda_diff_test.json.gz"))
    assert _signals(test, SignalKind.TRANSFER_D2D) == 4645 and _signals(control, SignalKind.TRANSFER_D2D) == 18


def _op(name: str, ts: float, dur: float, types: list[str], tid: int = 1, external: int = 0) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Input type": types, "Input Dims": [[4]] * len(types), "External id": external}}


# One GPU thread (tid 1) and one that launches nothing (tid 2). Launched-nothing leaves that take a typed tensor on
# the GPU thread are guessed to be fallbacks: aten::nonzero and the aten::mul inside aten::add (2). Not guessed:
# aten::mm (its kernel), aten::add (holds an operator), aten::empty (never computes), aten::relu (no typed tensor
# input), aten::sub (on tid 2).
_GUESSED_TRACE = {"schemaVersion": 1, "traceEvents": [
    _op("aten::mm", 0, 10, ["float", "float"], external=1),
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
     "args": {"correlation": 11, "External id": 1}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 3,
     "args": {"correlation": 11, "External id": 1, "device": 0, "stream": 7}},
    _op("aten::nonzero", 20, 5, ["float"], external=2),
    _op("aten::empty", 30, 1, ["float"], external=3),
    _op("aten::add", 40, 10, ["float", "float"], external=4),
    _op("aten::mul", 41, 2, ["float", "float"], external=5),
    _op("aten::relu", 60, 2, [""], external=6),
    _op("aten::sub", 70, 2, ["float", "float"], tid=2, external=7),
]}


def test_infer_fallback_is_opt_in_and_guesses_launched_nothing_leaves(tmp_path: Path) -> None:
    path = tmp_path / "guess.json"
    path.write_text(json.dumps(_GUESSED_TRACE))
    assert _signals(read_kineto(path), SignalKind.CPU_FALLBACK) == 0
    guessed = read_kineto(path, infer_fallback=True)
    placed = dict(zip(_col(guessed, "ops", "name"), _col(guessed, "ops", "placement"), strict=True))
    assert placed == {"aten::mm": "device", "aten::nonzero": "fallback", "aten::empty": "host", "aten::add": "host",
                      "aten::mul": "fallback", "aten::relu": "host", "aten::sub": "host"}
    fallbacks = [(s["op_name"], s["count"]) for s in guessed["signals"].to_pylist() if s["kind"] == "dispatch/cpu_fallback"]
    assert sorted(fallbacks) == [("aten::mul", 1), ("aten::nonzero", 1)]


def test_inferred_fallbacks_of_a_real_rocm_trace() -> None:
    """The ROCm file's two torch.randn(5, 128) fill on the host (aten::normal_ inside aten::randn, on the thread
    that launches the GPU work): the guess calls them fallbacks, and nothing else."""
    assert _signals(read_kineto(ROCM), SignalKind.CPU_FALLBACK) == 0
    guessed = read_kineto(ROCM, infer_fallback=True)
    assert [(s["op_name"], s["count"]) for s in guessed["signals"].to_pylist() if s["kind"] == "dispatch/cpu_fallback"] == [
        ("aten::normal_", 1), ("aten::normal_", 1)]
    ops = guessed["ops"].to_pylist()
    assert [(o["name"], o["input_shapes"]) for o in ops if o["placement"] == Placement.FALLBACK.value] == [
        ("aten::normal_", "5x128;;;")] * 2


def _events_equal(a, b) -> bool:
    import dataclasses

    return all(getattr(a, f.name) == getattr(b, f.name) for f in dataclasses.fields(a))


@pytest.mark.slow
def test_streamed_typed_path_reads_what_the_json_path_reads(kineto_cpu: dict[str, Path]) -> None:
    """The streaming reader (msgspec typed slices) and the general path (one dict per event) keep identical events."""
    from portscope.ingest.readers.chrome_json import ChromeDocument
    from portscope.ingest.readers.kineto import collect
    from portscope.ingest.readers.kineto_stream import collect_file
    from portscope.ingest.readers.source import read_bytes

    for path in (kineto_cpu["plain"], kineto_cpu["shapes_stack"], ALEXNET, ROCM):
        streamed, _lanes = collect_file(path)
        assert _events_equal(streamed, collect(path, ChromeDocument(path, read_bytes(path))))
    assert read_kineto(ROCM)["ops"].num_rows == len(plain.complete(ROCM, "cpu_op"))


def _copy_trace(path: Path, copy_bytes: int | None, call_bytes: int | None) -> Path:
    """One operator launching one HtoD copy: its runtime call and its device row, each with bytes or none."""
    call_args = {"correlation": 7, "kind": 1} | ({} if call_bytes is None else {"bytes": call_bytes})
    copy_args = {"correlation": 7, "device": 0, "stream": 7} | ({} if copy_bytes is None else {"bytes": copy_bytes})
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 0, "dur": 20, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 2, "dur": 5,
         "args": call_args},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 10,
         "dur": 4, "args": copy_args},
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(("copy_bytes", "call_bytes", "says"), [(None, None, True), (64, None, False),
                                                                 (None, 64, False), (None, 0, True)])
@pytest.mark.parametrize("sliced", [False, True])
def test_copies_without_a_size_are_named_among_what_the_trace_lacks(tmp_path: Path, copy_bytes: int | None,
                                                                    call_bytes: int | None, says: bool,
                                                                    sliced: bool) -> None:  # fmt: skip
    """The run says it lacks transfer bytes only when a copy row has none and no runtime call gives a size (0 none)."""
    trace = load_any(_copy_trace(tmp_path / "t.json", copy_bytes, call_bytes), sliced=sliced)
    assert ("transfer bytes (memcpy events carry no size)" in trace.run_info.missing_signals) is says
    assert _col(trace, "transfers", "bytes") == [copy_bytes or call_bytes or 0]

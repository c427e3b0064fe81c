"""Bounded-memory conversion of GPU Kineto traces: operators, runtime calls and device work made slice by slice
(`ingest/readers/_kineto_gpu.py`) give the same tables as the whole linker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.errors import TraceFormatError
from portscope.ingest.readers import _kineto_join, _kineto_ops, _kineto_rows, _kineto_sweep
from portscope.ingest.readers._spill import DiskColumn
from portscope.ingest.readers.kineto import read_kineto
from portscope.ingest.trace import read_trace, write_trace

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "kineto"
SLICED = ["engine_slices", "ops", "runtime_calls", "signals", "transfers"]


def _x(cat: str, name: str, tid: int, ts: float, dur: float, pid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _op(name: str, tid: int, ts: float, dur: float) -> dict:
    return _x("cpu_op", name, tid, ts, dur, **{"External id": 1, "Input Dims": [[2]], "Input type": ["float"], "Ev Idx": 0})


def _call(name: str, tid: int, ts: float, dur: float, corr: int | None = None, **args: object) -> dict:
    return _x("cuda_runtime", name, tid, ts, dur, **({"correlation": corr} if corr is not None else {}), **args)


def _work(cat: str, name: str, ts: float, dur: float, corr: int, **args: object) -> dict:
    return _x(cat, name, 7, ts, dur, pid=0, correlation=corr, device=0, stream=7, **args)


# Thread 1: A linear [0, 20) holds B addmm [2, 12) (launches gemm); C copy_ [22, 30) copies 4096 bytes host to
# device; D item [32, 40) holds E _local_scalar_dense [33, 39), which copies to the host (bytes only on the runtime
# call) and syncs a stream; G empty [46, 48) launches nothing. E comes before D in the file (thread 1 is out of
# order). Thread 2: F add [5, 15) launches add_kernel. A device sync [42, 44) runs outside any operator; a memset
# at 45 has no runtime call. An annotation "step" covers [0, 31).
EVENTS = [
    _op("aten::linear", 1, 0, 20),
    _op("aten::addmm", 1, 2, 10),
    _op("aten::copy_", 1, 22, 8),
    _op("aten::_local_scalar_dense", 1, 33, 6),
    _op("aten::item", 1, 32, 8),
    _op("aten::add", 2, 5, 10),
    _op("aten::empty", 1, 46, 2),
    _x("user_annotation", "step", 1, 0, 31),
    _call("cudaLaunchKernel", 1, 3, 2, 101),
    _work("kernel", "gemm", 6, 4, 101),
    _call("cudaLaunchKernel", 2, 6, 1, 104),
    _work("kernel", "add_kernel", 8, 2, 104),
    _call("cudaMemcpyAsync", 1, 23, 3, 102),
    _work("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 27, 2, 102, bytes=4096),
    _call("cudaMemcpyAsync", 1, 34, 2, 103, bytes=8),
    _work("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 36, 1, 103),
    _call("cudaStreamSynchronize", 1, 36, 2),
    _call("cudaDeviceSynchronize", 1, 42, 2),
    _work("gpu_memset", "Memset (Device)", 45, 1, 999, bytes=64),
]


def _write(path: Path, events: list) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "t"}, indent=1))
    return path


def _sizes(monkeypatch: pytest.MonkeyPatch, ops: int, bucket: int, chunk: int, hold: int | None = None, window: int | None = None) -> None:
    """Operators (and runtime calls, device slices) per slice held in memory, events sorted (runtime calls joined) per
    bucket, runtime calls or device slices per batch; values of a per-event link column held in memory before it
    spills, and read at a time by a gather or scatter."""
    monkeypatch.setattr(_kineto_ops, "SPILL_ROWS", ops)
    monkeypatch.setattr(_kineto_rows, "SPILL_ROWS", ops)
    monkeypatch.setattr(_kineto_sweep, "BUCKET_EVENTS", bucket)
    monkeypatch.setattr(_kineto_sweep, "CHUNK_ROWS", chunk)
    if hold is not None:
        monkeypatch.setattr(_kineto_sweep, "HOLD_ROWS", hold)
    if window is not None:
        monkeypatch.setattr(_kineto_sweep, "WINDOW_ROWS", window)


def _file_io(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of the link columns' reads from and writes into their temporary files (not appends)."""
    counts = {"pread": 0, "pwrite": 0}
    pread, pwrite = DiskColumn._pread, DiskColumn._pwrite

    def counted_pread(self: DiskColumn, view: memoryview, offset: int) -> int:
        counts["pread"] += 1
        return pread(self, view, offset)

    def counted_pwrite(self: DiskColumn, view: memoryview, offset: int) -> None:
        counts["pwrite"] += 1
        pwrite(self, view, offset)

    monkeypatch.setattr(DiskColumn, "_pread", counted_pread)
    monkeypatch.setattr(DiskColumn, "_pwrite", counted_pwrite)
    return counts


def _same_tables(tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch, sizes: tuple, **options: bool) -> tuple:
    """(the sliced conversion at these sizes, it written and read back); asserts every table equals the whole one's."""
    whole = read_kineto(source, sliced=False, **options)
    assert not whole.slices
    write_trace(whole, tmp_path / "whole.arrow")
    _sizes(monkeypatch, *sizes)
    sliced = read_kineto(source, sliced=True, **options)
    assert sorted(sliced.slices) == SLICED
    write_trace(sliced, tmp_path / "sliced.arrow")
    got, want = read_trace(tmp_path / "sliced.arrow"), read_trace(tmp_path / "whole.arrow")
    for name in want.tables:
        assert got[name].equals(want[name]), name
    assert sliced.content_hash() == whole.content_hash() == got.content_hash()  # one run id, however it was made
    return sliced, got


@pytest.mark.parametrize("spill", [(None, None), (2, 3)])
def test_hand_written_gpu_trace_sliced_gives_the_hand_computed_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    spill: tuple) -> None:  # fmt: skip
    # slices of 2 operators, 13 operators and runtime calls sorted in buckets of ~3 (6 runtime calls joined in 2
    # correlation buckets), batches of 2 rows; then also the link columns (parents, regions, names, the operator of
    # each runtime call, the runtime call of each device slice...) spilled past 2 values, read and written 3 at a time
    io = _file_io(monkeypatch)
    sliced, got = _same_tables(tmp_path, _write(tmp_path / "gpu.json", EVENTS), monkeypatch, (2, 3, 2, *spill))
    if spill[0] is not None:
        assert io["pread"] > 0 and io["pwrite"] > 0  # gathers and scatters went through the files
    assert [len(list(sliced.slices[name].batches())) for name in SLICED] == [4 + 3, 4, 3, 1 + 1, 1]
    ops = got["ops"].to_pydict()
    assert ops["name"] == ["aten::linear", "aten::addmm", "aten::copy_", "aten::_local_scalar_dense", "aten::item",
                           "aten::add", "aten::empty"]  # fmt: skip
    assert ops["region_id"] == [1, 1, 1, 0, 0, 1, 0]  # started inside "step" [0, 31)
    assert ops["placement"] == ["device"] * 6 + ["host"]  # A holds B, D holds E: launched through them
    assert ops["device"] == ["cuda:0"] * 6 + ["cpu"]

    calls = got["runtime_calls"].to_pydict()
    assert calls["name"] == ["cudaLaunchKernel", "cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemcpyAsync",
                             "cudaStreamSynchronize", "cudaDeviceSynchronize"]  # fmt: skip
    assert calls["op_id"] == [1, 5, 2, 3, 3, None]
    assert calls["region_id"] == [1, 1, 1, 0, 0, 0]
    assert calls["correlation"] == [101, 104, 102, 103, None, None]
    assert calls["start_ns"] == [3000, 6000, 23000, 34000, 36000, 42000]

    lanes = got["engine_slices"].to_pydict()  # host lanes (top-level operators) first, then device work in file order
    assert lanes["op_id"] == [0, 2, 4, 5, 6, 1, 5, 2, 3, None]
    assert lanes["engine"] == ["host", "host", "host", "host thread 2", "host",
                               "stream 7", "stream 7", "DMA h2d", "DMA d2h", "stream 7"]  # fmt: skip
    assert lanes["engine_kind"] == ["host"] * 5 + ["stream", "stream", "dma_h2d", "dma_d2h", "stream"]
    assert lanes["kind"] == ["compute"] * 7 + ["transfer", "transfer", "compute"]
    assert lanes["name"][5:] == ["gemm", "add_kernel", "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)",
                                 "Memset (Device)"]  # fmt: skip
    assert lanes["bytes"] == [None] * 7 + [4096, 8, 64]  # the DtoH copy's size from its runtime call
    assert lanes["correlation"] == [None] * 5 + [101, 104, 102, 103, 999]
    assert lanes["start"] == [0, 22000, 32000, 5000, 46000, 6000, 8000, 27000, 36000, 45000]
    assert lanes["region_id"] == [1, 1, 0, 1, 0, 1, 1, 1, 0, 0]
    assert got["engine_slices"].column("engine").combine_chunks().dictionary.to_pylist() == [
        "host", "host thread 2", "stream 7", "DMA h2d", "DMA d2h"]  # fmt: skip

    transfers = got["transfers"].to_pydict()
    assert transfers["direction"] == ["h2d", "d2h"] and transfers["bytes"] == [4096, 8]
    assert transfers["op_id"] == [2, 3] and transfers["region_id"] == [1, 0]
    assert transfers["src_device"] == ["cpu", "cuda:0"] and transfers["dst_device"] == ["cuda:0", "cpu"]

    signals = got["signals"].to_pydict()  # sync operators, runtime syncs outside them, then copies
    assert signals["kind"] == ["sync", "sync", "transfer/h2d", "transfer/d2h"]
    assert signals["op_id"] == [4, None, 2, 3]
    assert signals["op_name"] == ["aten::item", "cudaDeviceSynchronize", "aten::copy_", "aten::_local_scalar_dense"]
    assert signals["reason"] == ["item", "cudaDeviceSynchronize", "Memcpy HtoD (Pageable -> Device)",
                                 "Memcpy DtoH (Device -> Pageable)"]  # fmt: skip
    assert signals["bytes"] == [0, 0, 4096, 8]
    assert signals["time_ns"] == [32000, 42000, 27000, 36000]
    assert signals["region_id"] == [0, 0, 1, 0]


# Python frames (with_stack=True): main [0, 50) and forward [0, 21) over A and B, copy_in [21.5, 30.5) under main over
# C, main alone over E, D and G; on thread 2 run [4, 16) over F. The linker numbers stacks as its one sweep meets them,
# thread by thread: (main, forward) 0, (main, copy_in) 1, (main) 2, then thread 2's (run) 3, although run's operator
# starts (at 5) before copy_in's (at 22) and a bucket sweep by time meets it earlier.
FRAMES = [
    _x("python_function", "train.py(10): main", 1, 0, 50),
    _x("python_function", "model.py(3): forward", 1, 0, 21),
    _x("python_function", "model.py(8): copy_in", 1, 21.5, 9),
    _x("python_function", "worker.py(5): run", 2, 4, 12),
]


@pytest.mark.parametrize("spill", [(None, None), (2, 3)])
def test_python_frames_give_the_linkers_call_sites_and_stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill: tuple) -> None:
    source = _write(tmp_path / "py.json", [*EVENTS[:7], *FRAMES, *EVENTS[7:]])
    _, got = _same_tables(tmp_path, source, monkeypatch, (2, 3, 2, *spill))  # 17 events sorted in buckets of ~3
    ops = got["ops"].to_pydict()  # A B C E D F G
    assert ops["stack_id"] == [0, 0, 1, 2, 2, 3, 2]
    sites = ops["call_site"]
    assert [site.split(" ")[0] for site in sites] == ["model.py:3", "model.py:3", "model.py:8", "train.py:10", "train.py:10",
                                                       "worker.py:5", "train.py:10"]  # fmt: skip
    assert got["frames"].column("function").to_pylist() == ["forward", "main", "copy_in", "run"]
    assert got["stacks"].column("frame_ids").to_pylist() == [[0, 1], [2, 1], [1], [3]]  # innermost first
    transfers = got["transfers"].to_pydict()
    assert transfers["stack_id"] == [1, 2] and transfers["call_site"] == [sites[2], sites[3]]  # copies of C and E
    signals = got["signals"].to_pydict()  # item's sync (D), the device sync (no operator), the copies of C and E
    assert signals["stack_id"] == [2, None, 1, 2]
    assert signals["call_site"] == [sites[4], None, sites[2], sites[3]]


def test_a_single_bucket_and_slice_give_the_same_tables(tmp_path: Path) -> None:
    source = _write(tmp_path / "gpu.json", EVENTS)
    whole, sliced = read_kineto(source, sliced=False), read_kineto(source, sliced=True)
    assert sorted(sliced.slices) == SLICED
    for name in whole.tables:
        assert sliced[name].equals(whole[name]), name


@pytest.mark.parametrize(("name", "sizes"), [("cuda_diff_test", (4000, 5000, 3000, 3000, 7000)), ("cuda_sampled_rank0", (500, 700, 300)),
                                           ("cuda_alexnet_small", (100, 150, 40, 50, 70))])  # fmt: skip
def test_real_gpu_trace_sliced_equals_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, sizes: tuple) -> None:
    source = FIXTURES / f"{name}.json.gz"
    if not source.exists():
        pytest.skip("../shared/fixtures/kineto is absent")
    _same_tables(tmp_path, source, monkeypatch, sizes)  # cuda_diff_test: 31k operators, 21k runtime calls, 11 buckets
    if name == "cuda_diff_test":
        _, got = _same_tables(tmp_path, source, monkeypatch, sizes, infer_fallback=True)
        assert got["signals"].column("kind").to_pylist().count("dispatch/cpu_fallback") > 1000


def test_cpu_trace_with_python_frames_sliced_equals_whole(kineto_cpu: dict[str, Path], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A real torch.profiler export (tiny Llama, CPU, with_stack=True): frames, operators, no device work."""
    sliced, got = _same_tables(tmp_path, kineto_cpu["shapes_stack"], monkeypatch, (300, 500, 200))
    assert got["stacks"].num_rows > 10 and got["ops"].column("stack_id").null_count < got["ops"].num_rows
    assert got["transfers"].num_rows == 0 and got["runtime_calls"].num_rows == 0


def test_fields_of_another_json_type_join_nothing_and_crash_neither_path(tmp_path: Path) -> None:
    """A runtime call's correlation or a kernel's device given as a list (found by mutating a real trace: both
    paths raised TypeError); a category given as an object is refused with the event's place."""
    events = [*EVENTS]
    events[8] = _call("cudaLaunchKernel", 1, 3, 2, [101])  # gemm's launch: its correlation a list
    events[11] = {**events[11], "args": {**events[11]["args"], "device": [0]}}  # add_kernel's device: a list -> its pid
    source = _write(tmp_path / "odd.json", events)
    whole, sliced = read_kineto(source, sliced=False), read_kineto(source, sliced=True)
    for name in whole.tables:
        assert sliced[name].equals(whole[name]), name
    lanes = whole["engine_slices"].to_pydict()
    assert lanes["op_id"][5:7] == [None, 5]  # gemm: no launch to join; add_kernel still joined to aten::add
    assert whole["ops"].column("placement").to_pylist()[:2] == ["host", "host"]  # linear and addmm launched nothing
    bad = [*EVENTS, {**_op("aten::mul", 1, 50, 1), "cat": {"cpu_op": 1}}]
    with pytest.raises(TraceFormatError, match=r"event 19 \('aten::mul'\): 'cat' is dict, expected a string"):
        read_kineto(_write(tmp_path / "bad.json", bad), sliced=True)


def test_inferred_fallbacks_sliced_equal_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--infer-fallback: a leaf operator with a float input on a launching thread that launched nothing (mul, and
    empty's thread-mate) is a fallback; empty does no device work by design; F's thread launched too."""
    events = [*EVENTS, _op("aten::mul", 1, 48.5, 1), _op("aten::sub", 3, 49, 1)]  # sub: a thread that launched nothing
    source = _write(tmp_path / "fb.json", events)
    whole = read_kineto(source, infer_fallback=True)
    _sizes(monkeypatch, 2, 3, 2, 2, 3)
    sliced = read_kineto(source, infer_fallback=True, sliced=True)
    assert sorted(sliced.slices) == SLICED
    for name in whole.tables:
        assert sliced[name].equals(whole[name]), name
    assert sliced.content_hash() == whole.content_hash()
    ops = sliced["ops"].to_pydict()
    assert ops["placement"][6:] == ["host", "fallback", "host"]  # empty, mul, sub
    lanes = sliced["engine_slices"].to_pydict()
    assert [(o, k) for o, k in zip(lanes["op_id"], lanes["kind"], strict=True) if k == "fallback"] == [(7, "fallback")]
    signals = sliced["signals"].to_pydict()  # the fallback first, then the syncs and copies as before
    assert signals["kind"] == ["dispatch/cpu_fallback", "sync", "sync", "transfer/h2d", "transfer/d2h"]
    assert signals["op_id"][0] == 7 and signals["bytes"][0] == 8 and signals["time_ns"][0] == 48500  # float32 x2


@pytest.mark.parametrize("bucket", [100, 1])
def test_device_work_joins_the_last_runtime_call_of_its_correlation(monkeypatch: pytest.MonkeyPatch, bucket: int) -> None:
    """`_kineto_join.device_calls`: in one bucket, or one bucket a call (ids 5, 7, 9 in separate buckets), the
    columns spilled past 2 values: the last call holding an id wins (as a dict filled in row order), an id no call
    holds and a missing id join nothing."""
    _sizes(monkeypatch, 1000, bucket, 2, 2, 3)
    runtime, device = _kineto_rows.RowColumns(_kineto_rows.RUNTIME_FIELDS), _kineto_rows.RowColumns(_kineto_rows.DEVICE_FIELDS)
    for ts, corr, size in [(0.0, 5, 16), (1.0, 7, None), (2.0, 5, 32), (3.0, None, None), (4.0, 9, 8)]:
        runtime.append((ts, 1.0, "cudaLaunchKernel", 1, 1, corr, None, size))
    for ts, corr in [(10.0, 5), (11.0, 9), (12.0, 8), (13.0, None), (14.0, 7)]:
        device.append((ts, 1.0, "kernel", "k", 0, 7, corr, None))
    calls, sizes = _kineto_join.device_calls(runtime, device)
    assert calls.read(0, 5).tolist() == [2, 4, -1, -1, 1]
    assert calls.on_disk == 4  # the first 4 rows in the file: the join wrote them there through its scatter
    assert sizes.read(0, 5).tolist() == [16, _kineto_rows.NONE_INT, 32, _kineto_rows.NONE_INT, 8]

"""The rule layer on tiny hand-written traces: each expected figure is counted by hand from the events below."""

from __future__ import annotations

import json
from pathlib import Path

from portscope.ingest.assemble import assemble
from portscope.ingest.convert import load_any
from portscope.ingest.events import EventColumns, EventKind, Logged, Translated
from portscope.ingest.rules import RULES
from portscope.ingest.trace import RunInfo


def _kineto(tmp_path: Path, events: list[dict], name: str = "run.json", **top: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"schemaVersion": 1, "traceName": "/tmp/tmpab12cd/recorder.json", **top,
                                "traceEvents": events}))  # fmt: skip
    return path


def _op(name: str, ts: float, dur: float, tid: int = 1) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def _rt(name: str, ts: float, dur: float, corr: int | None = None, **args: object) -> dict:
    a = {"correlation": corr, **args} if corr is not None else dict(args)
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": a}


def _dev(cat: str, name: str, ts: float, dur: float, corr: int, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr, **args}}  # fmt: skip


def _signals(trace) -> list[tuple[str, str, str]]:  # noqa: ANN001
    s = trace["signals"].to_pydict()
    return sorted(zip(s["kind"], s["reason"], s["op_name"], strict=True))


def test_rules_are_registered_once_each() -> None:
    assert [r.name for r in RULES] == ["transfer", "sync", "online-compile", "ai-cpu", "inferred-fallback", "host-bounce",
                                       "logged-fallback", "counted-recompile", "compiled-graph", "compiler-phase",
                                       "graph-break", "recompile", "dataflow"]


def test_an_item_on_a_host_tensor_is_no_sync(tmp_path: Path) -> None:
    # A GPU trace (one kernel) where aten::item [0, 10) reads a CPU tensor: no runtime call inside it, no sync.
    # aten::item [20, 30) waits: cudaStreamSynchronize [22, 26) inside its aten::_local_scalar_dense [21, 29).
    # aten::nonzero [40, 50) on a CPU tensor: nothing inside, no sync.
    path = _kineto(tmp_path, [
        _op("aten::item", 0, 10), _op("aten::_local_scalar_dense", 1, 8),
        _op("aten::item", 20, 10), _op("aten::_local_scalar_dense", 21, 8), _rt("cudaStreamSynchronize", 22, 4),
        _op("aten::nonzero", 40, 10),
        _op("aten::mm", 60, 10), _rt("cudaLaunchKernel", 61, 2, corr=5), _dev("kernel", "gemm", 63, 5, 5),
    ])  # fmt: skip
    trace = load_any(path)
    assert _signals(trace) == [("sync", "item", "aten::item")]
    assert trace["signals"].to_pydict()["op_id"] == [2]  # the second aten::item (ops in file order: 0..5)


def test_a_synchronous_device_to_host_copy_call_is_a_sync(tmp_path: Path) -> None:
    # ROCm's .item(): hipMemcpyWithStream (kind 2, device->host) inside aten::_local_scalar_dense, copy labelled DtoD
    path = _kineto(tmp_path, [
        _op("aten::item", 0, 20), _op("aten::_local_scalar_dense", 1, 18),
        _rt("hipMemcpyWithStream", 2, 10, corr=9, kind="2", bytes="4"),
        _dev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 4, 2, 9, bytes=4),
    ])  # fmt: skip
    trace = load_any(path)
    assert _signals(trace) == [("sync", "item", "aten::item"), ("transfer/d2h", "Memcpy DtoD (Device -> Device); "
                               "hipMemcpyWithStream kind 2: d2h", "aten::_local_scalar_dense")]  # fmt: skip
    t = trace["transfers"].to_pydict()
    assert t["direction"] == ["d2h"] and t["bytes"] == [4] and t["src_device"] == ["cuda:0"] and t["dst_device"] == ["cpu"]


def test_rocm_copy_direction_comes_from_the_runtime_calls_kind(tmp_path: Path) -> None:
    # roctracer labels all three "Memcpy DtoD"; the hipMemcpy calls say 1 (HtoD), 1 (HtoD) and 3 (DtoD).
    path = _kineto(tmp_path, [
        _op("aten::copy_", 0, 10), _rt("hipMemcpyWithStream", 1, 5, corr=1, kind=1, size=2560),
        _dev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 2, 1, 1),
        _op("aten::copy_", 20, 10), _rt("hipMemcpyAsync", 21, 5, corr=2, kind="1", size=64),
        _dev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 22, 1, 2),
        _op("aten::clone", 40, 10), _rt("hipMemcpyAsync", 41, 5, corr=3, kind=3, size=8),
        _dev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 42, 1, 3),
    ])  # fmt: skip
    t = load_any(path)["transfers"].to_pydict()
    assert t["direction"] == ["h2d", "h2d", "d2d"] and t["bytes"] == [2560, 64, 8]


def test_a_trace_without_device_activity_converts(tmp_path: Path) -> None:
    # runtime calls and operators only (a profiler run without CUDA activities): a synchronize inside aten::item is a
    # sync; a cudaMemcpy with kind 2 (no device event recorded) is a device->host transfer of 16 bytes
    path = _kineto(tmp_path, [
        _op("aten::item", 0, 20), _rt("cudaStreamSynchronize", 5, 5),
        _op("aten::to", 30, 20), _rt("cudaMemcpy", 31, 10, corr=3, kind=2, bytes=16),
    ])  # fmt: skip
    trace = load_any(path)
    assert sorted(trace["signals"].to_pydict()["kind"]) == ["sync", "sync", "transfer/d2h"]
    assert trace["transfers"].to_pydict()["bytes"] == [16]
    assert any("no device activity recorded" in m for m in trace.run_info.missing_signals)


def test_memory_instants_give_each_region_its_peak(tmp_path: Path) -> None:
    # ProfilerStep#1 [0, 100) holds allocations to 1,000 then 3,000 then a free to 2,000 bytes on cuda:0, and a host
    # allocation (Device Type 0) of 9,999 that a device run's peak does not count; ProfilerStep#2 [100, 200): 2,500.
    def mem(ts: float, nbytes: int, total: int, device_type: int = 1, device_id: int = 0) -> dict:
        return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                "args": {"Bytes": nbytes, "Total Allocated": total, "Total Reserved": 4096, "Addr": 1,
                         "Device Type": device_type, "Device Id": device_id}}  # fmt: skip

    ann = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": 100 * (i - 1),
            "dur": 100, "args": {}} for i in (1, 2)]  # fmt: skip
    path = _kineto(tmp_path, [
        *ann, _op("aten::mm", 1, 2), _rt("cudaLaunchKernel", 1.5, 1, corr=1), _dev("kernel", "gemm", 3, 1, 1),
        mem(10, 1000, 1000), mem(20, 2000, 3000), mem(30, -1000, 2000), mem(40, 9999, 9999, 0, -1),
        mem(150, 500, 2500),
    ])  # fmt: skip
    regions = load_any(path)["regions"].to_pydict()
    peaks = dict(zip(regions["name"], regions["peak_memory_bytes"], strict=True))
    assert peaks == {"run.json": 3000, "ProfilerStep#1": 3000, "ProfilerStep#2": 2500}
    slices = load_any(path)["engine_slices"].to_pydict()
    lane = [(n, b) for e, n, b in zip(slices["engine"], slices["name"], slices["bytes"], strict=True) if e == "memory cuda:0"]
    # led by the total before the first event (1000 - 1000 bytes), then each total; the reserved total beside it
    assert [b for n, b in lane if n == "allocated"] == [0, 1000, 3000, 2000, 2500]
    assert [b for n, b in lane if n == "reserved"] == [4096] * 4


def test_the_root_region_is_named_after_the_file_given(tmp_path: Path) -> None:
    path = _kineto(tmp_path, [_op("aten::add", 0, 1)], name="my_run.json")
    assert load_any(path)["regions"].to_pydict()["name"] == ["my_run.json"]  # not traceName's temporary path
    assert load_any(path, name="uploaded.json")["regions"].to_pydict()["name"] == ["uploaded.json"]  # an upload's copy


def _translated(events: EventColumns) -> Translated:
    return Translated(events, RunInfo(), root_name="t", root_device="npu:0", device_names={0: "npu:0"})


def test_a_compile_nested_in_a_compile_call_counts_once() -> None:
    ev = EventColumns()
    ev.add(EventKind.OP, "aten::add", 1, 1, 0, 100)
    ev.add(EventKind.RUNTIME, "aclopCompileAndExecute", 1, 1, 10, 50)
    ev.add(EventKind.RUNTIME, "opCompile", 1, 1, 12, 30)  # inside the call above: the same compile
    ev.add(EventKind.RUNTIME, "opCompile", 1, 1, 70, 10)  # on its own: a second compile
    trace = assemble(_translated(ev))
    assert _signals(trace) == [("dispatch/recompile", "online-aclopCompileAndExecute", "aten::add"),
                               ("dispatch/recompile", "online-opCompile", "aten::add")]  # fmt: skip
    assert trace["compiles"].to_pydict()["compile_ns"] == [50, 10]


def test_ascend_runtime_copies_are_transfers() -> None:
    # aclrtMemcpy calls with no device event: kind 1 (host->device, 128 B), no kind but a name that says d2h, and
    # no kind at all (direction unknown, still counted)
    ev = EventColumns()
    ev.add(EventKind.OP, "aten::copy_", 1, 1, 0, 100)
    ev.add(EventKind.RUNTIME, "aclrtMemcpy", 1, 1, 10, 5, copy_kind=1, bytes=128)
    ev.add(EventKind.RUNTIME, "aclrtMemcpyAsync", 1, 1, 20, 5)
    ev.add(EventKind.RUNTIME, "cuMemcpyDtoH", 1, 1, 30, 5, bytes=8)
    trace = assemble(_translated(ev))
    t = trace["transfers"].to_pydict()
    assert t["direction"] == ["h2d", "unknown", "d2h"] and t["bytes"] == [128, 0, 8]
    assert t["dst_device"] == ["npu:0", "npu:0", "cpu"]


def test_a_device_wait_syncs_at_its_launching_operator() -> None:
    # a driver wait on the device (a plugin's sync slice) linked to aten::to's runtime call by correlation 4
    ev = EventColumns()
    ev.add(EventKind.OP, "aten::to", 1, 1, 0, 100)
    ev.add(EventKind.RUNTIME, "rbln_run", 1, 1, 10, 5, correlation=4)
    ev.add(EventKind.WAIT, "rbln_sync", 0, 3, 20, 30, correlation=4, device=0)
    trace = assemble(_translated(ev))
    assert _signals(trace) == [("sync", "rbln_sync", "aten::to")]


def test_an_item_that_copies_its_scalar_back_syncs_without_a_synchronize_call(tmp_path: Path) -> None:
    # CUPTI recorded the copy but no cudaStreamSynchronize: the d2h copy inside aten::_local_scalar_dense is the
    # evidence (the host returns the copied value); a d2h copy inside aten::copy_ alone is a transfer, not a sync
    path = _kineto(tmp_path, [
        _op("aten::item", 0, 20), _op("aten::_local_scalar_dense", 1, 18), _rt("cudaMemcpyAsync", 2, 3, corr=1),
        _dev("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 4, 2, 1, bytes=8),
        _op("aten::copy_", 30, 20), _rt("cudaMemcpyAsync", 31, 3, corr=2),
        _dev("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 33, 2, 2, bytes=64),
    ])  # fmt: skip
    trace = load_any(path)
    assert sorted(trace["signals"].to_pydict()["kind"]) == ["sync", "transfer/d2h", "transfer/d2h"]
    assert trace["transfers"].to_pydict()["bytes"] == [8, 64]


def test_the_events_as_an_arrow_table_of_the_written_schema() -> None:
    from portscope.ingest.events import EVENTS

    ev = EventColumns()
    ev.add(EventKind.OP, "aten::mm", 1, 7, 0, 100, shapes="2x3;3x4", dtypes="float32;float32", bytes_in=72)
    ev.add(EventKind.COPY, "Memcpy DtoH", 0, 3, 40, 5, correlation=9, bytes=64, device=0, stream=3)
    table = ev.table()
    assert table.schema.equals(EVENTS)
    rows = table.to_pylist()
    assert [(r["kind"], r["name"], r["pid"], r["tid"], r["start_ns"], r["dur_ns"]) for r in rows] == [
        ("op", "aten::mm", "1", "7", 0, 100), ("copy", "Memcpy DtoH", "0", "3", 40, 5)]
    assert (rows[0]["shapes"], rows[0]["bytes_in"], rows[0]["correlation"]) == ("2x3;3x4", 72, None)
    assert (rows[1]["correlation"], rows[1]["bytes"], rows[1]["device"], rows[1]["shapes"]) == (9, 64, 0, None)


def test_operators_a_log_places_on_the_host_are_fallbacks() -> None:
    # four lines of a backend's log: aten::neg ran on the host (no reason, a call site and its source), sdpa on the
    # host (not aligned to 32), aten::rsqrt on the host (dtype float32) with no usable time, aten::mm on device 0:
    # three fallbacks, the device placement none
    ev = EventColumns()
    ev.add(EventKind.PLACEMENT, "aten::neg", "log", "log", 0, device=-1,
           logged=ev.log(Logged(call_site="m.py:85 (rotate_half)", source="return -x")))
    ev.add(EventKind.PLACEMENT, "sdpa", "log", "log", 10, device=-1, logged=ev.log(Logged(reason="length 7 not aligned to 32")))
    ev.add(EventKind.PLACEMENT, "aten::rsqrt", "log", "log", 10, device=-1,
           logged=ev.log(Logged(reason="dtype float32 is not supported", timed=False)))
    ev.add(EventKind.PLACEMENT, "aten::mm", "log", "log", 20, device=0)
    trace = assemble(_translated(ev))
    s = trace["signals"].to_pydict()
    assert s["kind"] == ["dispatch/cpu_fallback"] * 3 and s["op_name"] == ["aten::neg", "sdpa", "aten::rsqrt"]
    assert s["reason"] == [None, "unaligned (length 7 not aligned to 32)",
                           "dtype-not-supported (dtype float32 is not supported)"]  # fmt: skip
    assert s["note"] == [None, "try: pad to a multiple of 32", "try: compute in the device's dtype (e.g. float16)"]
    assert s["call_site"] == ["m.py:85 (rotate_half)", None, None] and s["time_ns"] == [0, 10, None]
    assert trace["frames"].to_pydict()["source"] == ["return -x"]
    assert trace["ops"].num_rows == 0 and trace["engine_slices"].num_rows == 0  # placements are not drawn


def test_compile_log_records_make_graphs_graph_breaks_and_recompiles() -> None:
    # frame 0/0: a graph, a logged graph break and a restart reason in its metrics (the same break: not counted
    # again); frame 1/0: only a restart reason (older torch): a break. Frame 0/1: an unreadable recompile record and
    # its metrics' reason (not counted again); frame 1/1: only its metrics' reason: a recompile.
    # 1 graph, 2 graph breaks, 2 recompiles.
    ev = EventColumns()

    def add(record: str, frame_key: str, at: int, **logged: object) -> None:
        code = ev.log(Logged(record=record, frame_key=frame_key, compile_id=frame_key, **logged))  # type: ignore[arg-type]
        ev.add(EventKind.COMPILE, "step", "log", "log", at, logged=code)

    add("dynamo_output_graph", "0/0", 5, op_count=3, compile_ns=700, frame="s.py:1 (step)")
    add("dynamo_graph_break_reason", "0/0", 1, reason="print", call_site="s.py:3 (step)",
        stack=(("s.py", 3, "step"), ("s.py", 9, "<module>")))
    add("restart_reasons", "0/0", 6, reason="print")
    add("restart_reasons", "1/0", 8, reason="data-dependent")
    add("recompile_reasons", "0/1", 10)
    add("recompile_reason", "0/1", 11, reason="x size mismatch")
    add("recompile_reason", "1/1", 12, reason="y rank mismatch")
    trace = assemble(_translated(ev))
    c = trace["compiles"].to_pydict()
    assert c["kind"] == ["graph", "graph_break", "graph_break", "recompile", "recompile"]  # in file order
    assert c["reason"] == [None, "print", "data-dependent", "unknown (payload unreadable)", "y rank mismatch"]
    assert c["compile_id"] == ["0/0", "0/0", "1/0", "0/1", "1/1"] and c["time_ns"] == [5, 1, 8, 10, 12]
    assert (c["op_count"][0], c["compile_ns"][0], c["frame"][0], c["key"][0]) == (3, 700, "s.py:1 (step)", "step")
    s = trace["signals"].to_pydict()
    assert s["kind"] == ["compile/graph_break", "compile/graph", "compile/graph_break", "compile/recompile",
                         "compile/recompile"]  # in time order  # fmt: skip
    assert s["call_site"][0] == "s.py:3 (step)" and s["stack_id"] == [0, None, None, None, None]
    assert trace["stacks"].to_pydict()["frame_ids"] == [[0, 1]]


def test_compile_records_of_a_frame_in_its_process_its_last_graph_and_no_restart_of_dynamos_own() -> None:
    # two processes' logs (pid: the log file), each numbering frames from 0/0. a.log: frame 0/0 logs a graph at
    # attempt 0 and attempt 1 (700 ns, the frame's time) and a restart reason that is Dynamo's own (its class): one
    # graph, no break; frame 1/0 a break record. b.log: frame 1/0 a restart reason in words and no break record of
    # its own (a.log's 1/0 is another frame): a break. b.log's 0/1 a recompile reason in its metrics, a.log's 0/1 a
    # recompile record: a recompile each. Expected: 1 graph, 2 breaks, 2 recompiles.
    ev = EventColumns()

    def add(log: str, record: str, compile_id: str, at: int, **logged: object) -> None:
        code = ev.log(Logged(record=record, frame_key=compile_id.split("_")[0], compile_id=compile_id, **logged))  # type: ignore[arg-type]
        ev.add(EventKind.COMPILE, "step", log, "log", at, logged=code)

    add("a.log", "dynamo_output_graph", "0/0", 1, op_count=3, compile_ns=700)
    add("a.log", "dynamo_output_graph", "0/0_1", 2, op_count=3, compile_ns=700)
    add("a.log", "restart_reasons", "0/0_1", 3, reason="<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>")
    add("a.log", "dynamo_graph_break_reason", "1/0", 4, reason="print")
    add("b.log", "restart_reasons", "1/0_1", 5, reason="data-dependent")
    add("a.log", "recompile_reasons", "0/1", 6, reason="x size mismatch")
    add("b.log", "recompile_reason", "0/1", 7, reason="y rank mismatch")
    trace = assemble(_translated(ev))
    c = trace["compiles"].to_pydict()
    assert list(zip(c["kind"], c["compile_id"], c["compile_ns"], c["reason"], strict=True)) == [
        ("graph", "0/0_1", 700, None), ("graph_break", "1/0", None, "print"),
        ("graph_break", "1/0_1", None, "data-dependent"), ("recompile", "0/1", None, "x size mismatch"),
        ("recompile", "0/1", None, "y rank mismatch")]  # fmt: skip
    assert sorted(trace["signals"].column("kind").cast("string").to_pylist()) == [
        "compile/graph", "compile/graph_break", "compile/graph_break", "compile/recompile", "compile/recompile"]


def _copies(trace) -> list[tuple[str, int]]:  # noqa: ANN001
    t = trace["transfers"].to_pydict()
    return sorted(zip(t["direction"], t["bytes"], strict=True))


def test_every_copy_label_kineto_writes_has_its_direction(tmp_path: Path) -> None:
    # CUPTI's copy kinds as Kineto names them, none of the calls saying a kind: HtoH crosses no device boundary (no
    # transfer), an array (A) is device memory, "Unknown" says no direction.
    labels = ["Memcpy HtoH (Pinned -> Pinned)", "Memcpy AtoH (Array -> Pageable)", "Memcpy HtoA (Pageable -> Array)",
              "Memcpy DtoA (Device -> Array)", "Memcpy AtoA (Array -> Array)", "Memcpy Unknown (Unknown -> Unknown)"]
    events = [_op("aten::copy_", 0, 100)]
    for i, label in enumerate(labels):
        events += [_rt("cudaMemcpyAsync", 10 * i + 1, 2, corr=i + 1), _dev("gpu_memcpy", label, 10 * i + 3, 2, i + 1,
                                                                           bytes=1 << (10 + i))]
    trace = load_any(_kineto(tmp_path, events))
    assert _copies(trace) == [("d2d", 8192), ("d2d", 16384), ("d2h", 2048), ("h2d", 4096), ("unknown", 32768)]


def test_a_default_kind_copy_labelled_device_to_device_has_no_known_direction(tmp_path: Path) -> None:
    # kind 4 (hipMemcpyDefault): the runtime chose from the pointers, roctracer's "DtoD" says nothing -> unknown;
    # kind names and spaced digit strings read as the numbers they name: DeviceToHost (2) -> d2h, " 1 " -> h2d.
    trace = load_any(_kineto(tmp_path, [
        _op("aten::copy_", 0, 100),
        _rt("hipMemcpyAsync", 1, 2, corr=1, kind=4), _dev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 3, 1, 1, bytes=64),
        _rt("hipMemcpyAsync", 11, 2, corr=2, kind="hipMemcpyDeviceToHost"),
        _dev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 13, 1, 2, bytes=128),
        _rt("hipMemcpyAsync", 21, 2, corr=3, kind=" 1 "), _dev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 23, 1, 3, bytes=256),
        _rt("hipMemcpyAsync", 31, 2, corr=4, kind="4"), _dev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 33, 1, 4, bytes=512),
    ]))  # fmt: skip
    assert _copies(trace) == [("d2h", 128), ("h2d", 256), ("h2d", 512), ("unknown", 64)]


def test_driver_and_per_thread_stream_synchronize_calls_are_syncs(tmp_path: Path) -> None:
    # Three aten::item, each waiting by another call: the per-thread-stream build's, and two driver calls.
    trace = load_any(_kineto(tmp_path, [
        _op("aten::item", 0, 10), _rt("cudaStreamSynchronize_ptsz", 2, 4),
        _op("aten::item", 20, 10), _rt("cuStreamSynchronize", 22, 4),
        _op("aten::item", 40, 10), _rt("cuCtxSynchronize", 42, 4),
        _op("aten::mm", 60, 10), _rt("cudaLaunchKernel", 61, 2, corr=5), _dev("kernel", "gemm", 63, 5, 5),
    ]))  # fmt: skip
    assert _signals(trace) == [("sync", "item", "aten::item")] * 3


def _ann(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}


def _compiles(trace) -> list[tuple[str, int]]:  # noqa: ANN001
    c = trace["compiles"].to_pydict()
    return list(zip(c["reason"], c["compile_ns"], strict=True))


def test_compiler_phases_of_an_older_torch_are_one_compile_not_regions(tmp_path: Path) -> None:
    # torch before 2.6: dynamo_timed phases as user_annotation. ProfilerStep#0 [0, 10000) holds one frame compile
    # _compile.compile_inner [10, 5010) with two phases nested in it, the autotuner's cudaDeviceSynchronize [400, 500)
    # inside the innermost; then the compiled code runs (a kernel) and aten::item [6000, 6100) waits in
    # cudaStreamSynchronize [6010, 6090). Expected: regions run.json and ProfilerStep#0 only; one compile, 5000 us;
    # one sync (the item's), none for the autotuner's wait.
    trace = load_any(_kineto(tmp_path, [
        _ann("ProfilerStep#0", 0, 10000), _ann("_compile.compile_inner (dynamo_timed)", 10, 5000),
        _ann("OutputGraph.call_user_compiler (dynamo_timed)", 100, 4800),
        _ann("InductorBenchmarker.benchmark_gpu (dynamo_timed)", 300, 1000),
        _op("aten::mm", 310, 50), _rt("cudaLaunchKernel", 320, 10, corr=1), _dev("kernel", "gemm", 330, 20, 1),
        _rt("cudaDeviceSynchronize", 400, 100),
        _op("aten::item", 6000, 100), _rt("cudaStreamSynchronize", 6010, 80),
    ]))  # fmt: skip
    assert trace["regions"].to_pydict()["name"] == ["run.json", "ProfilerStep#0"]
    assert _compiles(trace) == [("_compile.compile_inner", 5_000_000)]
    assert _signals(trace) == [("compile/graph", "_compile.compile_inner", "_compile.compile_inner (dynamo_timed)"),
                               ("sync", "item", "aten::item")]


def test_compiler_phases_as_operators_and_their_data_markers(tmp_path: Path) -> None:
    # torch 2.6 and later (as torch 2.13 writes a cold torch.compile): phases are cpu_ops "<phase> (dynamo_timed)",
    # each beside a short user_annotation "<phase>_data: [fn_name=..., ]compile_id=0/0". Two frames compiled, on
    # [100, 2100) and [5000, 5500), each with a nested phase; a user region "cold" [0, 3000) around the first.
    trace = load_any(_kineto(tmp_path, [
        _ann("cold", 0, 3000),
        _ann("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/0", 90, 5),
        _op("_compile.compile_inner (dynamo_timed)", 100, 2000), _ann("bytecode_tracing_data: compile_id=0/0", 150, 5),
        _op("bytecode_tracing (dynamo_timed)", 160, 300), _op("aten::add", 200, 10),
        _ann("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=1/0", 4990, 5),
        _op("_compile.compile_inner (dynamo_timed)", 5000, 500), _op("compile_fx_inner (dynamo_timed)", 5100, 300),
    ]))  # fmt: skip
    assert trace["regions"].to_pydict()["name"] == ["run.json", "cold"]
    assert _compiles(trace) == [("_compile.compile_inner", 2_000_000), ("_compile.compile_inner", 500_000)]


def test_operators_the_compiler_runs_while_tracing_are_no_inferred_fallbacks(tmp_path: Path) -> None:
    # infer_fallback asked for; the thread launches device work (aten::mm). aten::add [200, 210) runs inside the
    # compiler's phase [100, 2100) (tracing on fake tensors): no fallback; aten::mul [3000, 3010) outside launched
    # nothing: the one inferred fallback.
    def typed_op(name: str, ts: float, dur: float) -> dict:
        return dict(_op(name, ts, dur), args={"Input Dims": [[2, 2], [2, 2]], "Input type": ["float", "float"]})

    trace = load_any(_kineto(tmp_path, [
        _op("_compile.compile_inner (dynamo_timed)", 100, 2000), typed_op("aten::add", 200, 10),
        typed_op("aten::mul", 3000, 10),
        typed_op("aten::mm", 4000, 10), _rt("cudaLaunchKernel", 4001, 2, corr=1), _dev("kernel", "gemm", 4003, 5, 1),
    ]), infer_fallback=True)  # fmt: skip
    assert [(k, o) for k, _, o in _signals(trace)] == [("compile/graph", "_compile.compile_inner (dynamo_timed)"),
                                                      ("dispatch/cpu_fallback", "aten::mul")]


def test_a_cold_torch_compile_recorded_by_the_profiler(tmp_path: Path) -> None:
    # tests/fixtures/kineto/cpu_cold_compile.json.gz: torch 2.13 on the CPU, a 3-layer MLP under torch.compile called
    # twice inside record_function ranges "cold" and "warm". The file holds 54 cpu_ops "<phase> (dynamo_timed)", the
    # outermost _compile.compile_inner at ts 5491915878996.012 for 4789700.16 us, all inside "cold", and 55
    # user_annotations "<phase>_data: ...compile_id=0/0" beside them; "cold" and "warm" are its only other annotations.
    trace = load_any(Path(__file__).parents[1] / "fixtures" / "kineto" / "cpu_cold_compile.json.gz")
    regions = trace["regions"].to_pydict()
    assert regions["name"] == ["cpu_cold_compile.json.gz", "cold", "warm"]
    c = trace["compiles"].to_pydict()
    assert c["reason"] == ["_compile.compile_inner"] and c["kind"] == ["graph"]
    assert abs(c["compile_ns"][0] - 4_789_700_160) <= 1
    assert regions["name"][regions["region_id"].index(c["region_id"][0])] == "cold"

"""Export -> convert round trip: converting a Chrome export (`write_chrome`) gives the devices, the device work and the
per-region signal counts of the trace that was exported. Every expected figure was counted once from the fixture's
raw JSON events (a plain JSON reader, no portscope code), as written next to it; a region's counts include the
regions nested in it, and the converted export has one region more: its own file's, around the exported ones."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from portscope.ingest.convert import load_any
from portscope.ingest.export_chrome import HOST_PID, LAUNCH, write_chrome
from portscope.ingest.summary import summarize
from portscope.ingest.trace import Trace

KINETO = Path(__file__).resolve().parents[1] / "fixtures" / "kineto"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "kineto"


def _round_trip(path: Path, tmp_path: Path, **options: object) -> tuple[Trace, Trace, list[dict]]:
    """(the trace converted from `path`, its export converted again, the export's events)."""
    source = load_any(path, **options)
    out = write_chrome(source, tmp_path / "export.json")
    return source, load_any(out, **options), json.loads(out.read_text())["traceEvents"]


def _regions(trace: Trace) -> list[tuple[str, dict[str, int]]]:
    """(name, signal counts by kind) of every region, in region order."""
    return [(name, {s.signal: s.count for s in summarize(trace, rid, lines=False).signals})
            for rid, name in zip(trace["regions"].column("region_id").to_pylist(),
                                 trace["regions"].column("name").to_pylist(), strict=True)]  # fmt: skip


def _signal_regions(trace: Trace) -> list[tuple[str, dict[str, int]]]:
    return [(name, counts) for name, counts in _regions(trace) if counts]


def test_cuda_trace_keeps_device_syncs_and_transfers(tmp_path: Path) -> None:
    # cuda_alexnet_small: 98 device events (73 kernels and 2 memsets on stream 7, 6 kernels and 1 memset on stream
    # 20, 16 "Memcpy HtoD" copies), all "device": 0, 98 distinct correlations; 16 cudaStreamSynchronize and
    # 5 cudaDeviceSynchronize; 164 of the 359 cpu_ops enclose (on their thread) a runtime call whose correlation
    # some device event holds. By user_annotation (calls by their start):
    total = {"transfer/h2d": 16, "sync": 21}
    regions = [
        ("[param|cuda]", {"transfer/h2d": 16, "sync": 20}),
        ("[param|pytorch.model.alex_net|0|0|0]", {"sync": 4}),
        ("[param|pytorch.model.alex_net|0|0|0|warmup|forward]", {"sync": 2}),
        ("[param|clear_cache]", {}),
        ("[param|pytorch.model.alex_net|0|0|0|warmup|forward]", {"sync": 2}),
        ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", {"sync": 2}),
        ("[param|clear_cache]", {}),
        ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", {"sync": 2}),
    ]
    source, back, events = _round_trip(KINETO / "cuda_alexnet_small.json.gz", tmp_path)
    assert source.run_info.devices == back.run_info.devices == ["cpu", "cuda:0"]
    assert _regions(source) == [("cuda_alexnet_small.json.gz", total), *regions]
    assert _regions(back) == [("export.json", total), ("cuda_alexnet_small.json.gz", total), *regions]
    for trace in (source, back):
        assert collections.Counter(trace["ops"].column("device").to_pylist()) == {"cpu": 195, "cuda:0": 164}
        assert collections.Counter(trace["engine_slices"].column("engine").to_pylist()) == {
            "host": 147, "stream 7": 75, "stream 20": 7, "DMA h2d": 16}  # fmt: skip
    # the export itself: device work as Kineto writes it, and the runtime calls the reader links it by
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert len(device) == 98 and {(e["pid"], e["args"]["device"]) for e in device} == {(0, 0)}
    assert collections.Counter(e["args"].get("stream") for e in device if e["cat"] == "kernel") == {7: 75, 20: 7}
    calls = [e for e in events if e.get("cat") == "cuda_runtime"]
    assert collections.Counter(e["name"] for e in calls) == {LAUNCH: 98, "cudaStreamSynchronize": 16,
                                                             "cudaDeviceSynchronize": 5}  # fmt: skip
    assert {e["args"]["correlation"] for e in calls if e["name"] == LAUNCH} == {e["args"]["correlation"] for e in device}
    assert {e["pid"] for e in calls} == {HOST_PID}


def test_every_copy_direction_and_the_syncs_of_item(tmp_path: Path) -> None:
    # hta_sampled_2ranks/sampled_rank-0: 40 gpu_memcpy (24 "Memcpy HtoD", 8 "Memcpy DtoH", 8 "Memcpy DtoD"), all
    # "device": 0; no synchronize call, but 3 aten::item each enclosing a call that launched a "Memcpy DtoH" (a sync:
    # the scalar read back), 2 in ProfilerStep#551's sdd_preprocess_splits, 1 in ProfilerStep#552's. 73
    # user_annotations, 40 of them without a copy or an item; the others (copies by their launching call's start):
    total = {"transfer/d2h": 8, "transfer/h2d": 24, "transfer/d2d": 8, "sync": 3}
    regions = [
        ("ProfilerStep#551", {"transfer/d2h": 4, "transfer/h2d": 12, "transfer/d2d": 4, "sync": 2}),
        ("## sdd_preprocess_splits ##", {"transfer/d2h": 4, "transfer/h2d": 3, "sync": 2}),
        ("## data_load ##", {"transfer/h2d": 8}),
        ("## forward ##", {"transfer/d2d": 2}),
        ("DistributedDataParallel.forward", {"transfer/d2d": 2}),
        ("## DisaggregatedTowerArchAwaitable wait() ##", {"transfer/d2d": 1}),
        ("## PooledEmbeddingsAwaitable wait() ##", {"transfer/d2d": 1}),
        ("## Request wait() ##", {"transfer/d2d": 1}),
        ("## decoder fp8 None ##", {"transfer/d2d": 1}),
        ("## sdd_preprocess_tensors ##", {"transfer/h2d": 1}),
        ("## KJTListSplitsAwaitable wait() ##", {"transfer/h2d": 1}),
        ("## KJTAllToAllSplitsAwaitable wait() ##", {"transfer/h2d": 1}),
        ("## all2all_data:recat_permute_gen ##", {"transfer/h2d": 1}),
        ("## optimizer ##", {"transfer/d2d": 2}),
        ("Optimizer.step#Shampoo.step", {"transfer/d2d": 2}),
        ("ProfilerStep#552", {"transfer/d2h": 4, "transfer/h2d": 12, "transfer/d2d": 4, "sync": 1}),
        ("## sdd_preprocess_splits ##", {"transfer/d2h": 3, "transfer/h2d": 3, "sync": 1}),
        ("## data_load ##", {"transfer/h2d": 8}),
        ("## forward ##", {"transfer/d2d": 3}),
        ("DistributedDataParallel.forward", {"transfer/d2d": 3}),
        ("## DisaggregatedTowerArchAwaitable wait() ##", {"transfer/d2d": 1}),
        ("## PooledEmbeddingsAwaitable wait() ##", {"transfer/d2d": 1}),
        ("## Request wait() ##", {"transfer/d2d": 1}),
        ("## decoder fp8 None ##", {"transfer/d2d": 1}),
        ("## sdd_preprocess_tensors ##", {"transfer/h2d": 1}),
        ("## KJTListSplitsAwaitable wait() ##", {"transfer/h2d": 1}),
        ("## KJTAllToAllSplitsAwaitable wait() ##", {"transfer/h2d": 1}),
        ("## all2all_data:recat_permute_gen ##", {"transfer/h2d": 1}),
        ("## optimizer ##", {"transfer/d2d": 1}),
        ("Optimizer.step#Shampoo.step", {"transfer/d2d": 1}),
        ("## sdd_wait_tensors ##", {"transfer/d2h": 1}),
        ("## KJTListAwaitable wait() ##", {"transfer/d2h": 1}),
        ("## KJTAllToAllTensorsAwaitable wait() ##", {"transfer/d2h": 1}),
    ]
    source, back, _ = _round_trip(KINETO / "hta_sampled_2ranks" / "sampled_rank-0.json.gz", tmp_path)
    assert source.run_info.devices == back.run_info.devices == ["cpu", "cuda:0"]
    assert _signal_regions(source) == [("sampled_rank-0.json.gz", total), *regions]
    assert _signal_regions(back) == [("export.json", total), ("sampled_rank-0.json.gz", total), *regions]
    assert len(_regions(source)) == 1 + 73 and len(_regions(back)) == 2 + 73
    for trace in (source, back):
        assert collections.Counter(trace["transfers"].column("direction").to_pylist()) == {"h2d": 24, "d2h": 8, "d2d": 8}


def test_inferred_fallback_and_a_device_index_other_than_0(tmp_path: Path) -> None:
    # rocm_mi250_small: 14 kernels and 2 "Memcpy HtoD" copies, all "device": 2, both copies launched inside
    # ProfilerStep#1; 1 hipDeviceSynchronize outside every user_annotation. Inferred fallback: the leaf cpu_ops on a
    # thread whose operators launch device work, that take a float tensor, launched nothing and are not of a kind
    # that never computes: 2 aten::normal_, in ProfilerStep#1.
    total = {"dispatch/cpu_fallback": 2, "transfer/h2d": 2, "sync": 1}
    regions = [("ProfilerStep#1", {"dispatch/cpu_fallback": 2, "transfer/h2d": 2}), ("Optimizer.step#SGD.step", {}),
               ("ProfilerStep#2", {})]  # fmt: skip
    source, back, _ = _round_trip(KINETO / "rocm_mi250_small.json.gz", tmp_path, infer_fallback=True)
    assert source.run_info.devices == back.run_info.devices == ["cpu", "cuda:2"]
    assert _regions(source) == [("rocm_mi250_small.json.gz", total), *regions]
    assert _regions(back) == [("export.json", total), ("rocm_mi250_small.json.gz", total), *regions]


def test_cpu_trace_gains_no_device(tmp_path: Path) -> None:
    # cpu_cold_compile: no device event; 57 user_annotations: "cold", "warm" and 55 compiler metadata spans
    # ("<phase>_data: compile_id=0/0"), read as the compiler's spans (not regions) on the compiler's lane.
    source, back, events = _round_trip(KINETO / "cpu_cold_compile.json.gz", tmp_path)
    assert source.run_info.devices == back.run_info.devices == ["cpu"]
    assert not [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "cuda_runtime")]
    for trace in (source, back):
        assert [name for name, _ in _regions(trace)][-2:] == ["cold", "warm"]
        assert collections.Counter(trace["engine_slices"].column("engine_kind").to_pylist()) == {"compiler": 55, "host": 4}
        # 3,133 of the 3,172 cpu_ops start inside "dynamo" (ts 5491915878713.121, dur 4791388.951, on tid 12771, the
        # only thread), whose marker "dynamo_data: compile_id=0/0" starts inside it on that thread: the compiler's
        placements = collections.Counter(trace["ops"].column("placement").to_pylist())
        assert placements["compiler"] == 3133 and sum(placements.values()) == 3172
    compiler_spans = {e["tid"] for e in events if e.get("cat") == "user_annotation" and "compile_id=" in e["name"]}
    assert compiler_spans == {e["tid"] for e in events if e.get("cat") == "cpu_op"}  # on their operators' thread


def test_copy_direction_from_its_call_and_memory_lanes(tmp_path: Path) -> None:
    # bert_small_mi300: 60 kernels and 1 gpu_memcpy, all "device": 2; the copy is labelled "Memcpy DtoD" but its
    # launching hipMemcpyWithStream says kind 2 (device to host), 1 B, inside aten::_local_scalar_dense inside
    # aten::item (a sync); 2 hipDeviceSynchronize, one in the user_annotation ProfilerStep#6 (with the item), one
    # outside it; 236 [memory] events (drawn as memory lanes: not device work).
    path = SHARED / "bert_small_mi300.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    source, back, events = _round_trip(path, tmp_path)
    assert source.run_info.devices == back.run_info.devices == ["cpu", "cuda:2"]
    assert sum(e.get("cat") == "kernel" for e in events) == 60
    for trace in (source, back):
        transfers = trace["transfers"].to_pydict()
        assert transfers["direction"] == ["d2h"] and transfers["bytes"] == [1]
        signals = trace["signals"].to_pydict()
        kinds = collections.Counter(zip(signals["kind"], signals["reason"], strict=True))
        assert kinds[("sync", "item")] == 1 and kinds[("sync", "hipDeviceSynchronize")] == 2
    regions = [("ProfilerStep#6", {"transfer/d2h": 1, "sync": 2})]
    assert _regions(source) == [("bert_small_mi300.json.gz", {"transfer/d2h": 1, "sync": 3}), *regions]
    assert _regions(back) == [("export.json", {"transfer/d2h": 1, "sync": 3}),
                              ("bert_small_mi300.json.gz", {"transfer/d2h": 1, "sync": 3}), *regions]  # fmt: skip

"""The rule layer on real traces recorded by others (../shared/fixtures/kineto). Every expected figure was counted
from the raw JSON events by hand (a plain JSON reader, no portscope code), as written next to it."""

from __future__ import annotations

import collections
from pathlib import Path

from portscope.ingest.convert import load_any


def _counts(path: Path) -> tuple[collections.Counter, dict[str, list], int | None]:
    trace = load_any(path)
    s = trace["signals"].to_pydict()
    kinds = collections.Counter(zip(s["kind"], s["reason"], strict=True))
    return kinds, trace["transfers"].to_pydict(), trace["regions"].to_pydict()["peak_memory_bytes"][0]


def test_bert_on_an_mi300(shared_fixtures: Path) -> None:
    # 1 gpu_memcpy labelled "Memcpy DtoD" (correlation 810), launched by hipMemcpyWithStream with kind "2" (DtoH),
    # bytes "1", inside aten::_local_scalar_dense inside aten::item: a d2h of 1 B, and the item's sync (a synchronous
    # device->host copy call). 2 hipDeviceSynchronize outside any operator. 236 [memory] events on device type 6
    # (HIP): the largest Total Allocated is 146,394,112.
    kinds, transfers, peak = _counts(shared_fixtures / "kineto" / "bert_small_mi300.json.gz")
    assert transfers["direction"] == ["d2h"] and transfers["bytes"] == [1]
    assert kinds[("sync", "item")] == 1 and kinds[("sync", "hipDeviceSynchronize")] == 2
    assert sum(n for (k, _), n in kinds.items() if k == "sync") == 3
    assert peak == 146_394_112


def test_bert_on_an_h100(shared_fixtures: Path) -> None:
    # 1 "Memcpy DtoH (Device -> Pinned)" of 1 B; cudaStreamSynchronize inside aten::_local_scalar_dense < aten::item
    # < aten::is_nonzero (one sync, reason item), 2 cudaDeviceSynchronize outside operators; peak 101,305,344 on CUDA
    kinds, transfers, peak = _counts(shared_fixtures / "kineto" / "bert_small_h100.json.gz")
    assert transfers["direction"] == ["d2h"] and transfers["bytes"] == [1]
    assert kinds[("sync", "item")] == 1 and kinds[("sync", "cudaDeviceSynchronize")] == 2
    assert peak == 101_305_344


def test_a_rocm_trace_with_host_to_device_copies(shared_fixtures: Path) -> None:
    # 2 "Memcpy HtoD" (correlations 117, 123) launched by hipMemcpyWithStream kind "1", size "2560"; 1 hipDeviceSynchronize
    kinds, transfers, peak = _counts(shared_fixtures / "kineto" / "rocm_mi250_small.json.gz")
    assert transfers["direction"] == ["h2d", "h2d"] and transfers["bytes"] == [2560, 2560]
    assert kinds == {("transfer/h2d", "Memcpy HtoD (Host -> Device)"): 2, ("sync", "hipDeviceSynchronize"): 1}
    assert peak is None  # recorded without profile_memory


def test_syncs_of_a_real_cuda_job_need_a_synchronize_inside(shared_fixtures: Path) -> None:
    # cudaStreamSynchronize: 36 inside aten::to (.cpu() copies, reason the call), 18 inside aten::item and 6 inside
    # aten::item under fbgemm::permute_sparse_features (24 items, reason item); 1 cudaDeviceSynchronize outside
    # operators. The file holds 30 aten::item: the other 6 wait for nothing (no synchronize, no copy inside).
    kinds, _, _ = _counts(shared_fixtures / "kineto" / "cuda_diff_control.json.gz")
    syncs = {reason: n for (kind, reason), n in kinds.items() if kind == "sync"}
    assert syncs == {"cudaStreamSynchronize": 36, "item": 24, "cudaDeviceSynchronize": 1}

"""Communication kernels (a collective's or a peer transfer's) are drawn as communication, not compute."""

from __future__ import annotations

import json
from pathlib import Path

from portscope.ingest.convert import load_any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kineto" / "hta_sampled_2ranks"


def _kinds(trace) -> dict[str, set[str]]:  # noqa: ANN001
    slices = trace["engine_slices"].to_pydict()
    out: dict[str, set[str]] = {}
    for name, kind in zip(slices["name"], slices["kind"], strict=True):
        out.setdefault(name, set()).add(kind)
    return out


def test_nccl_kernels_of_a_tiny_trace(tmp_path: Path) -> None:
    def launch(corr: int, ts: int) -> dict:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 2,
                "args": {"correlation": corr}}

    def kernel(name: str, corr: int, ts: int) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 5,
                "args": {"correlation": corr, "device": 0, "stream": 7}}

    events = [
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        launch(1, 1), kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 1, 20),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 12, "dur": 5},
        launch(2, 13), kernel("ampere_sgemm_128x64_nn", 2, 30),
        {"ph": "X", "cat": "cpu_op", "name": "aten::all_gather_into_tensor", "pid": 1, "tid": 1, "ts": 40, "dur": 5},
        launch(3, 41), kernel("elementwise_kernel", 3, 50),  # named as no collective: compute, whatever its op
    ]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"traceEvents": events}))
    kinds = _kinds(load_any(path))
    assert kinds["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"] == {"communication"}
    assert kinds["ampere_sgemm_128x64_nn"] == {"compute"} and kinds["elementwise_kernel"] == {"compute"}


def test_the_public_two_rank_trace_draws_its_nccl_kernels_as_communication() -> None:
    # sampled_rank-0.json.gz: 1,154 kernels, 10 of them ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t (by grep)
    slices = load_any(FIXTURES / "sampled_rank-0.json.gz")["engine_slices"].to_pydict()
    comm = [n for n, k in zip(slices["name"], slices["kind"], strict=True) if k == "communication"]
    assert len(comm) == 10 and all(n.startswith("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") for n in comm)

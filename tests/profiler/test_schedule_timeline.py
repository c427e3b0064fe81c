"""Measured timelines (profiler/timeline.py): host lanes from a real torch.profiler run, GPU lanes from Kineto fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from portscope.ingest.schedule_summary import schedule_summaries  # noqa: E402
from portscope.profiler.events import OpEvent  # noqa: E402
from portscope.profiler.region import explain  # noqa: E402
from portscope.profiler.timeline import from_kineto_file, timeline_columns  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kineto"


def test_host_lanes_from_torch_profiler() -> None:
    x = torch.randn(64, 64)
    with explain("mm", timeline=True) as region:
        y = x @ x
        (y + 1).relu()
    trace = region.to_trace()
    df = trace["engine_slices"].to_pandas()
    ops = trace["ops"].to_pandas()
    assert not df.empty and set(df.engine) == {"host"} and set(df.engine_kind) == {"host"}
    assert (df.region_id == 0).all()
    linked = df[df.op_id.notna()]
    by_id = dict(zip(ops.op_id, ops.name, strict=True))
    # every recorded operator's top-level Kineto slice links back to it
    names = {by_id[int(i)] for i in linked.op_id}
    assert {"aten::mm", "aten::add.Tensor", "aten::relu"} <= names
    region_start, region_end = 0, int(trace["regions"].column("dur_ns")[0].as_py())
    assert (df.start >= region_start - 1_000_000).all() and (df.start <= region_end + 1_000_000).all()
    for _, row in linked.iterrows():  # the slice covers the recorded op's time (clocks aligned)
        op = ops[ops.op_id == row.op_id].iloc[0]
        assert row.start - 100_000 <= op.start_ns <= row.start + row.dur + 100_000
    (summary,) = schedule_summaries(trace)
    assert summary.engines[0].engine == "host" and summary.engines[0].busy > 0


def test_nested_regions_share_one_profiler() -> None:
    x = torch.randn(32, 32)
    with explain("outer", timeline=True) as outer:
        x.sin()
        with explain("inner", timeline=True):
            x.cos()
    df = outer.to_trace()["engine_slices"].to_pandas()
    ops = outer.to_trace()["ops"].to_pandas()
    names = dict(zip(ops.op_id, ops.name, strict=True))
    rows = {names[int(r.op_id)]: r.region_id for r in df.itertuples() if r.op_id == r.op_id}
    assert rows["aten::sin"] == 0 and rows["aten::cos"] == 1


def test_gpu_lanes_from_recorded_kineto() -> None:
    tl = from_kineto_file(FIXTURES / "cuda_alexnet_small.json.gz")
    assert tl.device and tl.runtime
    # recorded ops: pretend the region recorded every conv and linear the trace shows
    convs = [(k, o) for k, o in enumerate(tl.ops) if o[2] in ("aten::cudnn_convolution", "aten::addmm", "aten::copy_")]
    events = [OpEvent(op_id=i, name=o[2], packet=o[2], inputs=[], outputs=[], start_ns=o[0], dur_ns=o[1],
                      module=f"model.m{i}") for i, (_, o) in enumerate(convs)]
    end = max(s + d for s, d, *_ in tl.device)
    cols = timeline_columns(tl, [(0, 0, end, events)])
    engines = set(cols["engine"])
    assert any(e.startswith("stream ") for e in engines)
    assert "DMA h2d" in engines
    kinds = dict(zip(cols["engine"], cols["engine_kind"], strict=True))
    assert kinds["DMA h2d"] == "dma_h2d" and all(kinds[e] == "stream" for e in engines if e.startswith("stream"))
    device_rows = [i for i, k in enumerate(cols["engine_kind"]) if k in ("stream", "dma_h2d", "dma_d2h")]
    assert all(cols["correlation"][i] is not None for i in device_rows)
    memcpy = [i for i in device_rows if cols["engine_kind"][i] == "dma_h2d"]
    assert all(cols["bytes"][i] for i in memcpy)
    linked = [i for i in device_rows if cols["op_id"][i] is not None]
    assert linked, "kernels link to the operator that launched them"
    assert all(cols["module"][i] == f"model.m{cols['op_id'][i]}" for i in linked)
    launched = {events[cols["op_id"][i]].name for i in linked}
    assert launched & {"aten::cudnn_convolution", "aten::addmm", "aten::copy_"}
    assert "dispatch" in set(cols["waited_on"])  # a stream idle until its kernel was launched


def test_rocm_fixture_has_stream_lanes() -> None:
    tl = from_kineto_file(FIXTURES / "rocm_mi250_small.json.gz")
    cols = timeline_columns(tl, [(0, -(1 << 40), 1 << 40, [])])
    assert any(k == "stream" for k in cols["engine_kind"])
    assert any(k == "host" for k in cols["engine_kind"])


class _OldKinetoEvent:
    """A torch < 2.6 `_KinetoEvent`: no activity_type()."""

    def __init__(self, name: str, device: str, correlation: int = 0, annotation: bool = False) -> None:
        self._name, self._device, self._correlation, self._annotation = name, device, correlation, annotation

    def name(self) -> str:
        return self._name

    def device_type(self) -> str:
        return f"DeviceType.{self._device}"

    def correlation_id(self) -> int:
        return self._correlation

    def is_user_annotation(self) -> bool:
        return self._annotation


def test_activity_is_inferred_on_torch_without_activity_type() -> None:
    from portscope.profiler.timeline import activity_of

    cases = {
        ("aten::mm", "CPU", 0, False): "cpu_op",
        ("cudaLaunchKernel", "CPU", 7, False): "cuda_runtime",
        ("hipMemcpyAsync", "CPU", 8, False): "cuda_runtime",
        ("my region", "CPU", 0, True): "user_annotation",
        ("Memcpy HtoD (Pageable -> Device)", "CUDA", 7, False): "gpu_memcpy",
        ("Memset (Device)", "CUDA", 9, False): "gpu_memset",
        ("void gemm_kernel<float>", "CUDA", 7, False): "kernel",
    }
    assert {key: activity_of(_OldKinetoEvent(*key)) for key in cases} == cases

"""Predicted engine schedules on a tiny random-init Llama under fp16-npu (profiler/schedule.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from portscope.ingest.export_chrome import write_chrome  # noqa: E402
from portscope.ingest.schedule_summary import schedule_summaries  # noqa: E402
from portscope.ingest.trace import read_trace  # noqa: E402
from portscope.profiler.demo import prompt, tiny_llama  # noqa: E402
from portscope.profiler.events import TensorInfo  # noqa: E402
from portscope.profiler.predict import reset_program_cache  # noqa: E402
from portscope.profiler.recorder import Decoder  # noqa: E402
from portscope.profiler.region import explain_steady, save  # noqa: E402
from portscope.profiler.schedule import (  # noqa: E402
    ScheduleOps,
    compiled_view,
    estimate_flops,
    ops_from_events,
    schedule,
)
from portscope.profiler.targets import load_target  # noqa: E402

TARGETS = Path(__file__).resolve().parents[2] / "profiler" / "targets"


def _forward(target: str = "fp16-npu"):  # noqa: ANN202
    reset_program_cache()
    model, ids = tiny_llama(), prompt(7)
    with torch.no_grad():
        return explain_steady(lambda: model(input_ids=ids), warmup=2, return_cold=True, name="forward", target=target)


@pytest.fixture(scope="module")
def regions():  # noqa: ANN201
    return _forward()


@pytest.fixture(scope="module")
def trace_path(regions, tmp_path_factory):  # noqa: ANN001, ANN201
    return save(list(regions), tmp_path_factory.mktemp("sched") / "run.arrow")


def _slices(trace, name: str):  # noqa: ANN001, ANN202
    rid = trace.region_names().index(name)
    df = trace["engine_slices"].to_pandas()
    return df[df.region_id == rid]


def _ops(region):  # noqa: ANN001, ANN202
    decoder = Decoder()
    events = [decoder.event(i, raw, region.start_ns) for i, raw in enumerate(region.raw)]
    return ops_from_events(events, region.prediction.outcomes, region.prediction.deps, region.prediction.compiles)


def test_flops_from_shapes() -> None:
    t = lambda *s: TensorInfo(tuple(s), (), "float16", "npu:0", 2)  # noqa: E731
    assert estimate_flops("aten::mm", [t(7, 128), t(128, 64)], [t(7, 64)]) == 2 * 7 * 64 * 128
    assert estimate_flops("aten::addmm", [t(64), t(7, 128), t(128, 64)], [t(7, 64)]) == 2 * 7 * 64 * 128
    assert estimate_flops("aten::bmm", [t(4, 7, 32), t(4, 32, 7)], [t(4, 7, 7)]) == 2 * 4 * 7 * 7 * 32
    sdpa = estimate_flops("aten::_scaled_dot_product_flash_attention_for_cpu", [t(1, 4, 7, 32), t(1, 4, 9, 32), t(1, 4, 9, 32)], [])
    assert sdpa == 2 * 4 * 7 * 9 * 64
    assert estimate_flops("aten::add.Tensor", [t(7, 128), t(7, 128)], [t(7, 128)]) == 7 * 128


def test_dependencies_recorded_by_tensor_identity(regions) -> None:  # noqa: ANN001
    cold, _ = regions
    names = [raw[0].name() for raw in cold.raw]
    assert len(cold.prediction.deps) == len(cold.raw)
    # every matrix product reads something an earlier op of the region computed (hidden states)
    mms = [i for i, n in enumerate(names) if n in ("aten::mm", "aten::addmm")]
    assert mms and all(cold.prediction.deps[i] for i in mms)
    assert all(j < i for i in range(len(names)) for j in (cold.prediction.deps[i] or ()))
    assert any(d is None for d in cold.prediction.deps.values())  # views: no work


# The first RMSNorm of the forward (model.layers.0.input_layernorm) on 7 tokens of hidden size 128 in float16, worked
# by hand under fp16-npu (dispatch 25,000 ns; host 20 flops/ns; DMA 16 B/ns + 5,000 ns; vector 2,000 flops/ns,
# 400 B/ns + 1,000 ns). Its input lives on the device, so it is copied back first: 7 x 128 x 2 B = 1,792 B, 5,000 +
# 1,792 / 16 = 5,112 ns. On the host, a cast to float32, pow, mean, add eps, rsqrt, mul, a cast back: each 25,000 ns
# plus its output elements / 20 (7 x 128 = 896: + 44.8; the mean, add and rsqrt give 7: + 0.35), truncated. The
# weight multiply runs on the device: dispatched (25,000 ns), its 1,792 B input copied over (5,112 ns), then
# 1,000 + max(896 / 2,000, (1,792 + 1,792 + 128 x 2) B / 400) = 1,009 ns on the vector engine.
FIRST_NORM = [
    ("dma_d2h", "transfer", "d2h aten::_to_copy", 5_112, 1_792),
    ("host", "fallback", "aten::_to_copy", 25_044, None),
    ("host", "fallback", "aten::pow.Tensor_Scalar", 25_044, None),
    ("host", "fallback", "aten::mean.dim", 25_000, None),
    ("host", "fallback", "aten::add.Tensor", 25_000, None),
    ("host", "fallback", "aten::rsqrt", 25_000, None),
    ("host", "fallback", "aten::mul.Tensor", 25_044, None),
    ("host", "fallback", "aten::_to_copy", 25_044, None),
    ("dispatch", "dispatch", "aten::mul.Tensor", 25_000, None),
    ("dma_h2d", "transfer", "h2d aten::mul.Tensor", 5_112, 1_792),
    ("vector", "compute", "aten::mul.Tensor", 1_009, None),
]
# The cold forward compiles one program per distinct (operator, shapes, strides, dtypes) it issues to the device;
# layer 1 repeats layer 0's keys, v_proj is k_proj's shape (2 KV heads x 32 = 64 outputs), up_proj gate_proj's,
# o_proj q_proj's, the second norm's weight multiply the first's: 12 programs, 40 ms each.
COLD_PROGRAMS = sorted([
    "compile aten::embedding", "compile aten::arange", "compile aten::mul.Tensor",  # the norm's weight multiply
    "compile aten::mm", "compile aten::mm",  # q_proj (128 outputs), k_proj (64)
    "compile aten::mul.Tensor", "compile aten::mul.Tensor",  # rotary: q x cos (4 heads), k x cos (2 heads)
    "compile aten::add.Tensor",  # the residual add
    "compile aten::mm", "compile aten::silu", "compile aten::mul.Tensor", "compile aten::mm",  # the MLP
])  # fmt: skip


def _rows(df, module: str) -> list[tuple]:  # noqa: ANN001
    part = df[(df.module == module) & (df.engine != "compiler")]
    return [(e, k, n, int(d), None if b != b else int(b))
            for e, k, n, d, b in zip(part.engine, part.kind, part.name, part.dur, part.bytes, strict=True)]


def test_eager_schedule_shows_dispatch_fallbacks_transfers_and_cold_compiles(trace_path) -> None:  # noqa: ANN001
    trace = read_trace(trace_path)
    cold, warm = _slices(trace, "forward:cold"), _slices(trace, "forward:warm")
    for df in (cold, warm):
        assert set(df.engine) >= {"host", "dispatch", "dma_h2d", "dma_d2h", "matrix", "vector"}
        device = df[df.engine.isin(["matrix", "vector"])]
        assert len(df[df.engine == "dispatch"]) == len(device)  # one dispatch per eager device op
        assert "dispatch" in set(device.waited_on.dropna())  # device engines idle on host dispatch
        assert _rows(df, "model.layers.0.input_layernorm") == FIRST_NORM
        # host slices: the 54 fallbacks (sample_traces/README) and the 14 casts of the dtype bounces
        fallbacks = df[(df.engine == "host") & (df.kind == "fallback")]
        assert len(fallbacks) == 54 + 14
        # a round trip: a d2h before a host fallback, an h2d after it into a device op
        assert "transfer" in set(fallbacks.waited_on.dropna())
        assert "fallback" in set(df[df.engine == "dma_h2d"].waited_on.dropna())
        assert df.op_id.notna().all() and df.module.notna().any()
        assert df.module.str.contains(r"model\.layers\.\d+\.self_attn\.q_proj").any()
    compiles = cold[cold.engine == "compiler"]
    assert sorted(compiles.name) == COLD_PROGRAMS and set(compiles.dur) == {40_000_000}
    assert len(warm[warm.engine == "compiler"]) == 0
    s_cold, s_warm = schedule_summaries(trace)
    assert s_cold.critical_by_engine["compiler"] > 0.9 * s_cold.critical_path
    assert "compiler" not in s_warm.critical_by_engine
    assert s_warm.critical_by_engine.get("host", 0) + s_warm.critical_by_engine.get("dispatch", 0) > 0.8 * s_warm.total
    # the host waits for every compile: the cold schedule is at least their sum
    assert s_cold.total >= 12 * 40_000_000 > s_warm.total


def test_compiled_view_is_one_program_and_faster(regions) -> None:  # noqa: ANN001
    _, warm = regions
    target = load_target("fp16-npu")
    ops = _ops(warm)
    eager = schedule(ops, target)
    one = compiled_view(ops)
    compiled = schedule(one, target)
    kinds = dict(zip(compiled.engines, compiled.engine_kinds, strict=True))
    lanes = [compiled.engines[k] for k in compiled.lane]
    assert lanes.count("dispatch") == 1 and "host" not in lanes and "dma_d2h" not in lanes
    assert kinds["matrix"] == "matrix"
    ratio = eager.total_ns / compiled.total_ns
    assert ratio > 5  # eager: ~100 dispatches and ~70 fallbacks; compiled: one launch
    summary = compiled.summary(one)
    device = sum(v for k, v in summary.critical_by_engine.items() if k in ("matrix", "vector"))
    assert device > 0.5 * summary.critical_path  # the program's own work is what remains
    # the compiled program also runs on the device what fell back in eager (attention on 7 tokens)
    busy = lambda s: {e.engine: e.busy for e in s.engines}  # noqa: E731
    assert busy(summary)["matrix"] > busy(eager.summary(ops))["matrix"]


def test_one_cost_figure_changes_only_its_slices(regions, tmp_path) -> None:  # noqa: ANN001
    cold, _ = regions
    text = (TARGETS / "fp16-npu.toml").read_text()
    faster = text.replace("[engines.dma_h2d]\nkind = \"dma_h2d\"\nbytes_per_ns = 16", "[engines.dma_h2d]\nkind = \"dma_h2d\"\nbytes_per_ns = 32")
    faster = faster.replace("[engines.dma_d2h]\nkind = \"dma_d2h\"\nbytes_per_ns = 16", "[engines.dma_d2h]\nkind = \"dma_d2h\"\nbytes_per_ns = 32")
    faster = faster.replace('name = "fp16-npu"', 'name = "fp16-npu-fast-dma"')
    assert faster.count("bytes_per_ns = 32") == 2
    path = tmp_path / "fast-dma.toml"
    path.write_text(faster)
    ops = _ops(cold)
    a, b = schedule(ops, load_target("fp16-npu")), schedule(ops, load_target(path))
    assert a.lane == b.lane and a.op == b.op and a.kind == b.kind
    for lane, name, da, db in zip(a.lane, a.name, a.dur, b.dur, strict=True):
        kind = a.engine_kinds[lane]
        if kind in ("dma_h2d", "dma_d2h"):
            assert db <= da
        else:
            assert da == db, (name, kind)
    dma = [(da, db) for lane, da, db in zip(a.lane, a.dur, b.dur, strict=True) if a.engine_kinds[lane].startswith("dma")]
    assert any(db < da for da, db in dma)
    assert b.total_ns < a.total_ns


_TINY = """
[target]
name = "tiny"
device = "npu:0"
[compute]
dtypes = ["float16"]
[cache]
programs = false
[cost]
dispatch_ns = 10
compile_ns = 0
host_flops_per_ns = 1
[engines.dma_h2d]
kind = "dma_h2d"
bytes_per_ns = 1
latency_ns = 5
[engines.dma_d2h]
kind = "dma_d2h"
bytes_per_ns = 2
latency_ns = 5
[engines.vector]
kind = "vector"
flops_per_ns = 10
latency_ns = 1
"""


def test_schedule_of_a_round_trip_worked_by_hand(tmp_path: Path) -> None:
    """add (device, 100 flops) -> pow (fallback, 50 flops, 40 B back to the host) -> mul (device, 200 flops,
    40 B to the device), on figures small enough to follow in one's head (the model in schedule.py):

    add: dispatch 0+10; vector 10 + (1 + 100/10) = 10..21 (waited on the dispatch)
    pow: d2h from 21 (its input is ready): 5 + 40/2 = 25 -> 46; host 46 + (10 + 50/1) -> 106
    mul: dispatch 106..116 (the host was busy with the fallback); h2d 116 + (5 + 40/1) -> 161;
         vector 161 + (1 + 200/10) -> 182
    """
    path = tmp_path / "tiny.toml"
    path.write_text(_TINY)
    ops = ScheduleOps(op_id=[0, 1, 2], name=["aten::add", "aten::pow", "aten::mul"],
                      placement=["device", "fallback", "device"], module=[None] * 3, flops=[100, 50, 200],
                      bytes=[0, 0, 0], start_ns=[0, 1, 2], dur_ns=[1, 1, 1], deps=[(), (0,), (1,)],
                      graph_id=[None] * 3, is_call=[False] * 3, transfers={1: [("d2h", 40)], 2: [("h2d", 40)]})
    s = schedule(ops, load_target(path))
    rows = [(s.engines[lane], kind, name, start, dur, wait)
            for lane, kind, name, start, dur, wait in zip(s.lane, s.kind, s.name, s.start, s.dur, s.waited_on, strict=True)]
    assert rows == [
        ("dispatch", "dispatch", "aten::add", 0, 10, None),
        ("vector", "compute", "aten::add", 10, 11, "dispatch"),
        ("dma_d2h", "transfer", "d2h aten::pow", 21, 25, "dependency"),
        ("host", "fallback", "aten::pow", 46, 60, "transfer"),
        ("dispatch", "dispatch", "aten::mul", 106, 10, "fallback"),
        ("dma_h2d", "transfer", "h2d aten::mul", 116, 45, "fallback"),
        ("vector", "compute", "aten::mul", 161, 21, "transfer"),
    ]
    assert s.total_ns == 182


def test_report_schedule_cli(trace_path) -> None:  # noqa: ANN001
    out = subprocess.run([sys.executable, "-m", "portscope.app.cli", "report", "--schedule", str(trace_path)],
                         capture_output=True, text=True, check=True).stdout
    assert "region 'forward:cold'" in out and "region 'forward:warm'" in out
    assert "critical path: compiler" in out
    for engine in ("dispatch", "compiler", "dma_h2d", "dma_d2h", "matrix", "vector"):
        assert f"\n  {engine} " in out


def test_chrome_export_has_one_track_per_engine(trace_path, tmp_path) -> None:  # noqa: ANN001
    trace = read_trace(trace_path)
    out = write_chrome(trace, tmp_path / "run.json")
    doc = json.loads(out.read_text())
    tracks = {e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert {"dispatch", "compiler", "dma_h2d", "dma_d2h", "matrix", "vector"} <= tracks
    on = {}
    tid = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy"):
            on.setdefault(tid[e["tid"]], set()).add(e["args"]["engine_kind"])
    assert all(len(kinds) == 1 for kinds in on.values())

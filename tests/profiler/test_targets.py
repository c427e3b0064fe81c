"""Target files: built-ins load, every rule of the README parses, bad files fail with file, key and problem."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from portscope.ingest import TargetError, read_trace
from portscope.profiler.targets import CopyWhere, builtin_targets, load_target
from portscope.profiler.targets.static_shapes import StaticShapes, StepInput

README = Path(__file__).resolve().parents[2] / "profiler" / "targets" / "README.md"


def test_builtin_targets() -> None:
    assert {"fp16-npu", "bf16-npu", "cuda"} <= set(builtin_targets())
    npu = load_target("fp16-npu")
    assert npu.dtypes == {"float16"} and npu.dtype_change is CopyWhere.HOST and npu.broadcast_views_miss
    assert npu.alignment[0].multiple_of == 64 and npu.shape_conditions[0].multiple_of == 32
    assert load_target("bf16-npu").dtypes == {"bfloat16"}
    cuda = load_target("cuda")
    assert cuda.dtype_change is CopyWhere.DEVICE and not cuda.programs and "float32" in cuda.dtypes


def test_every_readme_example_is_valid() -> None:
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 8
    document = "\n".join(blocks)
    raw = tomllib.loads(document)
    assert set(raw) >= {"target", "compute", "kernels", "alignment", "shape_condition", "copies", "cache", "cost", "engines"}


def test_load_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('[target]\nname = "mine"\ndevice = "npu:1"\n[compute]\ndtypes = ["bfloat16", "float16"]\n')
    t = load_target(path)
    assert t.name == "mine" and t.device == "npu:1" and t.dtypes == {"bfloat16", "float16"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[target]\nname = "x"\ndevice = "d"\n[compute]\ndtypes = ["float16"]\ncolour = "red"\n', "unknown key compute.colour"),
        ('[target]\nname = "x"\ndevice = "d"\n[compute]\ndtypes = ["float16"]\n[gpu]\n', "unknown key 'gpu'"),
        ('[target]\nname = "x"\n[compute]\ndtypes = ["float16"]\n', "missing required key target.device"),
        ('[target]\nname = "x"\ndevice = "d"\n[compute]\ndtypes = "float16"\n', "compute.dtypes must be a list of strings"),
        ('[target]\nname = "x"\ndevice = "d"\n[compute]\ndtypes = ["half"]\n', "unknown dtype 'half'"),
        ('[target]\nname = "x"\ndevice = "d"\n[compute]\ndtypes = ["float16"]\n[copies]\ndtype_change = "gpu"\n',
         'copies.dtype_change must be "device" or "host"'),
        ('[target]\nname = "x"\ndevice = "d"\n[compute]\ndtypes = ["float16"]\n[[alignment]]\nmultiple_of = 0\n',
         "alignment[0].multiple_of must be a positive integer"),
        ('[target]\nname = "x"\ndevice = "d"\n[compute]\ndtypes = ["float16"]\n[engines.m]\nkind = "warp"\n',
         "engines.m.kind must be one of"),
        ("[target\nname=", "not valid TOML"),
    ],
)
def test_bad_target_names_file_key_and_problem(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(TargetError) as info:
        load_target(path)
    assert str(info.value).startswith(str(path)) and expected in str(info.value)


def test_all_problems_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[target]\nname = 3\n[compute]\ndtypes = ["x"]\nfoo = 1\n')
    with pytest.raises(TargetError) as info:
        load_target(path)
    assert len(info.value.problems) >= 4


def test_unknown_name() -> None:
    with pytest.raises(TargetError, match="not a built-in target"):
        load_target("tpu-v9")


# ---- [static_shapes] ------------------------------------------------------------------------------

_BASE = '[target]\nname = "s"\ndevice = "npu:0"\n[compute]\ndtypes = ["float16"]\n'


def test_static_llm_npu_builtin() -> None:
    t = load_target("static-llm-npu")
    s = t.static_shapes
    assert s is not None
    assert (s.max_sequence_length, s.max_cache_length, s.batch_size) == (4096, 4096, 1)
    assert (s.weight_bits, s.activation_bits, s.kv_cache_bits) == (8, 16, 16)
    assert s.memory_bytes == 16 * 1024**3 and s.cores == 4 and s.step_input is StepInput.IDS
    assert load_target("fp16-npu").static_shapes is None


def test_static_shapes_defaults(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(_BASE + "[static_shapes]\nmax_sequence_length = 512\nmax_cache_length = 1024\nactivation_bits = 8\n")
    s = load_target(path).static_shapes
    assert s == StaticShapes(max_sequence_length=512, max_cache_length=1024, batch_size=1, weight_bits=16,
                             activation_bits=8, kv_cache_bits=8, memory_bytes=None, cores=1, step_input=StepInput.IDS)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("max_cache_length = 64\n", "missing required key static_shapes.max_sequence_length"),
        ("max_sequence_length = 64\nmax_cache_length = 32\n",
         "static_shapes.max_cache_length (32) must be at least max_sequence_length (64)"),
        ("max_sequence_length = 0\nmax_cache_length = 32\n", "static_shapes.max_sequence_length must be a positive integer, got 0"),
        ("max_sequence_length = 64\nmax_cache_length = 64\nbatch_size = -1\n", "static_shapes.batch_size must be a positive integer"),
        ("max_sequence_length = 64\nmax_cache_length = 64\nweight_bits = 6\n", "static_shapes.weight_bits must be one of 4, 8, 16, 32, got 6"),
        ("max_sequence_length = 64\nmax_cache_length = 64\nstep_input = \"tokens\"\n",
         'static_shapes.step_input must be "ids" or "embeddings", got \'tokens\''),
        ("max_sequence_length = 64\nmax_cache_length = 64\nmemory_bytes = \"16GB\"\n",
         "static_shapes.memory_bytes must be a integer, got str '16GB'"),
        ("max_sequence_length = 64\nmax_cache_length = 64\nmax_data_length = 8\n", "unknown key static_shapes.max_data_length"),
    ],
)
def test_bad_static_shapes(tmp_path: Path, section: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(_BASE + "[static_shapes]\n" + section)
    with pytest.raises(TargetError) as info:
        load_target(path)
    assert str(info.value).startswith(str(path)) and expected in str(info.value)


_BASE = '[target]\nname = "x"\ndevice = "npu:0"\n[compute]\ndtypes = ["float16"]\n[engines.matrix]\nkind = "matrix"\nflops_per_ns = 10\n'


def test_cost_sources(tmp_path: Path) -> None:
    from portscope.profiler.targets.cost_sources import CostSource, SourceKind, used_sources

    path = tmp_path / "sourced.toml"
    path.write_text(_BASE + '[cost]\ndispatch_ns = 100\n[sources]\n"cost.dispatch_ns" = "measured: NPU-X1, 1000 eager adds"\n'
                    '"engines.matrix.flops_per_ns" = "datasheet: NPU-X1 manual, table 3"\n')
    t = load_target(path)
    assert t.source_of("cost.dispatch_ns") == CostSource(SourceKind.MEASURED, "NPU-X1, 1000 eager adds")
    assert str(t.source_of("engines.matrix.flops_per_ns")) == "datasheet: NPU-X1 manual, table 3"
    assert t.source_of("cost.compile_ns").kind is SourceKind.ASSUMED  # not named: assumed
    # what a predicted run records: the figures the target sets (host_flops_per_ns defaults to 10)
    assert used_sources(t) == {"cost.dispatch_ns": "measured: NPU-X1, 1000 eager adds", "cost.host_flops_per_ns": "assumed",
                               "engines.matrix.flops_per_ns": "datasheet: NPU-X1 manual, table 3"}
    assert not t.graph_fallbacks and load_target("fp16-npu").source_of("cost.dispatch_ns").kind is SourceKind.ASSUMED


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        ('"cost.dispatch_ms" = "assumed"', "unknown cost figure 'cost.dispatch_ms'"),
        ('"engines.vector.flops_per_ns" = "assumed"', "unknown cost figure 'engines.vector.flops_per_ns'"),
        ('"cost.dispatch_ns" = "measured"', "measured must name the device it was measured on"),
        ('"cost.dispatch_ns" = "datasheet:  "', "datasheet must name the document"),
        ('"cost.dispatch_ns" = "guessed: by eye"', "must start with datasheet:, measured: or assumed"),
    ],
)
def test_bad_cost_sources(tmp_path: Path, sources: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(_BASE + "[sources]\n" + sources + "\n")
    with pytest.raises(TargetError) as info:
        load_target(path)
    assert str(info.value).startswith(str(path)) and expected in str(info.value)


def test_assumed_figures_on_the_critical_path() -> None:
    """dispatch 0-10 ns, then the matrix engine 10-30 ns (it waited on the dispatch); the vector engine runs
    off the critical path. Hand-written sources: only the matrix's flops are assumed on that path."""
    import pyarrow as pa

    from portscope.ingest.schedule_summary import assumed_on_critical_path, summarize_slices

    table = pa.table({"engine": ["dispatch", "matrix", "vector"], "engine_kind": ["dispatch", "matrix", "vector"],
                      "kind": ["dispatch", "compute", "compute"], "start": [0, 10, 0], "dur": [10, 20, 5],
                      "waited_on": [None, "dispatch", None]})
    summary = summarize_slices(table)
    assert summary.critical_by_engine == {"matrix": 20, "dispatch": 10}
    sources = {"cost.dispatch_ns": "measured: NPU-X1", "engines.matrix.flops_per_ns": "assumed",
               "engines.matrix.latency_ns": "datasheet: NPU-X1 manual", "engines.vector.flops_per_ns": "assumed"}
    assert assumed_on_critical_path(summary, sources) == ["engines.matrix.flops_per_ns"]
    sources["cost.dispatch_ns"] = "assumed"
    assert assumed_on_critical_path(summary, sources) == ["cost.dispatch_ns", "engines.matrix.flops_per_ns"]


def test_compiled_graphs_fall_back_only_when_the_target_says_so(tmp_path: Path) -> None:
    import torch

    from portscope.profiler import explain
    from portscope.profiler.predict import reset_program_cache

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x.float()) * 2

    compiled = torch.compile(f, backend="eager", dynamic=False)
    compiled(torch.ones(8, dtype=torch.float16))
    rows, host = {}, {}
    for flag in ("false", "true"):
        path = tmp_path / f"graphs-{flag}.toml"
        path.write_text('[target]\nname = "g"\ndevice = "npu:0"\n[compute]\ndtypes = ["float16"]\n[cache]\nprograms = false\n'
                        f"[compiled]\nfallbacks = {flag}\n")
        reset_program_cache()
        with torch.no_grad(), explain("graph", target=str(path)) as region:
            compiled(torch.ones(8, dtype=torch.float16))
        trace = region.to_trace()
        rows[flag] = [(s["kind"], s["op_name"].split(" ")[0], s["reason"], s["bytes"])  # "compiled graph <id>": "compiled"
                      for s in trace["signals"].to_pylist() if not s["kind"].startswith("compile/")]
        host[flag] = [(s["name"], s["kind"]) for s in trace["engine_slices"].to_pylist() if s["engine"] == "host"]
    assert rows["false"] == []  # one device program: nothing falls back
    # sin and mul compute in float32: host fallbacks; x.float() (8 x 4 B) crosses to the host, the result back
    assert sorted(rows["true"]) == sorted([
        ("dispatch/cpu_fallback", "aten::sin", "dtype-not-supported", 0),
        ("transfer/d2h", "aten::sin", "fallback-input", 32),
        ("dispatch/cpu_fallback", "aten::mul.Tensor", "dtype-not-supported", 0),
        ("transfer/h2d", "compiled", "graph-output", 32),
    ])
    # the schedule runs the graph's fallbacks on the host lane
    assert host["false"] == [] and host["true"] == [("aten::sin", "fallback"), ("aten::mul.Tensor", "fallback")]


def test_cost_sources_text() -> None:
    from portscope.ingest.schedule_summary import cost_sources_text

    extra = {"cost_sources": {"cost.dispatch_ns": "measured: NPU-X1", "cost.compile_ns": "assumed",
                              "engines.m.flops_per_ns": "datasheet: manual", "engines.m.latency_ns": "assumed"}}
    assert cost_sources_text(extra) == "1 measured, 1 datasheet, 2 assumed"
    assert cost_sources_text({}) is None


def test_a_predicted_time_on_assumed_figures_says_so(make_app, tmp_path: Path) -> None:  # noqa: ANN001
    import torch

    from portscope.app.context import store
    from portscope.app.pages.common import region_rows
    from portscope.ingest.schedule_summary import format_schedule, schedule_summaries
    from portscope.profiler import explain

    with torch.no_grad(), explain("step", target="fp16-npu") as region:
        torch.ones(8, dtype=torch.float16) * 2
    path = region.save(tmp_path / "p.arrow")
    trace = read_trace(path)
    (summary,) = schedule_summaries(trace)
    assert "cost.dispatch_ns" in summary.assumed  # every fp16-npu figure is assumed; dispatches time this step
    assert "(assumed)" in format_schedule([summary]).splitlines()[0]
    with make_app(trace_paths=(path,)).server.test_request_context("/"):
        (row,) = region_rows(trace.content_hash(), trace)
        run = store().run_row(trace.content_hash(), path.name)
    assert row["predicted"].endswith(" (assumed)") and run.predicted_time and run.assumed_time

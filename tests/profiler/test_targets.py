"""Target files: built-ins load, every rule of the README parses, bad files fail with file, key and problem."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from portscope.ingest import TargetError
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

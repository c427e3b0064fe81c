"""Target files: built-ins load, every rule of the README parses, bad files fail with file, key and problem."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from portscope.ingest import TargetError
from portscope.profiler.targets import CopyWhere, builtin_targets, load_target

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

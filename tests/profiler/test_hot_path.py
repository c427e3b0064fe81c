"""What the cheap paths of explain() must keep: logging levels seen by every logger, parameter counts and config
values, operators called through their overload's C++ handle, each operator's own tensor metadata (arguments an
operator resizes shown after it ran), no tensor held by the recorder, the user's root."""

from __future__ import annotations

import logging
import sys
import weakref
from pathlib import Path

import pytest
import torch

from portscope.profiler import explain
from portscope.profiler.callsite import default_user_root
from portscope.profiler.compiled import CompileWatcher
from portscope.profiler.recorder import session
from portscope.profiler.tables import model_summary


def test_watcher_levels_reach_descendant_loggers_and_are_restored() -> None:
    trace = logging.getLogger("torch.__trace")
    child = logging.getLogger("torch.__trace.portscope_test_child")
    saved = trace.level
    trace.setLevel(logging.WARNING)
    try:
        assert not child.isEnabledFor(logging.DEBUG)  # fills the child's level cache
        watcher = CompileWatcher(session())
        watcher.install()
        assert trace.level == logging.DEBUG
        assert child.isEnabledFor(logging.DEBUG)  # the cached answer was dropped
        watcher.uninstall()
        assert trace.level == logging.WARNING
        assert not child.isEnabledFor(logging.DEBUG)
        fresh = logging.getLogger("torch.__trace.portscope_test_later")  # a logger made after the first install
        assert not fresh.isEnabledFor(logging.DEBUG)
        watcher = CompileWatcher(session())
        watcher.install()
        assert fresh.isEnabledFor(logging.DEBUG)
        watcher.uninstall()
        assert not fresh.isEnabledFor(logging.DEBUG)
    finally:
        trace.setLevel(saved)


class _Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)  # 40 weights
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tied: counted once


def test_model_summary_counts_shared_parameters_once() -> None:
    assert model_summary(_Tied())["parameters"] == 40
    lin = torch.nn.Linear(3, 4)  # 12 + 4
    model = torch.nn.Sequential(lin, torch.nn.Sequential(lin, torch.nn.Linear(4, 2)))  # + 8 + 2
    summary = model_summary(model.half())
    assert summary["parameters"] == 26 and summary["dtype"] == "float16" and summary["class"] == "Sequential"


class _Listed(torch.nn.Module):
    """A module that lists its parameters its own way (as wrappers such as FSDP do)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.extra = torch.zeros(5, dtype=torch.float64)

    def parameters(self, recurse: bool = True):  # noqa: ANN201
        return iter([torch.nn.Parameter(self.extra), *super().parameters(recurse)])


def test_model_summary_asks_a_module_that_lists_its_own_parameters() -> None:
    summary = model_summary(_Listed())
    assert summary["parameters"] == 5 + 6 and summary["dtype"] == "float64"


def test_operators_with_keyword_arguments_and_tuple_outputs_are_recorded() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    with explain("kw") as region:
        values, indices = torch.ops.aten.max.dim(x, dim=1, keepdim=True)
        total = torch.ops.aten.sum.dim_IntList(x, [0], dtype=torch.float64)
    assert values[:, 0].tolist() == [3.0, 7.0, 11.0] and indices[:, 0].tolist() == [3, 3, 3]
    assert total.tolist() == [12.0, 15.0, 18.0, 21.0]
    ops = region.to_trace()["ops"].to_pylist()
    assert [o["name"] for o in ops] == ["aten::max.dim", "aten::sum.dim_IntList"]
    assert ops[0]["output_shapes"] == "3x1;3x1" and ops[0]["output_dtypes"] == "float32;int64"
    # the dim list holds no tensor: it adds no entry (as a tensor list adds one per tensor)
    assert ops[1]["input_shapes"] == "3x4" and ops[1]["output_dtypes"] == "float64"


def test_an_input_that_is_the_previous_output_keeps_its_own_strides() -> None:
    x = torch.ones(2, 3)
    with explain("chain") as region:
        y = x.t()  # 3x2, strides (1, 3): not contiguous
        s = y + y  # both inputs are the previous output; the sum keeps their layout
        z = s.contiguous()  # 3x2, strides (2, 1)
        z.t()
    ops = region.to_trace()["ops"].to_pylist()
    assert [o["name"] for o in ops] == ["aten::t", "aten::add.Tensor", "aten::clone", "aten::t"]
    assert ops[0]["input_shapes"] == "2x3" and ops[0]["input_strides"] == "3x1" and ops[0]["output_shapes"] == "3x2"
    assert ops[1]["input_shapes"] == "3x2;3x2" and ops[1]["input_strides"] == "1x3;1x3"
    assert ops[2]["input_shapes"] == "3x2" and ops[2]["input_strides"] == "1x3"
    assert ops[3]["input_shapes"] == "3x2" and ops[3]["input_strides"] == "2x1" and ops[3]["output_shapes"] == "2x3"


def test_operators_that_change_an_argument_show_it_after_the_change() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    indices = torch.empty(0, dtype=torch.long)
    with explain("writes") as region:
        y = x + 1  # 3x4
        y.unsqueeze_(0)  # in place: 1x3x4 from now on
        y.neg()
        values = x * 1  # 3x4
        values.resize_(0)
        torch.max(x, 1, out=(values, indices))  # resizes values to 3
        values.neg()
    ops = region.to_trace()["ops"].to_pylist()
    assert [o["name"] for o in ops] == ["aten::add.Tensor", "aten::unsqueeze_", "aten::neg", "aten::mul.Tensor",
                                        "aten::resize_", "aten::max.dim_max", "aten::neg"]
    assert ops[1]["input_shapes"] == "1x3x4;" and ops[1]["output_shapes"] == "1x3x4"  # dim 0 is an int: ""
    assert ops[2]["input_shapes"] == "1x3x4"
    assert ops[4]["input_shapes"] == "0" and ops[4]["output_shapes"] == "0"  # the size list holds no tensor
    assert ops[5]["input_shapes"] == "3x4;;3;3" and ops[5]["output_shapes"] == "3;3"  # x, dim, out=(values, indices)
    assert ops[6]["input_shapes"] == "3"


_alive_while_probing: list[bool] = []


@torch.library.custom_op("portscope_test::probe", mutates_args=())
def _probe(x: torch.Tensor, probe: int) -> torch.Tensor:
    """Notes, while it runs, whether the tensor weakly referenced by `_probed[probe]` is still alive."""
    _alive_while_probing.append(_probed[probe]() is not None)
    return x.clone()


_probed: list[weakref.ref] = []


def test_the_previous_output_is_not_kept_alive() -> None:
    x = torch.ones(4)
    with explain("alive"):
        y = x + 1
        _probed.append(weakref.ref(y))
        del y
        z = torch.ops.portscope_test.probe(x, len(_probed) - 1)  # the recorder let go of y before this ran
    assert _alive_while_probing == [False]
    last = weakref.ref(z)
    del z
    assert last() is None  # nor does it hold anything after the region


def test_factory_outputs_are_not_held() -> None:
    """torch's factory bindings detach an output that something else still references: one more operator."""
    x = torch.ones(3)
    with explain("factories") as region:
        torch.arange(7) + 1
        torch.zeros(2) * 2
        torch.ones_like(x).neg()
    names = [o["name"] for o in region.to_trace()["ops"].to_pylist()]
    assert names == ["aten::arange", "aten::add.Tensor", "aten::zeros", "aten::mul.Tensor", "aten::ones_like",
                     "aten::neg"]


class _ToyConfig:
    """A config with a class attribute, an alias answered by the class and a value that refuses to be read
    globally (as transformers' heterogeneous per-layer configs do)."""

    model_type = "toy"

    def __init__(self) -> None:
        self.hidden_size = 8
        self.n_layer = 3

    def __getattr__(self, key: str) -> int:
        if key == "num_hidden_layers":
            return self.n_layer
        if key == "intermediate_size":
            raise RuntimeError("intermediate_size differs per layer")
        raise AttributeError(key)


def test_model_summary_reads_config_values_aliases_and_skips_refusals() -> None:
    model = torch.nn.Linear(8, 2)  # 16 + 2
    model.config = _ToyConfig()
    assert model_summary(model) == {"class": "Linear", "parameters": 18, "dtype": "float32", "device": "cpu",
                                    "model_type": "toy", "num_hidden_layers": 3, "hidden_size": 8}


def test_the_user_root_follows_the_script_and_the_working_directory(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """default_user_root() remembers its answers (a file system look-up at every region's start) per script and
    working directory."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    script = tmp_path / "b" / "run.py"
    script.write_text("")
    monkeypatch.setattr(sys, "argv", ["-c"])  # no script: the working directory
    monkeypatch.chdir(tmp_path / "a")
    assert default_user_root() == str(tmp_path / "a")
    monkeypatch.chdir(tmp_path)
    assert default_user_root() == str(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script)])  # a script: its folder, wherever the program runs
    assert default_user_root() == str(tmp_path / "b")
    monkeypatch.chdir(tmp_path / "a")
    assert default_user_root() == str(tmp_path / "b")

"""What the cheap paths of explain() must keep: logging levels seen by every logger, parameter counts,
operators called through their overload's C++ handle."""

from __future__ import annotations

import logging

import torch

from portscope.profiler import explain
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

"""A target's sync cost (`cost.sync_ns`) and per-operator-kind engine figures ([engines.NAME.kinds.KIND]): the
file format and how a schedule uses them (profiler/targets, profiler/schedule.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portscope.ingest.errors import TargetError
from portscope.profiler.schedule import ScheduleOps, schedule
from portscope.profiler.targets import KindFigures, load_target
from portscope.profiler.targets.cost_sources import used_sources

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
sync_ns = 7
[engines.dma_d2h]
kind = "dma_d2h"
bytes_per_ns = 2
latency_ns = 5
[engines.vector]
kind = "vector"
flops_per_ns = 10
latency_ns = 1
[engines.vector.kinds.reduction]
latency_ns = 3
flops_per_ns = 5
[sources]
"cost.sync_ns" = "measured: a.json, n=4, median of the synchronize calls' own time"
"engines.vector.kinds.reduction.latency_ns" = "measured: a.json, n=9, 3 shapes, fit error 5%"
"""


def _tiny(tmp_path: Path, text: str = _TINY) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(text)
    return path


def test_kind_figures_and_sync_cost_are_read_with_their_sources(tmp_path: Path) -> None:
    t = load_target(_tiny(tmp_path))
    assert t.sync_ns == 7
    vector = next(e for e in t.engines if e.name == "vector")
    assert vector.figures("reduction") == KindFigures(latency_ns=3, flops_per_ns=5, bytes_per_ns=0)
    assert vector.figures("elementwise") == KindFigures(latency_ns=1, flops_per_ns=10, bytes_per_ns=0)  # the engine's
    assert str(t.source_of("cost.sync_ns")).startswith("measured: a.json, n=4")
    used = used_sources(t)
    assert used["engines.vector.kinds.reduction.latency_ns"] == "measured: a.json, n=9, 3 shapes, fit error 5%"
    assert used["engines.vector.kinds.reduction.flops_per_ns"] == "assumed"
    assert used["cost.sync_ns"].startswith("measured: a.json")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("[engines.vector.kinds.reductions]\nlatency_ns = 3\n", "unknown operator kind 'reductions'"),
        ("[engines.vector.kinds.reduction]\nlatency_us = 3\n", "unknown key engines.vector.kinds.reduction.latency_us"),
        ("[sources]\n\"engines.vector.kinds.copy.latency_ns\" = \"assumed\"\n", "unknown cost figure"),
    ],
)
def test_bad_kind_tables_name_the_problem(tmp_path: Path, extra: str, expected: str) -> None:
    base = _TINY.split("[engines.vector.kinds.reduction]")[0]
    with pytest.raises(TargetError) as info:
        load_target(_tiny(tmp_path, base + extra))
    assert expected in str(info.value)


def test_schedule_uses_the_kind_figures_and_the_sync_cost(tmp_path: Path) -> None:
    """add (elementwise, 100 flops) and sum (reduction, 100 flops) on the vector engine, then .item() of the sum:

    add: dispatch 0..10; vector 10 + (1 + 100/10) = 10..21 (the engine's figures)
    sum: dispatch 10..20; vector 21 + (3 + 100/5) = 21..44 (the reduction's own figures)
    item: d2h of 4 B from 44 (the sum is done): 5 + 4/2 = 7 -> 51; host 51 + (dispatch 10 + 0 flops + sync 7) -> 68
    """
    t = load_target(_tiny(tmp_path))
    ops = ScheduleOps(op_id=[0, 1, 2], name=["aten::add", "aten::sum", "aten::_local_scalar_dense"],
                      placement=["device", "device", "host"], module=[None] * 3, flops=[100, 100, 0], bytes=[0, 0, 0],
                      start_ns=[0, 1, 2], dur_ns=[1, 1, 1], deps=[(), (0,), (1,)], graph_id=[None] * 3,
                      is_call=[False] * 3, transfers={2: [("d2h", 4)]})
    s = schedule(ops, t)
    rows = [(s.engines[lane], kind, name, start, dur)
            for lane, kind, name, start, dur in zip(s.lane, s.kind, s.name, s.start, s.dur, strict=True)]
    assert rows == [
        ("dispatch", "dispatch", "aten::add", 0, 10),
        ("vector", "compute", "aten::add", 10, 11),
        ("dispatch", "dispatch", "aten::sum", 10, 10),
        ("vector", "compute", "aten::sum", 21, 23),
        ("dma_d2h", "transfer", "d2h aten::_local_scalar_dense", 44, 7),
        ("host", "sync", "aten::_local_scalar_dense", 51, 17),
    ]
    # a read of a value the host already holds (no d2h copy) waits for nothing: no sync cost
    ops.transfers.clear()
    s = schedule(ops, t)
    assert s.dur[-1] == 10


def test_a_data_dependent_shape_on_the_device_makes_the_host_wait(tmp_path: Path) -> None:
    """x[mask] on the device (a boolean-index sync), then an add the host dispatches only once it knows the size:

    index: dispatch 0..10; vector 10 + (1 + 100/10) = 10..21; the host waits for it: sync 21..28 (sync_ns 7)
    add: dispatch 28..38 (not 10..20); vector 38 + 11 = 38..49
    """
    t = load_target(_tiny(tmp_path))
    ops = ScheduleOps(op_id=[0, 1], name=["aten::index.Tensor", "aten::add"], placement=["device", "device"],
                      module=[None] * 2, flops=[100, 100], bytes=[0, 0], start_ns=[0, 1], dur_ns=[1, 1], deps=[(), (0,)],
                      graph_id=[None] * 2, is_call=[False] * 2, syncs={0})
    s = schedule(ops, t)
    rows = [(s.engines[lane], kind, name, start, dur, wait)
            for lane, kind, name, start, dur, wait in zip(s.lane, s.kind, s.name, s.start, s.dur, s.waited_on, strict=True)]
    assert rows == [
        ("dispatch", "dispatch", "aten::index.Tensor", 0, 10, None),
        ("vector", "compute", "aten::index.Tensor", 10, 11, "dispatch"),
        ("host", "sync", "aten::index.Tensor", 21, 7, "dependency"),
        ("dispatch", "dispatch", "aten::add", 28, 10, "dependency"),
        ("vector", "compute", "aten::add", 38, 11, "dispatch"),  # its input was done at 21: it waited on its dispatch
    ]

"""The native hot path (profiler/native.cpp) records what the Python one (recorder._dispatch) records, and the
Python one takes over when the native one is turned off, cannot be built, or stacks or hooks are wanted."""

from __future__ import annotations

import collections
import time
import warnings
from typing import Any

import pytest
import torch

from portscope.profiler import explain
from portscope.profiler import native as native_code
from portscope.profiler.demo import prompt, tiny_llama
from portscope.profiler.recorder import session

pytestmark = pytest.mark.slow


def _record(model: torch.nn.Module, ids: torch.Tensor, *, native: bool,
            monkeypatch: pytest.MonkeyPatch) -> tuple[Any, bool]:
    monkeypatch.setenv(native_code.ENV, "1" if native else "0")
    with torch.no_grad(), explain("forward") as region:
        model(input_ids=ids)
        used = session().mode.native
    return region, used


def _without_times(raw: tuple) -> tuple:
    func, ins, outs, _t0, _t1, stack, module, bool_index, graph = raw
    return func, ins, outs, stack, module, bool_index, graph


def _types(raw: tuple) -> list:
    """The Python type of every part of a record and of its tensors' metadata."""
    metas = [m for m in (*raw[1], *raw[2]) if m is not None]
    return [type(raw[1]), type(raw[2]), *(tuple(type(x) for x in m) for m in metas)]


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return tiny_llama(dtype=torch.float32)  # 2 layers, hidden 128, 4 heads, 2 KV heads, vocab 256


def test_native_and_python_paths_record_the_same_llama_forward(llama: torch.nn.Module,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ids = prompt(8)
    native, used_native = _record(llama, ids, native=True, monkeypatch=monkeypatch)
    python, used_native_after = _record(llama, ids, native=False, monkeypatch=monkeypatch)
    assert used_native and not used_native_after
    assert len(native.raw) == len(python.raw) == 171
    for a, b in zip(native.raw, python.raw, strict=True):
        assert _without_times(a) == _without_times(b)
        assert _types(a) == _types(b)
    assert type(native.raw[0][1][0][0]) is torch.Size  # shapes as Tensor.shape gives them
    ops_n = native.to_trace()["ops"].to_pylist()
    ops_p = python.to_trace()["ops"].to_pylist()
    columns = ["name", "input_shapes", "input_strides", "input_dtypes", "output_shapes", "output_dtypes", "device",
               "bytes_in", "bytes_out", "module", "graph_id"]
    assert [[o[c] for c in columns] for o in ops_n] == [[o[c] for c in columns] for o in ops_p]

    # counts worked out from the config: 7 projections per layer (q, k, v, o, gate, up, down) + the LM head
    # are t + mm each; an RMSNorm (2 per layer + the final one) is pow, mean, add, rsqrt, mul, mul; rotate_half
    # negates q and k in each layer
    for ops in (ops_n, ops_p):
        counts = collections.Counter(o["name"] for o in ops)
        assert counts["aten::mm"] == 2 * 7 + 1 and counts["aten::t"] == 15
        assert counts["aten::pow.Tensor_Scalar"] == counts["aten::rsqrt"] == counts["aten::mean.dim"] == 2 * 2 + 1
        assert counts["aten::neg"] == 2 * 2 and counts["aten::silu"] == 2
        mm = [(o["module"], o["input_shapes"]) for o in ops if o["name"] == "aten::mm"]
        assert mm[1] == ("model.layers.0.self_attn.k_proj", "8x128;128x64")  # 2 KV heads x head width 32
        assert mm[6] == ("model.layers.0.mlp.down_proj", "8x256;256x128")
        assert mm[-1] == ("lm_head", "8x128;128x256")
        pows = [o["module"] for o in ops if o["name"] == "aten::pow.Tensor_Scalar"]
        assert pows == ["model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm",
                        "model.layers.1.input_layernorm", "model.layers.1.post_attention_layernorm", "model.norm"]


class _Tagged(torch.Tensor):
    """A tensor subclass: its metadata is read through Python attributes."""


def test_argument_kinds_match_the_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.arange(12.0).reshape(3, 4)
    mask = x > 5
    tagged = torch.ones(2, 3).as_subclass(_Tagged)
    param = torch.nn.Parameter(torch.ones(4, 2))
    records = []
    for native in (True, False):
        monkeypatch.setenv(native_code.ENV, "1" if native else "0")
        with explain("kinds") as region:
            assert session().mode.native is native
            torch.ops.aten.max.dim(x, dim=1, keepdim=True)  # keyword arguments, a tuple of outputs
            torch.ops.aten.sum.dim_IntList(x, [0], dtype=torch.float64)  # a size list, a dtype keyword
            x[mask]  # a list of tensors holding a bool one: bool_index
            torch.cat([x, x], 0)
            x.t().contiguous()  # strides (1, 4)
            x @ param
            tagged.sum()
            x.to(torch.float16)
        records.append([_without_times(r) for r in region.raw])
    assert records[0] == records[1]
    names = [r[0].name() for r in records[0]]
    assert names[:4] == ["aten::max.dim", "aten::sum.dim_IntList", "aten::index.Tensor", "aten::cat"]
    index = records[0][2]
    assert index[3] is None and index[4] is None and index[5] is True  # no stack, no module, a bool index
    assert index[1] == [(torch.Size([3, 4]), (4, 1), torch.float32, torch.device("cpu")),
                        (torch.Size([3, 4]), (4, 1), torch.bool, torch.device("cpu"))]
    assert records[0][1][1] == [(torch.Size([3, 4]), (4, 1), torch.float32, torch.device("cpu"))]  # [0]: no entry
    assert records[0][1][1][0] is records[0][0][1][0]  # native records of tensors alike share one tuple
    tagged_sum = next(r for r in records[0] if r[0].name() == "aten::sum")
    assert tagged_sum[1] == [(torch.Size([2, 3]), (3, 1), torch.float32, torch.device("cpu"))]
    assert records[0][0][2] == ((torch.Size([3, 1]), (1, 1), torch.float32, torch.device("cpu")),
                                (torch.Size([3, 1]), (1, 1), torch.int64, torch.device("cpu")))


def test_native_times_read_perf_counter_ns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_code.ENV, "1")
    x = torch.ones(64, 64)
    before = time.perf_counter_ns()
    with explain("clock") as region:
        x.mm(x)
        x.mm(x)
        assert session().mode.native
    after = time.perf_counter_ns()
    (_, _, _, a0, a1, *_), (_, _, _, b0, b1, *_) = region.raw
    assert before <= a0 <= a1 <= b0 <= b1 <= after


def test_an_operator_that_raises_is_not_recorded_and_recording_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_code.ENV, "1")
    with explain("raises") as region:
        with pytest.raises(RuntimeError, match="size of tensor a"):
            torch.ones(2) + torch.ones(3)
        torch.ones(2).neg()
    names = [r[0].name() for r in region.raw]
    assert names == ["aten::ones", "aten::ones", "aten::ones", "aten::neg"]


def test_stacks_go_through_the_python_path_in_a_nested_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_code.ENV, "1")
    x = torch.ones(3)
    with explain("outer") as outer:
        assert session().mode.native
        x.neg()
        with explain("inner", with_stack=True) as inner:
            x.exp()
        x.sin()
    assert [(r[0].name(), r[5] is None) for r in outer.raw] == [("aten::neg", True), ("aten::sin", True)]
    assert [(r[0].name(), r[5] is None) for r in inner.raw] == [("aten::exp", False)]


def test_hooks_go_through_the_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_code.ENV, "1")
    seen = []
    x = torch.ones(3)
    with explain("hooked") as region:
        s = session()
        assert s.mode.native and not s.hooks
        s.hooks.append(lambda func, args, kwargs, out, index: seen.append((func.name(), out.shape, index)))
        try:
            x.neg()
        finally:
            s.hooks.clear()
        x.exp()
    assert seen == [("aten::neg", torch.Size([3]), 0)]  # the hook saw the live output
    assert [r[0].name() for r in region.raw] == ["aten::neg", "aten::exp"]


def test_the_python_path_records_when_the_native_build_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_code.ENV, "1")
    monkeypatch.setattr(native_code, "_loaded", {})  # as in a fresh process

    def no_compiler() -> Any:
        raise RuntimeError("Error building extension: c++: not found")

    monkeypatch.setattr(native_code, "_build_or_import", no_compiler)
    x = torch.ones(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            with explain("fallback") as region:
                assert not session().mode.native
                x.neg()
            assert [r[0].name() for r in region.raw] == ["aten::neg"]
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "c++: not found" in messages[0] and "PORTSCOPE_NATIVE=0" in messages[0]


def test_the_library_is_cached_by_source_and_versions() -> None:
    assert native_code.ready()
    name = native_code.library_name()
    assert name.startswith("portscope_dispatch_") and name == native_code.library_name()
    assert (native_code.cache_dir() / name / f"{name}.so").exists()

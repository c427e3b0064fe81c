"""torch 2.5-2.9 support on any torch: the bridge (profiler/legacy_compile.py), driven with a stand-in for
Dynamo's callback setter, and the parsing of graph breaks from the `graph_breaks` log.

On torch >= 2.9 the recorder never installs it; these tests check its rule on any torch: the mode steps
aside when a compiled callable's wrapper sets a callback, and comes back only when that same wrapper
frame restores the prior one, whatever is toggled in between.
"""

from __future__ import annotations

import logging
from typing import Any

from torch.utils._python_dispatch import _get_current_dispatch_mode

from portscope.profiler import explain, legacy_compile, recorder
from portscope.profiler.compiled import graph_break_record

CALLBACK = object()


class FakeDynamo:
    def __init__(self) -> None:
        self.current: Any = None
        self.setter = legacy_compile.bridge(self._set)

    def _set(self, callback: Any) -> Any:
        prior, self.current = self.current, callback
        return prior

    def call(self, callback: Any, body: Any) -> Any:
        """Like Dynamo's wrappers: set a callback, run, restore the prior one from the same frame.
        CALLBACK is a compiled callable's wrapper; None is torch._dynamo.disable's."""
        prior = self.setter(callback)
        try:
            return body()
        finally:
            self.setter(prior)

    def compiled_call(self, body: Any) -> Any:
        return self.call(CALLBACK, body)

    def disabled_call(self, body: Any) -> Any:
        return self.call(None, body)


def _mode_on() -> bool:
    s = recorder.current_session()
    return s is not None and s.mode is not None and _get_current_dispatch_mode() is s.mode


def test_mode_steps_aside_for_the_compiled_call_and_comes_back() -> None:
    dynamo = FakeDynamo()
    seen: list[bool] = []
    with explain("bridge"):
        assert _mode_on()
        dynamo.compiled_call(lambda: seen.append(_mode_on()))
        seen.append(_mode_on())
    assert seen == [False, True]
    assert not _mode_on() and recorder.current_session().suspended_by is None


def test_toggles_inside_the_compiled_call_leave_the_mode_aside() -> None:
    dynamo = FakeDynamo()
    seen: list[bool] = []

    def body() -> None:
        dynamo.disabled_call(lambda: seen.append(_mode_on()))  # a disabled helper inside
        dynamo._set(None)  # Dynamo clearing the callback without the setter
        dynamo.disabled_call(lambda: None)
        dynamo._set(CALLBACK)
        dynamo.compiled_call(lambda: seen.append(_mode_on()))  # a nested compiled callable
        seen.append(_mode_on())

    with explain("bridge"):
        dynamo.compiled_call(body)
        seen.append(_mode_on())
    assert seen == [False, False, False, True]


def test_outside_regions_and_for_disabled_code_nothing_changes() -> None:
    dynamo = FakeDynamo()
    assert dynamo.compiled_call(lambda: 7) == 7 and dynamo.current is None
    with explain("bridge"):
        dynamo.disabled_call(lambda: None)
        assert _mode_on()


def test_region_closed_while_aside_leaves_no_mode_behind() -> None:
    dynamo = FakeDynamo()
    region = explain("inner")

    def body() -> None:
        region.__enter__()
        try:
            raise RuntimeError("boom")
        finally:
            region.__exit__(None, None, None)

    with explain("outer"):
        try:
            dynamo.compiled_call(body)
        except RuntimeError:
            pass
        assert _mode_on()
    assert _get_current_dispatch_mode() is None


# ---- graph breaks from the `graph_breaks` log (torch 2.5 has no structured graph-break artifact) ----

def _record(msg: str, args: tuple = (), exc: BaseException | None = None) -> logging.LogRecord:
    return logging.LogRecord("torch._dynamo.symbolic_convert.__graph_breaks", logging.DEBUG, __file__, 1, msg, args,
                             (type(exc), exc, None) if exc else None)


class Unsupported(Exception):
    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


def test_graph_break_log_record_of_torch_2_5() -> None:
    stack = ('  File "/work/model.py", line 12, in forward\n    h = self.block(x)\n'
             '  File "/work/block.py", line 27, in f\n    print("a graph break")\n')
    record = _record("Graph break: from user code at:\n%s", (stack,),
                     Unsupported("builtin: print [<class 'ConstantVariable'>] False\nmore detail"))
    assert graph_break_record(record) == ("/work/block.py:27", "builtin: print [<class 'ConstantVariable'>] False")


def test_graph_break_log_record_in_the_structured_wording() -> None:
    text = ("Graph break in user code at /work/block.py:11\nGraph Break Reason: Failed to trace builtin operator\n"
            "  Explanation: Dynamo does not know how to trace builtin operator `print`\n  Hint: Avoid calling it\n")
    site, reason = graph_break_record(_record(text))
    # the wording TORCH_TRACE logs get too (portscope.ingest.graph_breaks): reason, then the explanation
    assert (site, reason) == ("/work/block.py:11",
                              "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print`")


def test_graph_break_log_record_without_a_location() -> None:
    assert graph_break_record(_record("Graph break (details suppressed)")) == (None, "graph break")

"""The torch 2.5-2.8 bridge (profiler/legacy_compile.py), driven with a stand-in for Dynamo's callback setter.

On torch >= 2.9 the recorder never installs it; these tests check its rule on any torch: the mode steps
aside when a compiled callable's wrapper sets a callback, and comes back only when that same wrapper
frame restores the prior one, whatever is toggled in between.
"""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import _get_current_dispatch_mode

from portscope.profiler import explain, legacy_compile, recorder

CALLBACK = object()


class FakeDynamo:
    def __init__(self) -> None:
        self.current: Any = None
        self.setter = legacy_compile._bridge(self._set)

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
    assert not _mode_on() and recorder.current_session().mode_suspended is False


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

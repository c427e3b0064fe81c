"""torch 2.5-2.9: keep torch.compile compiling while a region's dispatch mode is on.

torch 2.5-2.8 have no ``TorchDispatchMode.ignore_compile_internals``: with any dispatch mode on
the stack, Dynamo refuses to compile a frame and marks its code eager for good (its cache is
dropped, even for code compiled before the region). And up to 2.9, code compiled without the
mode fails its tensor guards under it (the thread's dispatch keys then include ``Python``), so
every call would recompile until the cache limit, and then run eagerly for good. (Newer torch
tells its guards about modes that ignore compile internals; the recorder checks for that.)

The bridge takes the region's mode off the stack when a compiled callable's wrapper sets
Dynamo's frame callback, and puts it back when that same wrapper (the same Python frame) restores
the prior callback on its way out. Whatever Dynamo toggles in between (its own disabled helpers,
a compiled graph's runtime wrapper) is left alone: Dynamo clears and restores the callback there
without always passing through the setter. Dynamo sets the callback through
``torch._dynamo.eval_frame._maybe_set_eval_frame`` on 2.5-2.9; where that name is missing,
``install()`` returns False and the recorder warns instead.

What a region records inside compiled callables on these versions: compile events, and each
compiled-graph call as one operator with its tensors (so targets predict a graph as one device
program). Operators inside graphs and eager code between graph breaks run without the mode, so
they are not recorded op by op.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from torch.utils._python_dispatch import _get_current_dispatch_mode

from ._thread_state import current_session

_MARK = "_portscope_bridge"


def _step_aside(wrapper_frame: Any) -> None:
    s = current_session()
    if s is None or s.mode is None or not s.regions or s.suspended_by is not None:
        return
    if _get_current_dispatch_mode() is s.mode:
        s.mode.__exit__(None, None, None)
        s.suspended_by = wrapper_frame


def _step_back(wrapper_frame: Any) -> None:
    s = current_session()
    if s is not None and s.suspended_by is wrapper_frame:  # a frame, never None
        s.suspended_by = None
        if s.mode is not None:
            s.mode.__enter__()


def bridge(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def set_callback(callback: Any) -> Any:
        caller = sys._getframe(1)
        if callback is not None:  # False is Dynamo's run-only mode: guards are still checked
            _step_aside(caller)
            return original(callback)
        prior = original(callback)
        _step_back(caller)
        return prior

    setattr(set_callback, _MARK, True)
    set_callback.__wrapped__ = original  # type: ignore[attr-defined]
    return set_callback


def install() -> bool:
    """Wrap Dynamo's callback setter once per process; False where this torch has none."""
    try:
        from torch._dynamo import eval_frame
    except ImportError:
        return False
    original = getattr(eval_frame, "_maybe_set_eval_frame", None)
    if not callable(original):
        return False
    if not getattr(original, _MARK, False):
        eval_frame._maybe_set_eval_frame = bridge(original)
    return True

"""This thread's recording session slot and Dynamo skipping: the leaf the recorder, the compile watcher
(compiled.py) and the torch 2.5-2.9 bridge (legacy_compile.py) share, so none of them imports another
to reach it."""

from __future__ import annotations

import threading
from typing import Any

local = threading.local()  # .session: the recorder's Session of this thread, once one was made


def current_session() -> Any:
    """This thread's session (a recorder.Session), without creating one; None when none was made."""
    return getattr(local, "session", None)


def skip_dynamo(code: Any) -> bool:
    """Tell Dynamo never to trace this code (nor what it calls), without a per-call wrapper."""
    try:
        from torch._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except ImportError:  # older torch: callers keep a disable wrapper instead
        return False
    set_code_exec_strategy(code, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))
    return True

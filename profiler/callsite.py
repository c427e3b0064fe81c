"""Cheap call sites: the first frame outside torch/transformers/portscope, and whole stacks."""

from __future__ import annotations

import os
import sys
from types import CodeType, FrameType

import torch

_LIBRARY_DIRS: list[str] = []


def _library_dirs() -> list[str]:
    if not _LIBRARY_DIRS:
        import portscope.app

        dirs = [os.path.dirname(torch.__file__), os.path.dirname(__file__), os.path.dirname(portscope.app.__file__)]
        try:
            import transformers

            dirs.append(os.path.dirname(transformers.__file__))
        except ImportError:
            pass
        import portscope.ingest

        dirs.append(os.path.dirname(portscope.ingest.__file__))
        _LIBRARY_DIRS.extend(os.path.realpath(d) + os.sep for d in dirs)
        _LIBRARY_DIRS.extend(d + os.sep for d in dirs)
    return _LIBRARY_DIRS


_IS_LIBRARY: dict[CodeType, bool] = {}
# portscope modules that play the user's part (the demo's model calls), so their lines are call sites
_USER_CODE = (os.path.join("profiler", "demo.py"), os.path.join("profiler", "compare.py"))


def _is_library(code: CodeType) -> bool:
    known = _IS_LIBRARY.get(code)
    if known is None:
        name = code.co_filename
        known = (name.startswith(tuple(_library_dirs())) or name.startswith("<frozen")) and not name.endswith(_USER_CODE)
        _IS_LIBRARY[code] = known
    return known


def raw_stack(skip: int = 2) -> tuple[tuple[CodeType, int], ...]:
    """The whole Python stack as (code, line) pairs, innermost first (cheap; formatted later)."""
    out = []
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None:
        out.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
    return tuple(out)


def first_user(stack: tuple[tuple[CodeType, int], ...]) -> str | None:
    """Call site string of the first non-library frame of a raw stack."""
    for code, line in stack:
        if not _is_library(code):
            return f"{code.co_filename}:{line} ({code.co_name})"
    return None

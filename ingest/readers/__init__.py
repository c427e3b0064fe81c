"""Readers of traces other tools write: PyTorch profiler (Kineto) JSON, fallback logs, TORCH_TRACE logs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .fallback_log import read_fallback_log
from .kineto import read_kineto
from .source import SizeCaps
from .torch_trace import read_torch_trace

if TYPE_CHECKING:
    from ..spill import map_large_blocks
    from .kineto_stream import collect_file as collect_kineto_file

_LAZY = {  # public name -> (private module, its name there): imported on first use (msgspec, ctypes)
    "collect_kineto_file": ("kineto_stream", "collect_file"),
    "map_large_blocks": ("..spill", "map_large_blocks"),
}

__all__ = ["SizeCaps", "collect_kineto_file", "map_large_blocks", "read_fallback_log", "read_kineto", "read_torch_trace"]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module if module.startswith("..") else f".{module}", __name__), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

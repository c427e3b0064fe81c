"""Record (or predict) what the backend had to do for regions of a PyTorch program.

`explain` and friends import torch on first use, so `portscope.profiler.cli` and `portscope.profiler.targets`
load where torch is not installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .region import Region, explain, explain_steady, save

__all__ = ["Region", "explain", "explain_steady", "save"]


def __getattr__(name: str) -> object:
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.region"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

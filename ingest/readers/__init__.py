"""Readers of traces other tools write: PyTorch profiler (Kineto) JSON, fallback logs, TORCH_TRACE logs."""

from ._source import SizeCaps
from .fallback_log import read_fallback_log
from .kineto import read_kineto
from .torch_trace import read_torch_trace

__all__ = ["SizeCaps", "read_fallback_log", "read_kineto", "read_torch_trace"]

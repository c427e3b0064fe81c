"""PyTorch profiler / Kineto Chrome JSON -> Trace.

One streaming pass (``_kineto_stream``) decodes the events in bounded batches and keeps
what the converter needs: operators as compact columns, the other categories as tuples;
``_kineto_link`` then nests them per thread (ops in ops, Python frames, runtime calls),
links device work to the operator that launched it (correlation -> runtime call ->
innermost enclosing cpu_op) and builds the tables.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator
from pathlib import Path

from .. import progress
from ..trace import Trace
from ._kineto_events import FORMAT, KinetoEvents
from ._source import DEFAULT_CAPS, SizeCaps
from .chrome_json import ChromeDocument, _SplitFailed, whole

__all__ = ["FORMAT", "KinetoEvents", "collect", "read_kineto"]


def read_kineto(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, infer_fallback: bool = False, sliced: bool = False) -> Trace:
    """Convert a PyTorch profiler Chrome trace (.json or .json.gz) into a Trace, streaming the input.

    infer_fallback: mark leaf operators of a GPU trace that launched no GPU work as cpu_fallback
    (Kineto records no tensor devices, so this is a guess: host-side bookkeeping ops count too).
    sliced: give the big tables (ops, host and device lanes, transfers, signals, runtime calls) as `Trace.slices`,
    made as `write_trace` writes them: converting in bounded memory, the events' columns spilled to temporary
    files past one slice (``_kineto_slices`` for operators only, ``_kineto_gpu`` for the rest, ``_npu_lanes`` with
    NPU lanes, linked on disk by ``_npu_link``).
    """
    from . import npu_kineto  # hook: NPU lanes (e.g. RBLN's Kineto plugin); None for other traces
    from ._kineto_gpu import gpu_slices
    from ._kineto_link import build_trace
    from ._kineto_slices import op_slices
    from ._kineto_stream import collect_file
    from ._npu_lanes import npu_slices
    from ._npu_link import link_launches

    path = Path(path)
    collecting = gc.isenabled()
    gc.disable()  # many small tuples, no cycles: the collector would only rescan them
    try:
        events, lanes = collect_file(path, caps)
        progress.current().stage(progress.Stage.LINKING)
        if lanes is not None:
            link_launches(events, lanes)  # launch ids as correlations, runtime work on NPU rows moved to the device
        slice_gpu = (gpu_slices if lanes is None else functools.partial(npu_slices, layout=lanes)) if sliced else None
        trace = build_trace(path, events, infer_fallback=infer_fallback, lanes=lanes, release=True,
                            slice_ops=op_slices if sliced else None, slice_gpu=slice_gpu)
        return npu_kineto.finish(trace, lanes) if lanes is not None else trace
    finally:
        if collecting:
            gc.enable()


def collect(path: Path, doc: ChromeDocument) -> KinetoEvents:
    """Validate and keep what the converter uses from every event of a parsed document (one dict per
    event: the general path of the streaming reader); one TraceFormatError lists the problems."""
    from ._kineto_stream import Collector

    def read(batches: Iterator[list]) -> KinetoEvents:
        collector = Collector(path, dict(doc.metadata))
        for batch in batches:
            collector.add(batch)
        return collector.finish()

    try:
        return read(doc.batches())
    except _SplitFailed:
        return read(whole(doc).batches())

"""The sliced conversion (what `portscope convert` runs) checked against the whole one on every fuzz input.

With the bounded-memory readers' knobs made tiny (a few rows a slice, a spill, a run, a batch), an input converted
with ``sliced=True`` and written (`write_trace`, then read back) must give a TraceFormatError -- while converting
or while writing -- or the same tables as the whole conversion written and read back the same way. Anything else
(another exception, different rows, a trace accepted sliced but refused whole) is raised as SlicedMismatch.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path

from portscope.ingest.errors import TraceFormatError

# (module, knob, tiny value): a module or knob that is gone is an error (drop it here when a reader drops it)
TINY_KNOBS = (
    ("portscope.ingest.assemble", "SLICE_ROWS", 3),
    ("portscope.ingest.readers.chrome_events", "HOLD_ROWS", 4),
    ("portscope.ingest.link_nesting", "CHUNK_ROWS", 4),
    ("portscope.ingest.link_nesting", "SORT_ROWS", 5),
    ("portscope.ingest.readers._kineto_ops", "SPILL_ROWS", 3),
    ("portscope.ingest.readers.kineto_rows", "SPILL_ROWS", 3),
    ("portscope.ingest.readers.kineto", "SLICE_ROWS", 2),
    ("portscope.ingest.readers.kineto", "SPILL_EVENTS", 1),
    ("portscope.ingest.readers.ascend_csv", "BLOCK_BYTES", 1),
    ("portscope.ingest.batches", "_BATCH_ROWS", 5),
)


class SlicedMismatch(AssertionError):
    """The sliced conversion of an input did not give what the whole one gave."""


@contextlib.contextmanager
def tiny_knobs() -> Iterator[None]:
    """Every knob of TINY_KNOBS set to its tiny value inside the block, restored after; a knob its module no longer
    has raises AttributeError (a check that silently sets nothing would compare nothing)."""
    saved = []
    try:
        for module_name, knob, value in TINY_KNOBS:
            module = importlib.import_module(module_name)
            if not hasattr(module, knob):
                raise AttributeError(f"{module_name} has no knob {knob}: drop it from TINY_KNOBS")
            saved.append((module, knob, getattr(module, knob)))
            setattr(module, knob, value)
        yield
    finally:
        for module, knob, value in reversed(saved):
            setattr(module, knob, value)


def _written(trace: object, out: Path) -> object:
    from portscope.ingest.trace import read_trace, write_trace

    write_trace(trace, out)  # type: ignore[arg-type]
    try:
        return read_trace(out)
    finally:
        out.unlink(missing_ok=True)


def check_sliced(read_sliced: Callable[[Path], object], path: Path, whole: object | None, scratch: Path) -> str:
    """Convert `path` sliced with tiny knobs and write it; compare with `whole` (the whole conversion's trace, None
    when it raised TraceFormatError). Returns "error" or "ok"; raises SlicedMismatch."""
    from portscope.ingest.schema import TABLES

    try:
        with tiny_knobs():
            got = _written(read_sliced(path), scratch / f"{path.stem}-sliced.arrow")
    except TraceFormatError:
        return "error"
    if whole is None:
        raise SlicedMismatch(f"{path}: converted sliced, but the whole conversion raised TraceFormatError")
    try:
        want = _written(whole, scratch / f"{path.stem}-whole.arrow")
    except TraceFormatError as exc:
        raise SlicedMismatch(f"{path}: written sliced, but the whole conversion could not be written: {exc}") from None
    differ = [name for name in TABLES if not want[name].equals(got[name])]  # type: ignore[index]
    if differ:
        raise SlicedMismatch(f"{path}: the sliced conversion's tables {differ} differ from the whole conversion's")
    return "ok"


__all__ = ["TINY_KNOBS", "SlicedMismatch", "check_sliced", "tiny_knobs"]

"""`explain()` regions: what the backend had to do inside a span of the program."""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from portscope.ingest.errors import UsageError
from portscope.ingest.report import format_region, region_report_data
from portscope.ingest.schema import Mode, Phase, Source
from portscope.ingest.summary import summarize
from portscope.ingest.trace import RunInfo, Trace, write_trace

from . import callsite, recorder
from .events import RegionPrediction
from .tables import build_trace, model_summary
from .targets.cost_sources import used_sources


@dataclasses.dataclass
class RecordRun:
    """Defaults and collected regions while `portscope record` runs a script."""

    target: str | None = None
    with_stack: bool = False
    library: tuple[str, ...] = ()
    regions: list[Region] = dataclasses.field(default_factory=list)


recording_run: contextvars.ContextVar[RecordRun | None] = contextvars.ContextVar("portscope_record_run", default=None)


class Region:
    """A recorded span of a program. Use through `explain()`."""

    def __init__(
        self,
        name: str,
        *,
        with_stack: bool = False,
        target: Any = None,
        device: str | None = None,
        mode: Mode = Mode.EAGER,
        phase: Phase = Phase.NONE,
        tags: dict[str, str] | None = None,
        timeline: bool = False,
        library: tuple[str, ...] | None = None,
        memory: bool = False,
    ) -> None:
        self.name = name
        self.memory_wanted = memory  # tensor storages allocated and released (profiler/memory.py)
        self.memory: Any = None  # the MemoryTracker recording this region (its own, or its parent's)
        self._memory_owner = False
        self.with_stack = with_stack
        self.library = library  # packages whose frames are not call sites (None: the enclosing region's)
        self.user_root: str | None = None  # where the user's files are (call sites are relative to it)
        self.device = device
        self.mode = mode
        self.phase = phase
        self.tags = dict(tags or {})
        self.raw: list[recorder.RawOp] = []
        self.children: list[Region] = []
        self.parent: Region | None = None
        self.start_ns = 0
        self.end_ns = 0
        self.wall_start = 0.0
        self.error: str | None = None
        self.peak_memory_bytes: int | None = None
        self.model: dict[str, Any] = {}
        self.predictor: Any = None
        self.prediction: RegionPrediction | None = None  # the predictor's outcome for this region (predict.py)
        self.timeline_wanted = timeline  # engine schedules: torch.profiler timeline (profiler/timeline.py)
        self.timeline: Any = None
        self._timeline_recorder: Any = None
        self.compile_events: list[Any] = []  # torch.compile events (profiler/compiled.py)
        self._target = target
        self._trace: Trace | None = None
        self._saved_with_stack = False
        self._open = False

    # ---- context manager ----------------------------------------------------------------

    def __enter__(self) -> Region:
        if self._open or self.end_ns:
            raise RuntimeError(f"region {self.name!r} can be entered once")
        s = recorder.session()
        self.user_root = callsite.default_user_root()  # now: `portscope record` sets sys.argv only while the script runs
        self._check_target(s.regions[-1] if s.regions else None)
        if s.regions:
            self.parent = s.regions[-1]
            self.parent.children.append(self)
            if self.library is None:
                self.library = self.parent.library
        else:
            run = recording_run.get()
            if run is not None:
                run.regions.append(self)
        if self._target is not None:
            from .static_predict import predictor_for

            parent_predictor = self.parent.predictor if self.parent is not None else None
            self.predictor = parent_predictor or predictor_for(self._target)
            self.predictor.attach(self, s)
        elif self.parent is not None and self.parent.predictor is not None:
            self.predictor = self.parent.predictor
            self.predictor.attach(self, s)
        self._saved_with_stack = s.with_stack
        s.with_stack = s.with_stack or self.with_stack
        self.memory = self.parent.memory if self.parent is not None and self.parent.memory is not None else None
        if self.memory is None and self.memory_wanted and self.predictor is None:
            from .memory import MemoryTracker

            self.memory, self._memory_owner = MemoryTracker(s), True
            s.hooks.append(self.memory.on_op)
        self._cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        if self._cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        if not s.regions:
            recorder.start(s)
        s.regions.append(self)
        if self.timeline_wanted:  # engine schedules: the profiler starts outside the measured span
            from .timeline import TimelineRecorder

            recorder_ = TimelineRecorder()
            self._timeline_recorder = recorder_ if recorder_.start() else None
        self._open = True
        self.wall_start = time.time()
        self.start_ns = time.perf_counter_ns()
        return self

    def _check_target(self, parent: Region | None) -> None:
        """A nested region predicts with its parent's predictor: its target, if it names one, must be the same."""
        if self._target is None or parent is None or parent.predictor is None:
            return
        from .targets import load_target

        mine, theirs = load_target(self._target), parent.predictor.target
        if mine != theirs:
            raise UsageError(f"region {self.name!r}: target {mine.name} ({mine.path}) differs from the enclosing "
                             f"region's target {theirs.name} ({theirs.path}); nested regions predict for one target")

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if self._cuda:
            torch.cuda.synchronize()
        self.end_ns = time.perf_counter_ns()
        if self._timeline_recorder is not None:  # engine schedules
            self.timeline = self._timeline_recorder.stop()
            self._timeline_recorder = None
        s = recorder.session()
        if s.regions and s.regions[-1] is self:
            s.regions.pop()
        s.with_stack = self._saved_with_stack
        if self._memory_owner:
            self.memory.stop()
            s.hooks.remove(self.memory.on_op)
        if self.predictor is not None:
            self.predictor.detach(self, s)
        self.model = model_summary(s.root_model)
        if not s.regions:
            recorder.stop(s)
            s.root_model = None
        if self._cuda:
            self.peak_memory_bytes = int(torch.cuda.max_memory_allocated())
        if exc_type is not None:
            self.error = f"{exc_type.__name__}: {exc}"
        self._open = False
        return False  # never swallow the exception

    # ---- results ------------------------------------------------------------------------

    @property
    def predicted(self) -> bool:
        return self.predictor is not None

    def to_trace(self, run_info: RunInfo | None = None) -> Trace:
        """This region and its nested regions as a Trace."""
        if self._open:
            raise RuntimeError(f"region {self.name!r} is still open")
        if run_info is not None:
            return build_trace([self], run_info)
        if self._trace is None:
            self._trace = build_trace([self], default_run_info([self]))
        return self._trace

    def report(self) -> str:
        """The text report: header, Signal | Count | Bytes | Note, operators, d2h volume."""
        trace = self.to_trace()
        return format_region(summarize(trace, 0), source=trace.run_info.source, target=trace.run_info.target)

    def verdict(self) -> dict[str, Any]:
        """{"clean": bool, "reasons": [...]}."""
        return summarize(self.to_trace(), 0).verdict()

    def dump(self) -> dict[str, Any]:
        """Plain JSON-serialisable counters (for CI)."""
        trace = self.to_trace()
        data = region_report_data(summarize(trace, 0))
        data["source"] = trace.run_info.source.value
        data["target"] = trace.run_info.target
        return data

    def save(self, path: str | Path, *, run_info: RunInfo | None = None) -> Path:
        """Write this region (and its nested regions) as a trace file."""
        return save([self], path, run_info=run_info)


def explain(
    name: str = "region",
    *,
    with_stack: bool = False,
    target: str | Path | None = None,
    device: str | None = None,
    mode: Mode = Mode.EAGER,
    phase: Phase = Phase.NONE,
    tags: dict[str, str] | None = None,
    timeline: bool = False,
    library: Sequence[str] | None = None,
    memory: bool = False,
) -> Region:
    """A region that records every operator dispatched inside it.

    with_stack: also record each operator's call site (the model line that made it) and whole stack.
    library: packages whose frames are never call sites, besides torch, portscope and Python's own
        (default: PORTSCOPE_LIBRARY, comma-separated), e.g. ["transformers"] for the line in your script.
    target: predict for a target device (name or TOML path) instead of measuring.
    device: the device the region works on (default: the most used non-host device).
    timeline: also record a torch.profiler (Kineto) timeline: engine slices per host thread, CUDA stream, copy direction.
    memory: also record the tensor storages its operators allocate and release, per device (profiler/memory.py):
        each region's peak, bytes live at exit, allocations and the call sites that allocated most.
    """
    run = recording_run.get()
    if run is not None:
        target = target if target is not None else run.target
        with_stack = with_stack or run.with_stack
        library = library if library is not None else (run.library or None)
    if library is not None:
        from .callsite import library_dirs

        library_dirs(library)  # an unknown package is a usage error now, not when the trace is built
    return Region(name, with_stack=with_stack, target=target, device=device, mode=mode, phase=phase, tags=tags,
                  timeline=timeline, library=tuple(library) if library is not None else None, memory=memory)


def explain_steady(
    step: Callable[[], Any],
    *,
    warmup: int = 2,
    return_cold: bool = False,
    name: str = "step",
    **explain_kwargs: Any,
) -> Region | tuple[Region, Region]:
    """One region around the first call of `step` (cold), one around a later call (warm).

    warmup: calls before the warm region, the cold one included (at least 1).
    """
    if warmup < 1:
        raise ValueError("warmup must be at least 1 (the cold call)")
    with explain(f"{name}:cold", phase=Phase.COLD, **explain_kwargs) as cold:
        step()
    for _ in range(warmup - 1):
        step()
    with explain(f"{name}:warm", phase=Phase.WARM, **explain_kwargs) as warm:
        step()
    return (cold, warm) if return_cold else warm


def default_run_info(regions: list[Region]) -> RunInfo:
    """Run info for recorded regions: torch, devices, command, model, measured or predicted."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in range(torch.cuda.device_count())]
    predictor = next((r.predictor for r in regions if r.predictor is not None), None)
    model = dict(next((r.model for r in regions if r.model), {}))
    if predictor is not None and model:
        model["device"] = predictor.device  # where the prediction puts it (it ran on the host)
    start = min((r.wall_start for r in regions), default=time.time())
    return RunInfo(
        source=Source.PREDICTED if predictor is not None else Source.MEASURED,
        target=predictor.target.name if predictor is not None else None,
        torch_version=torch.__version__,
        devices=devices,
        command=" ".join(sys.argv),
        model=model,
        start_time=datetime.datetime.fromtimestamp(start, datetime.UTC).isoformat(timespec="seconds"),
        producer="portscope 0.1.0",
        config=predictor.run_config() if hasattr(predictor, "run_config") else {},  # static-shape targets
        # where each cost figure of the target comes from: predicted times say "assumed" when one is on the critical path
        extra={"cost_sources": used_sources(predictor.target)} if predictor is not None else {},
    )


def save(regions: list[Region], path: str | Path, *, run_info: RunInfo | None = None) -> Path:
    """Write several regions (and their nested regions) as one trace file, atomically."""
    regions = [r for r in regions if r.parent is None or r.parent not in regions]
    if not regions:
        raise ValueError("save() needs at least one region")
    trace = build_trace(regions, run_info or default_run_info(regions))
    return write_trace(trace, path)

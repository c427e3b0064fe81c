"""Calibrate a target's cost figures from measured traces of the device (`portscope targets calibrate`).

Input: traces any reader loads (a PyTorch-profiler Kineto/Chrome JSON, torch_npu tables, portscope's own measured
runs). Output: the base target's TOML with the figures the traces give replaced, each with its source in the
`[sources]` table (``measured: <trace file>, n=..., fit error ...``); every other figure keeps the base's value and
source. Pure: numpy and the ingest readers, no torch.

What is measured, and how:

* **engines** (``engines.<name>.latency_ns / flops_per_ns / bytes_per_ns``): one sample per operator call: its own
  device compute time (the kernels it launched itself; its copies go to the DMA fit) when the trace has device work,
  else (a host-only trace: the CPU is the device, it issues and runs each operator in turn) the inclusive time of
  each outermost operator plus the host gap before it (Python and framework time since the previous operator that
  does work, views included, up to GAP_CAP_NS): the latency then carries the per-operator overhead of the host.
  FLOPs and bytes come from the recorded input shapes and dtypes. The calls go to the engine the target's ``ops``
  patterns give (GEMM and attention operators no pattern names go to the matrix engine), views do no work and are
  left out, and so are (`usable_calls`) operators that are not ATen's when some are, and calls without sizes when
  others have them. Calls of the same operator with the same FLOPs and bytes form a bucket; its median is the
  bucket's time, and a call more than 3x off its bucket's median is an outlier (counted and reported, not fitted).
  The schedule's model ``latency + max(flops / flops_per_ns, bytes / bytes_per_ns)`` is then fitted to the bucket
  medians by least squares weighted by the calls per bucket: a flops-only line, a bytes-only line, and the max of
  both (each bucket assigned to the term that dominates it, refitted until stable, from the two lines' slopes and
  from a fit of their sum); the one with the least squared error wins. Without shapes only the latency is fitted:
  the calls' mean of bucket medians.
* **transfers** (``engines.dma_h2d / dma_d2h``): ``latency + bytes / bytes_per_ns`` fitted the same way on the
  trace's copies per direction.
* **dispatch** (``cost.dispatch_ns``): the median of the runtime's launch calls (``*Launch*``).
* **compiles** (``cost.compile_ns``): the median compile time of the trace's compile rows.
* **per operator kind** (``engines.<name>.kinds.<kind>.*``): the same fit on one kind's calls (`op_categories`:
  elementwise, reduction, copy...) when they have MIN_KIND_SHAPES shapes or more; its error and the engine fit's
  on the same calls are reported either way, the kind's figures written (unless ``per_kind=False``) when its
  error is the smaller. An engine whose calls are all of one kind gets none.
* **sync** (``cost.sync_ns``): the median of each host wait's own time (`calibrate_samples.sync_costs`: a
  synchronize call or a blocking d2h copy, from the end of the device work it waited for to its return).
* **host** (``cost.host_flops_per_ns``): ``latency + flops / rate`` fitted to the calls that ran on the host (every
  call of a host-only trace, a measured run's fallbacks); the rate is kept (a schedule's host call costs
  ``dispatch_ns + flops / host_flops_per_ns``) when the line's fit error is at most HOST_MAX_ERROR.

A figure the traces cannot give keeps the base's value and source; where that source is "assumed", the file says
why (``assumed: <trace> hold no synchronize call...``).

The fit error is the count-weighted median of ``|fitted - median| / median`` over the buckets.
"""
from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from portscope.ingest.catalog import SourceKind
from portscope.ingest.errors import TargetError
from portscope.ingest.op_categories import operator_category

from .calibrate_fit import CalibrationError, Fit, Sample, error_of, fit_engine, fit_transfer, usable_calls
from .calibrate_samples import (
    TraceSamples,
    engine_names,
    engine_of,
    is_collective,
    load_samples,
    samples_from_trace,
)
from .targets import Target, builtin_targets, parse_target

MIN_KIND_SHAPES = 3  # an operator kind gets figures of its own from this many distinct shapes up
HOST_MAX_ERROR = 1.0  # a host FLOP rate whose line misses the calls by more (median relative error) is not kept

__all__ = ["CalibrationError", "Calibration", "Fit", "Sample", "TraceSamples", "calibrate", "fit_engine", "fit_transfer",
           "load_samples", "engine_names", "engine_of", "is_collective", "render_toml", "samples_from_trace", "usable_calls",
           "write_calibrated"]


@dataclasses.dataclass
class Calibration:
    """What the traces gave: per figure path its value and source; per engine its fit; what was reported only."""

    base: str
    figures: dict[str, float] = dataclasses.field(default_factory=dict)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    fits: dict[str, Fit] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    kind_errors: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)  # engine.kind -> (own, engine's)

    def summary(self) -> str:
        lines = [f"calibrated from base {self.base}:"]
        for figure in sorted(self.figures):
            lines.append(f"  {figure} = {_number(self.figures[figure])}  ({self.sources[figure]})")
        for engine, fit in sorted(self.fits.items()):
            if fit.outliers:
                lines.append(f"  {engine}: {fit.outliers} outlier call(s) left out, e.g. {'; '.join(fit.worst_outliers)}")
        lines.extend(f"  {note}" for note in self.notes)
        lines.extend(f"  {key}: fit error {own:.0%} fitted on its own, {engine:.0%} with its engine's figures"
                     for key, (own, engine) in sorted(self.kind_errors.items()))
        lines.extend(f"  {figure}: {self.sources[figure]}" for figure in sorted(self.sources) if figure not in self.figures)
        return "\n".join(lines)


# ---- the target file ------------------------------------------------------------------------------


def base_document(base: str | Path) -> tuple[dict[str, Any], str]:
    """The raw TOML document of a built-in target (by name) or a target file, and how to name it."""
    text_name = str(base)
    if text_name in builtin_targets():
        text = (resources.files("portscope.profiler.targets") / f"{text_name}.toml").read_text(encoding="utf-8")
        shown = text_name
    else:
        path = Path(text_name)
        if not path.exists():
            raise TargetError(text_name, f"no such target file, and not a built-in target ({', '.join(builtin_targets())})")
        text, shown = path.read_text(encoding="utf-8"), path.name
    try:
        return tomllib.loads(text), shown
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(text_name, f"not valid TOML: {exc}") from None


def _number(v: float) -> int | float:
    """A figure as the file writes it: whole ns as integers, rates to 4 significant digits."""
    if abs(v) >= 100 or v == 0:
        return int(round(v))
    return float(f"{v:.4g}")


def _source(files: Sequence[str], n: int, extra: str = "") -> str:
    return f"measured: {', '.join(files)}, n={n}" + (f", {extra}" if extra else "")


def _figure(cal: Calibration, table: dict[str, Any], path: str, key: str, value: float, source: str) -> None:
    """Set one figure of the document (`table[key]`, figure path `path`) with its source."""
    table[key] = _number(value)
    cal.figures[path] = value
    cal.sources[path] = source


def _fit_kinds(cal: Calibration, table: dict[str, Any], engine: str, fit: Fit, samples: list[Sample],
               files: list[str], *, per_kind: bool) -> None:
    """Per operator kind of the engine's calls with MIN_KIND_SHAPES shapes or more: the kind's own fit, and its
    error against the engine's on the same calls (a note); with `per_kind`, written as the kind's figures."""
    by_kind: dict[str, list[Sample]] = {}
    for sample in samples:
        by_kind.setdefault(operator_category(sample.name).value, []).append(sample)
    if len(by_kind) < 2:  # one kind: its fit is the engine's
        return
    for kind, calls in sorted(by_kind.items()):
        own = fit_engine(calls)
        if own.buckets < MIN_KIND_SHAPES:
            continue
        engine_error = error_of(fit, calls)
        cal.kind_errors[f"{engine}.{kind}"] = (own.error, engine_error)
        if not per_kind or own.error >= engine_error:  # the engine's figures time this kind as well or better
            continue
        src = _source(files, own.n, f"{own.buckets} shapes, fit error {own.error:.0%}, {own.outliers} outliers left "
                                    f"out ({kind} operators only)")
        kinds = table.setdefault("kinds", {}).setdefault(kind, {})
        cal.fits[f"{engine}.{kind}"] = own
        for figure in ("latency_ns", "flops_per_ns", "bytes_per_ns"):  # all three: a 0 rate drops its term
            value = getattr(own, figure) if figure in own.fitted else 0.0
            _figure(cal, kinds, f"engines.{engine}.kinds.{kind}.{figure}", figure, value, src)


def _fit_sync(cal: Calibration, raw: dict[str, Any], syncs: list[float], files: list[str]) -> None:
    """cost.sync_ns: the median of the host waits' own time (`sync_costs`); without any, the base's figure, and
    where the base assumes it, the reason in [sources]."""
    if syncs:
        src = _source(files, len(syncs), "median of the synchronize calls and blocking d2h copies, each from the end "
                                         "of the device work it waited for to its return")
        _figure(cal, raw.setdefault("cost", {}), "cost.sync_ns", "sync_ns", float(np.median(syncs)), src)
    elif SourceKind.of_text(raw.get("sources", {}).get("cost.sync_ns", "assumed")) is SourceKind.ASSUMED:
        cal.sources["cost.sync_ns"] = f"assumed: {', '.join(files)} hold no synchronize call or blocking d2h copy"


def _fit_host(cal: Calibration, raw: dict[str, Any], calls: list[Sample], files: list[str], *, host_only: bool) -> None:
    """cost.host_flops_per_ns: ``flops / host_flops_per_ns`` fitted to the calls that ran on the host (a host-only
    trace's, a measured run's fallbacks); without any, the base's figure and, where assumed, the reason."""
    sized = [Sample(s.name, s.flops, 0.0, s.dur_ns) for s in usable_calls(calls) if s.flops > 0]
    fit = fit_engine(sized) if len({s.flops for s in sized}) > 1 else None
    if fit is not None and fit.flops_per_ns > 0 and fit.error <= HOST_MAX_ERROR:
        what = "every operator of a host-only trace" if host_only else "the fallbacks"
        src = _source(files, fit.n, f"{fit.buckets} shapes, fit error {fit.error:.0%}, {fit.outliers} outliers "
                                    f"left out ({what}: latency + flops / rate, the rate kept)")
        _figure(cal, raw.setdefault("cost", {}), "cost.host_flops_per_ns", "host_flops_per_ns", fit.flops_per_ns, src)
    elif SourceKind.of_text(raw.get("sources", {}).get("cost.host_flops_per_ns", "assumed")) is SourceKind.ASSUMED:
        why = ("no operator ran on the host" if not calls else "the host calls' time did not follow their FLOPs"
               + (f" (fit error {fit.error:.0%})" if fit is not None else ""))
        cal.sources["cost.host_flops_per_ns"] = f"assumed: {why} in {', '.join(files)}"


def calibrate(paths: Sequence[str | Path], base: str | Path, *, name: str | None = None,
              samples: list[tuple[str, TraceSamples]] | None = None,
              per_kind: bool = True) -> tuple[dict[str, Any], Calibration]:
    """The base target's document with the figures the traces give, and what was fitted (see the module doc).

    per_kind: also fit each operator kind of an engine on its own ([engines.NAME.kinds.KIND]).

    Raises CalibrationError when the traces hold nothing usable."""
    raw, shown = base_document(base)
    loaded = samples if samples is not None else load_samples(paths)
    files = [f for f, _ in loaded]
    cal = Calibration(base=shown)
    patterned, default, matrix, dma = engine_names(raw)
    engines = raw.setdefault("engines", {})
    by_engine: dict[str, list[Sample]] = {}
    host_only = False
    collectives = 0
    for _, s in loaded:
        host_only = host_only or not s.device_time
        for sample in s.ops:
            if is_collective(sample.name):
                collectives += 1
                continue
            engine = engine_of(sample.name, patterned, default, matrix)
            if engine is not None:
                by_engine.setdefault(engine, []).append(sample)
    if collectives:
        cal.notes.append(f"{collectives} collective calls left out of the engine fits (their time is waiting on peers)")
    for engine, every in sorted(by_engine.items()):
        samples_ = usable_calls(every)
        if len(samples_) < len(every):
            cal.notes.append(f"{engine}: {len(every) - len(samples_)} of {len(every)} calls left out (not ATen "
                             "operators, or sizes the trace does not record)")
        fit = fit_engine(samples_)
        cal.fits[engine] = fit
        what = "host-only trace: outermost operators' time + the host gap before each" if host_only else "operators' own device time"
        src = _source(files, fit.n, f"{fit.buckets} shapes, fit error {fit.error:.0%}, "
                                    f"{fit.outliers} outliers left out ({what})")
        for figure in fit.fitted:
            _figure(cal, engines[engine], f"engines.{engine}.{figure}", figure, getattr(fit, figure), src)
        if "flops_per_ns" in fit.fitted and not fit.flops_per_ns or "bytes_per_ns" in fit.fitted and not fit.bytes_per_ns:
            cal.notes.append(f"{engine}: a rate fitted as 0 drops its term (the calls' time did not grow with it)")
        _fit_kinds(cal, engines[engine], engine, fit, samples_, files, per_kind=per_kind)
    copies: dict[str, list[Sample]] = {}
    for _, s in loaded:
        for direction, samples_ in s.copies.items():
            copies.setdefault(direction, []).extend(samples_)
    for direction, samples_ in sorted(copies.items()):
        engine = dma.get(direction)
        if engine is None:
            cal.notes.append(f"{len(samples_)} {direction} copies: the base has no dma_{direction} engine to calibrate")
            continue
        fit = fit_transfer(samples_)
        cal.fits[engine] = fit
        src = _source(files, fit.n, f"{fit.buckets} sizes, fit error {fit.error:.0%}, {fit.outliers} outliers left out")
        for figure in fit.fitted:
            _figure(cal, engines[engine], f"engines.{engine}.{figure}", figure, getattr(fit, figure), src)
    cost = raw.setdefault("cost", {})
    for figure, values, what in (("dispatch_ns", [v for _, s in loaded for v in s.launches], "launch calls"),
                                 ("compile_ns", [v for _, s in loaded for v in s.compiles], "compiles")):
        if values:
            _figure(cal, cost, f"cost.{figure}", figure, float(np.median(values)), _source(files, len(values), f"median of the {what}"))
    _fit_sync(cal, raw, [v for _, s in loaded for v in s.syncs], files)
    _fit_host(cal, raw, [x for _, s in loaded for x in s.host_ops], files, host_only=host_only)
    if not cal.figures:
        raise CalibrationError(f"no usable events in {', '.join(files) or 'no traces'}: no operator calls with a "
                               "time, no copies, no launch calls and no compiles to calibrate from")
    sources = raw.setdefault("sources", {})
    sources.update(cal.sources)
    target = raw.setdefault("target", {})
    target["name"] = name or f"{target.get('name', 'target')}-calibrated"
    target["description"] = f"{target.get('description', '')} -- calibrated from {', '.join(files)} (base {shown})".strip(" -")
    return raw, cal


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_value(k)


def render_toml(doc: dict[str, Any], header: str = "") -> str:
    """A target document as TOML text (tables, arrays of tables, one level of nested tables as [a.b])."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]

    def table(path: str, body: dict[str, Any]) -> None:
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict)
                   and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))}
        if scalars or not any(isinstance(v, dict) for v in body.values()):
            if lines:
                lines.append("")
            lines.append(f"[{path}]")
            lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items())
        for k, v in body.items():
            if isinstance(v, dict):
                table(f"{path}.{_toml_key(k)}", v)

    for key, value in doc.items():
        if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            for entry in value:
                lines.append("")
                lines.append(f"[[{_toml_key(key)}]]")
                lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items())
        elif isinstance(value, dict):
            table(_toml_key(key), value)
        else:
            raise TypeError(f"top-level key {key!r} must be a table")
    return "\n".join(lines) + "\n"


def write_calibrated(paths: Sequence[str | Path], base: str | Path, output: str | Path, *,
                     name: str | None = None, per_kind: bool = True) -> tuple[Target, Calibration]:
    """Calibrate, write the target file, and load it back (the file validates as any target file does)."""
    doc, cal = calibrate(paths, base, name=name or Path(output).stem, per_kind=per_kind)
    header = (f"Calibrated by `portscope targets calibrate` from {', '.join(Path(p).name for p in paths)} "
              f"(base {cal.base}).\nFigures the traces gave say `measured:` in [sources]; the rest are the base's.")
    text = render_toml(doc, header)
    target = parse_target(tomllib.loads(text), str(output))
    Path(output).write_text(text, encoding="utf-8")
    return target, cal

"""Regions → a Trace: decode the raw records, derive signals, fill the tables."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import torch

from portscope.ingest.builder import TraceBuilder
from portscope.ingest.schema import CompileKind, Placement, SignalKind
from portscope.ingest.trace import RunInfo, Trace

from . import callsite
from .events import OpEvent, SignalRecord, TensorInfo, TransferRecord, measured_signals, placement
from .recorder import Decoder
from .schedule import add_region_schedule
from .timeline import add_timeline

if TYPE_CHECKING:
    from .region import Region


class _Formatter:
    """Cached string forms of tensor lists (shapes, strides, dtypes)."""

    def __init__(self) -> None:
        self._cache: dict[tuple, tuple[str, str, str]] = {}

    def __call__(self, tensors: list[TensorInfo | None]) -> tuple[str, str, str]:
        key = tuple(tensors)
        got = self._cache.get(key)
        if got is None:
            shapes = ";".join(_dims(t.shape) if t is not None else "" for t in tensors)
            strides = ";".join(_dims(t.stride) if t is not None else "" for t in tensors)
            dtypes = ";".join(t.dtype if t is not None else "" for t in tensors)
            got = self._cache[key] = (shapes, strides, dtypes)
        return got


def _dims(dims: tuple[int, ...]) -> str:
    return "x".join(map(str, dims)) if dims else "()"


def region_device(events: list[OpEvent], explicit: str | None) -> str:
    """The device a region works on: the explicit one, else the most used non-host device."""
    if explicit:
        return explicit
    counts: Counter[str] = Counter()
    for ev in events:
        for t in ev.tensors_in:
            if not t.on_host:
                counts[t.device] += 1
    return counts.most_common(1)[0][0] if counts else "cpu"


def flatten(regions: list[Region]) -> list[Region]:
    out: list[Region] = []
    todo = list(reversed(regions))
    while todo:
        r = todo.pop()
        out.append(r)
        todo.extend(reversed(r.children))
    return out


def build_trace(regions: list[Region], run_info: RunInfo) -> Trace:
    """One trace holding `regions` and every region nested in them."""
    builder = TraceBuilder(run_info)
    decoder, fmt = Decoder(), _Formatter()
    everything = flatten(regions)
    roots = callsite.Roots(everything[0].user_root)
    attributions: dict[tuple[str, ...], callsite.Attribution] = {}  # call sites: one per set of library packages
    t_base = min(r.start_ns for r in everything)
    ids: dict[int, int] = {}
    decoded: dict[int, tuple[int, list[OpEvent]]] = {}  # engine schedules: id(region) -> (region id, ops)
    predicted_end = 0
    op_id = 0
    op_base: dict[int, int] = {}  # id(region) -> the op_id of its first operator (memory events point at operators)
    devices: dict[int, str] = {}  # id(region) -> the device it worked on
    for region in everything:
        op_base[id(region)] = op_id
        parent = ids.get(id(region.parent)) if region.parent is not None else None
        rid = builder.add_region(
            region.name,
            start_ns=region.start_ns - t_base,
            dur_ns=max(region.end_ns - region.start_ns, 0),
            parent_id=parent,
            mode=region.mode,
            phase=region.phase,
            device=None,
            peak_memory_bytes=region.peak_memory_bytes,
            error=region.error,
            tags=json.dumps(region.tags) if region.tags else None,
        )
        ids[id(region)] = rid
        library = region.library if region.library is not None else callsite.library_from_env()
        if library not in attributions:
            attributions[library] = callsite.Attribution(roots, library)
        attribution = decoder.attribution = attributions[library]
        events = [decoder.event(op_id + i, raw, t_base) for i, raw in enumerate(region.raw)]
        device = region.predictor.device if region.predictor is not None else region_device(events, region.device)
        builder.regions.set(rid, device=device)
        devices[id(region)] = device
        for index, ev in enumerate(events):
            stack = region.raw[index][5]
            if stack is not None:
                ev.stack_id = builder.stacks.intern(attribution.frames(stack))
            if region.predictor is not None:
                where, signals, transfers = region.prediction.outcomes[index]
            else:
                where = placement(ev, device)
                signals, transfers = measured_signals(ev, device)
            _add_op(builder, rid, ev, where, fmt)
            _add_signals(builder, rid, ev, signals, transfers)
        _add_compile_events(builder, rid, region, t_base, attribution)
        for index, key, compile_ns in region.prediction.compiles if region.prediction is not None else ():
            builder.compiles.append(region_id=rid, kind=CompileKind.PROGRAM, key=key, op_count=1,
                                    compile_ns=compile_ns, cache_hit=False, reason="first call with this key",
                                    call_site=events[index].call_site, time_ns=events[index].start_ns)
        # ---- engine schedules: predicted (profiler/schedule.py) ----
        decoded[id(region)] = (rid, events)
        if region.predictor is not None:
            # one clock per run: predicted regions are laid back to back on the predicted time axis, in
            # recording order (a nested region after its parent's own operators), never at their measured
            # start (host seconds between regions would dwarf predicted microseconds)
            sched = add_region_schedule(builder, rid, region, events, predicted_end, region.predictor.target)
            predicted_end = max(predicted_end, sched.end_ns)
            _add_predicted_memory(builder, rid, region, op_id, sched)
        # ----
        op_id += len(events)
    _add_memory(builder, everything, op_base, ids, devices, t_base)
    for region in everything:  # engine schedules: measured timelines (profiler/timeline.py)
        if getattr(region, "timeline", None) is not None:
            add_timeline(builder, region, decoded, t_base)
    for attribution in attributions.values():
        builder.stacks.sources.update(attribution.sources)
    builder.run_info.roots = {**roots.used, **builder.run_info.roots}
    return builder.build()


def _add_predicted_memory(builder: TraceBuilder, rid: int, region: Region, op_base: int, sched: Any) -> None:
    """The residency model's device-resident bytes as the region's memory lane on the predicted time axis (each
    change at the predicted start of the operator after which it holds), and the region's peak."""
    from .memory import lane

    memory = region.prediction.memory if region.prediction is not None else []
    if not memory:
        return
    times, totals, ops, at = [], [], [], sched.start_ns
    for index, total in memory:
        at = max(at, sched.op_starts.get(op_base + index, at))  # an operator with no slice: where the last one was
        times.append(at)
        totals.append(total)
        ops.append(op_base + index)
    # led by the total before the first change: nothing on the device yet
    builder.engine_slices.extend(lane(region.predictor.device, times, totals, 0, ops, [rid] * len(ops), sched.end_ns))
    if region.peak_memory_bytes is None:
        builder.regions.set(rid, peak_memory_bytes=max(totals))


def _add_memory(builder: TraceBuilder, everything: list[Region], op_base: dict[int, int], ids: dict[int, int],
                devices: dict[int, str], t_base: int) -> None:
    """Memory lanes of the regions recorded with memory=True, and each such region's peak where no device counter
    gave one (profiler/memory.py)."""
    from .memory import lane_columns, peak_in

    trackers = {id(r.memory): r.memory for r in everything if getattr(r, "memory", None) is not None and r.memory.events}
    end = max(r.end_ns for r in everything) - t_base
    for tracker in trackers.values():
        for columns in lane_columns(tracker, op_base, ids, t_base, end):
            builder.engine_slices.extend(columns)
    for region in everything:
        if getattr(region, "memory", None) is not None and region.memory.events and region.peak_memory_bytes is None:
            peak = peak_in(region.memory, region.start_ns, region.end_ns, devices.get(id(region)))
            builder.regions.set(ids[id(region)], peak_memory_bytes=peak)


_COMPILE_SIGNALS = {
    CompileKind.GRAPH: SignalKind.COMPILE_GRAPH,
    CompileKind.GRAPH_BREAK: SignalKind.COMPILE_GRAPH_BREAK,
    CompileKind.RECOMPILE: SignalKind.COMPILE_RECOMPILE,
}


def _add_compile_events(builder: TraceBuilder, rid: int, region: Region, t_base: int,
                        attribution: callsite.Attribution) -> None:
    """torch.compile events seen while the region was open: compile rows and compile/* signals."""
    for ev in region.compile_events:
        at = max(ev.time_ns - t_base, 0)
        ev = dataclasses.replace(ev, call_site=attribution.relative_site(ev.call_site),
                                 frame=attribution.relative_site(ev.frame))
        builder.compiles.append(region_id=rid, kind=ev.kind, compile_id=ev.compile_id, graph_id=ev.graph_id,
                                key=ev.compile_id, frame=ev.frame, op_count=ev.op_count, compile_ns=ev.compile_ns,
                                cache_hit=ev.cache_hit, reason=ev.reason, call_site=ev.call_site, time_ns=at)
        note = {
            CompileKind.GRAPH: "one-time cost in a cold region" if not ev.cache_hit else "loaded from the compile cache",
            CompileKind.GRAPH_BREAK: "try: remove the breaking call from the compiled function",
            CompileKind.RECOMPILE: "try: fixed shapes (pad) or mark the dimension dynamic",
        }[ev.kind]
        builder.signals.append(region_id=rid, kind=_COMPILE_SIGNALS[ev.kind], reason=ev.reason,
                               op_name=f"compiled graph {ev.compile_id}" if ev.compile_id else None, count=1, bytes=0,
                               call_site=ev.call_site, note=note, time_ns=at)


def _add_op(builder: TraceBuilder, rid: int, ev: OpEvent, where: Placement, fmt: _Formatter) -> None:
    in_shapes, in_strides, in_dtypes = fmt(ev.inputs)
    out_shapes, _, out_dtypes = fmt(ev.outputs)
    builder.ops.append(
        op_id=ev.op_id,
        region_id=rid,
        name=ev.name,
        start_ns=ev.start_ns,
        dur_ns=ev.dur_ns,
        placement=where,
        device=ev.tensors_in[0].device if ev.tensors_in else (ev.outputs[0].device if ev.outputs else None),
        input_shapes=in_shapes,
        input_strides=in_strides,
        input_dtypes=in_dtypes,
        output_shapes=out_shapes,
        output_dtypes=out_dtypes,
        bytes_in=ev.bytes_in,
        bytes_out=ev.bytes_out,
        module=ev.module,
        call_site=ev.call_site,
        stack_id=ev.stack_id,
        graph_id=ev.graph_id,
        thread=ev.thread,
    )


def _add_signals(
    builder: TraceBuilder, rid: int, ev: OpEvent, signals: list[SignalRecord], transfers: list[TransferRecord]
) -> None:
    for sig in signals:
        builder.signals.append(
            region_id=rid,
            op_id=ev.op_id,
            kind=sig.kind,
            reason=sig.reason,
            op_name=ev.name,
            count=sig.count,
            bytes=sig.bytes,
            call_site=ev.call_site,
            stack_id=ev.stack_id,
            module=ev.module,
            note=sig.note,
            time_ns=ev.start_ns,
        )
    for tr in transfers:
        builder.transfers.append(
            region_id=rid,
            op_id=ev.op_id,
            direction=tr.direction,
            bytes=tr.bytes,
            src_device=tr.src_device,
            dst_device=tr.dst_device,
            start_ns=ev.start_ns,
            dur_ns=0,
            cause=tr.cause,
            call_site=ev.call_site,
            stack_id=ev.stack_id,
        )


def model_summary(model: Any) -> dict[str, Any]:
    """A short description of a model: class, parameters, dtype, and its config's main sizes."""
    if model is None:
        return {}
    out: dict[str, Any] = {"class": type(model).__name__}
    try:
        params = _parameters(model)
        out["parameters"] = sum(p.numel() for p in params)
        if params:
            out["dtype"] = str(params[0].dtype).removeprefix("torch.")
            out["device"] = str(params[0].device)
    except Exception:  # noqa: BLE001 - a model that cannot list parameters still gets a class name
        pass
    config = getattr(model, "config", None)
    if config is None:
        return out
    # the instance's own values first: a transformers config's __getattribute__ costs ~1.5 us a read
    values = getattr(config, "__dict__", {})
    plain = "_heterogeneity_spec" not in values  # per-layer values: only the config itself may answer
    for key in _CONFIG_KEYS:
        value = values.get(key) if plain else None
        if value is None:
            try:
                value = getattr(config, key, None)  # class attributes, aliases (attribute_map)
            except Exception:  # noqa: BLE001 - e.g. a per-layer value read from a heterogeneous config
                continue
        if isinstance(value, (int, str)):
            out[key] = value
    return out


_CONFIG_KEYS = ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
                "head_dim", "intermediate_size", "vocab_size")



_Module = torch.nn.Module
_STANDARD = ("parameters", "named_parameters", "_named_members", "named_modules")


def _parameters(model: Any) -> list[Any]:
    """`list(model.parameters())`, in its order, without its generator chain (~100 us on a small Llama: that
    cost was paid at every region's end). A module class that overrides how parameters are listed is asked."""
    if not isinstance(model, _Module) or any(getattr(type(model), n) is not getattr(_Module, n) for n in _STANDARD):
        return list(model.parameters())
    seen_modules: set[Any] = set()
    params: dict[int, Any] = {}  # id -> parameter, in first-seen order
    todo = [model]
    while todo:
        m = todo.pop()
        if m in seen_modules:
            continue
        seen_modules.add(m)
        kind = type(m)
        if kind not in _STANDARD_TYPES:
            if kind.named_modules is not _Module.named_modules:
                return list(model.parameters())
            _STANDARD_TYPES.add(kind)
        for p in m._parameters.values():
            if p is not None and id(p) not in params:
                params[id(p)] = p
        if m._modules:
            todo += [c for c in reversed(m._modules.values()) if c is not None]
    return list(params.values())


_STANDARD_TYPES: set[type] = set()  # module classes that list their submodules as nn.Module does

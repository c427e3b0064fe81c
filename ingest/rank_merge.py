"""How a multi-rank run is laid out in one trace (`ingest/ranks.py` reads the ranks' files): each rank a top-level
region ``rank N`` (`rank_region_name`, found again by `rank_of_regions`), its lanes prefixed ``rank N · ``
(`lane_prefix`, `lane_rank`; a memory lane after its ``memory ``: `rank_lane`), its ids offset past the previous
ranks', its times lined up on the reference rank's ``ProfilerStep#N`` starts (`align_on_steps`); `merge_ranks` merges
every table but regions and stacks as it is written, one written batch at a time (`_batches`)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import statistics
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import arrow_compute as pc
from . import schema
from .arrow_values import strings
from .batches import batch_rows
from .errors import TraceFormatError
from .trace import RunInfo, TableSlices, Trace

if TYPE_CHECKING:
    from .ranks import RankFile

__all__ = ["LANE_PREFIX", "LANE_RANK", "STEP_REGION", "Alignment", "Placement", "align_on_steps", "lane_prefix", "lane_rank",
           "merge_ranks", "rank_lane", "rank_of_regions", "rank_region_name", "step_starts"]

LANE_PREFIX = "rank {rank} · "
_RANK_REGION = re.compile(r"^rank (\d+)$")
LANE_RANK = re.compile(rf"^(?:{re.escape(schema.MEMORY_ENGINE_PREFIX)})?rank (\d+) · ")  # a merged run's lane name: its rank
STEP_REGION = re.compile(r"^ProfilerStep#(\d+)$")  # the profiler's step ranges (torch.profiler schedules, prof.step())


def rank_region_name(rank: int) -> str:
    return f"rank {rank}"


def lane_prefix(rank: int) -> str:
    return LANE_PREFIX.format(rank=rank)


def rank_lane(rank: int, engine: str) -> str:
    """A rank's lane in a merged run: ``rank 3 · stream 7``; a memory lane (``memory cuda:0``) keeps its prefix first,
    ``memory rank 3 · cuda:0``, so it is still read as a memory lane (the SQL view, `memory.allocator_lanes`), of the
    device ``rank 3 · cuda:0``: not another rank's ``cuda:0``."""
    device = schema.memory_device(engine)
    if device is not None:
        return schema.memory_engine(f"{lane_prefix(rank)}{device}")
    return f"{lane_prefix(rank)}{engine}"


def lane_rank(lane: str) -> int | None:
    """The rank of a merged run's lane (``rank 3 · stream 7``, ``memory rank 3 · cuda:0`` -> 3), or of a merged run's
    memory device (``rank 3 · cuda:0``); None: not a rank's lane."""
    m = LANE_RANK.match(lane)
    return int(m.group(1)) if m else None


# -- merging ---------------------------------------------------------------------------------------------------------


def _start_ns(iso: str | None) -> int | None:
    if not iso:
        return None
    try:
        t = datetime.datetime.fromisoformat(iso)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.UTC)
    delta = t - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


class Placement(enum.StrEnum):
    """How a rank's rows were placed in time (``run_info.extra["ranks"][i]["aligned_on"]``)."""

    STEPS = "steps"  # its ProfilerStep starts lined up with the reference rank's (the reference itself: its own)
    FILE_START = "file start"  # no step in common with the reference rank: by its file's start time alone


@dataclasses.dataclass(frozen=True)
class Alignment:
    """How the ranks' clocks were lined up: the reference rank (the lowest-numbered rank with ProfilerStep ranges;
    None when no rank has any), and per rank the skew removed (ns: how much later its steps started than the
    reference's once placed by the files' start times) and how many steps it shares with the reference."""

    reference: int | None
    skew_ns: dict[int, int]
    common_steps: dict[int, int]

    def placement(self, rank: int) -> Placement:
        return Placement.STEPS if self.common_steps.get(rank) else Placement.FILE_START


def align_on_steps(step_starts: dict[int, dict[int, int]], placed_ns: dict[int, int]) -> Alignment:
    """Each rank's clock skew against the reference rank (the lowest-numbered one with steps). `step_starts`: rank ->
    {step number: its start, ns in the rank's own file}; `placed_ns`: rank -> where its file's start falls in the run
    (its start time less the earliest rank's). A rank's skew is the median, over the steps it shares with the
    reference, of its step's start less the reference's, both placed; 0 for the reference, and for a rank that
    shares no step with it (that rank keeps its file's start)."""
    with_steps = sorted(r for r, starts in step_starts.items() if starts)
    skew = dict.fromkeys(placed_ns, 0)
    common = dict.fromkeys(placed_ns, 0)
    if not with_steps:
        return Alignment(None, skew, common)
    reference = with_steps[0]
    ref = step_starts[reference]
    for rank, placed in placed_ns.items():
        mine = step_starts.get(rank) or {}
        shared = sorted(set(mine) & set(ref))
        common[rank] = len(shared)
        if shared and rank != reference:
            diffs = [(mine[k] + placed) - (ref[k] + placed_ns[reference]) for k in shared]
            skew[rank] = int(round(statistics.median(diffs)))
    return Alignment(reference, skew, common)


def step_starts(regions: pa.Table) -> dict[int, int]:
    """A run's ``ProfilerStep#N`` ranges: step number -> start (ns; the first range of a number)."""
    out: dict[int, int] = {}
    for name, start in zip(regions.column("name").to_pylist(), regions.column("start_ns").to_pylist(), strict=True):
        if (m := STEP_REGION.match(str(name))) is not None and int(m.group(1)) not in out and start is not None:
            out[int(m.group(1))] = int(start)
    return out


@dataclasses.dataclass(frozen=True)
class _Shift:
    """How one rank's rows move into the merged run."""

    rank: int
    region_base: int  # the rank's own region id; its regions' ids are shifted by region_base + 1 - their lowest
    region_shift: int
    op_shift: int
    frame_shift: int
    stack_shift: int
    correlation_shift: int
    time_shift: int
    shift_times: bool  # engine_slices in ns (cycles are not moved)

    def of_ids(self, which: str) -> int:
        return {"region": self.region_shift, "op": self.op_shift, "stack": self.stack_shift, "frame": self.frame_shift,
                "correlation": self.correlation_shift}[which]  # fmt: skip


def _span(table: pa.Table, column: str) -> tuple[int, int] | None:
    if not table.num_rows or table.column(column).null_count == table.num_rows:
        return None
    lo, hi = pc.min_max(table.column(column))
    return int(lo), int(hi)


def _plain(field: pa.Field) -> pa.Field:
    return field.with_type(pa.string()) if pa.types.is_dictionary(field.type) else field


def _plain_schema(table_schema: pa.Schema) -> pa.Schema:
    return pa.schema([_plain(f) for f in table_schema], metadata=table_schema.metadata)


_ID_SHIFTS: dict[str, dict[str, str]] = {  # table -> column -> which shift
    "regions": {"region_id": "region", "parent_id": "region"},
    "ops": {"op_id": "op", "region_id": "region", "stack_id": "stack"},
    "signals": {"region_id": "region", "op_id": "op", "stack_id": "stack"},
    "transfers": {"region_id": "region", "op_id": "op", "stack_id": "stack"},
    "compiles": {"region_id": "region"},
    "engine_slices": {"region_id": "region", "op_id": "op", "correlation": "correlation"},
    "runtime_calls": {"region_id": "region", "op_id": "op", "correlation": "correlation"},
    "comms": {"op_id": "op"},
    "frames": {"frame_id": "frame"},
    "stacks": {"stack_id": "stack"},
}
_TIMES: dict[str, tuple[str, ...]] = {"regions": ("start_ns",), "ops": ("start_ns",), "signals": ("time_ns",),
                                      "transfers": ("start_ns",), "compiles": ("time_ns",), "runtime_calls": ("start_ns",)}
_WHOLE = ("regions", "stacks")  # merged in memory: regions point into themselves, ops (written first) into stacks


def _moved_column(name: str, column: str, col: Any, shift: _Shift) -> Any:
    """One column of one rank's rows of table `name` (an array or a chunked array): rank-distinct ids, shifted
    times, prefixed lanes, plain strings."""
    which = _ID_SHIFTS.get(name, {}).get(column)
    if which is not None:
        if amount := shift.of_ids(which):
            col = pc.call("add", col, pa.scalar(amount, col.type))
    elif shift.time_shift and (column in _TIMES.get(name, ()) or (name == "engine_slices" and column == "start" and shift.shift_times)):
        col = pc.call("add", col, pa.scalar(shift.time_shift, col.type))
    if name == "engine_slices" and column == "engine":
        col = _rank_lanes(col, shift.rank)
    if name == "stacks" and column == "frame_ids" and shift.frame_shift:
        col = _shift_lists(col, shift.frame_shift)
    return col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col


def _rank_lanes(col: Any, rank: int) -> Any:
    """A rank's engine column (an array or a chunked array) named as the merged run's (`rank_lane`), name by distinct
    name: a dictionary array."""
    if isinstance(col, pa.ChunkedArray):
        return pa.chunked_array([_rank_lanes(c, rank) for c in col.chunks], type=pa.dictionary(pa.int32(), pa.string()))
    coded = col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(pc.cast(col, pa.string()))
    names = strings([None if e is None else rank_lane(rank, e) for e in coded.dictionary.to_pylist()])
    return pa.DictionaryArray.from_arrays(pc.cast(coded.indices, pa.int32()), names)


def _moved(name: str, table: pa.Table, shift: _Shift, target: pa.Schema) -> pa.Table:
    """One rank's rows of a table merged whole (`_WHOLE`), moved (`_moved_column`)."""
    columns = {column: _moved_column(name, column, table.column(column), shift) for column in table.column_names}
    if name == "regions":  # the rank's top-level regions nest in its rank region
        columns["parent_id"] = pc.call("coalesce", columns["parent_id"], pa.scalar(shift.region_base, pa.int32()))
    fields = [target.field(c) if c in target.names else _plain(table.schema.field(c)) for c in table.column_names]
    return pa.Table.from_arrays([columns[c].cast(f.type) for c, f in zip(table.column_names, fields, strict=True)],
                                schema=pa.schema(fields))


def _shift_lists(col: pa.ChunkedArray, by: int) -> pa.ChunkedArray:
    chunks = []
    for chunk in col.chunks:
        values = pc.call("add", chunk.flatten(), pa.scalar(by, pa.int32()))
        chunks.append(pa.ListArray.from_arrays(chunk.offsets, values, mask=chunk.is_null()))
    return pa.chunked_array(chunks, type=col.type)


def merge_ranks(ranked: list[tuple[RankFile, Trace]], *, warnings: list[str] | None = None,
                hosts: dict[int, Any] | None = None) -> Trace:
    """One run of the ranks' traces (in rank order): see the module's docstring. Every table but `_WHOLE` is given
    as slices made from the ranks' traces as it is written, in batches of the written size: the merge holds one
    batch, whatever the number of ranks."""
    if not ranked:
        raise ValueError("no ranks to merge")
    ranked = sorted(ranked, key=lambda rt: rt[0].rank)
    starts = [_start_ns(t.run_info.start_time) for _, t in ranked]
    known = all(s is not None for s in starts)
    warnings = list(warnings or [])
    if not known and len(ranked) > 1:
        warnings.append("some ranks' traces carry no start time: every rank is placed from time 0 before its steps "
                        "are lined up")
    first = min(s for s in starts if s is not None) if known else 0
    placed = {f.rank: (s - first) if known and s is not None else 0 for (f, _), s in zip(ranked, starts, strict=True)}
    steps = {f.rank: step_starts(t["regions"]) for f, t in ranked}
    alignment = align_on_steps(steps, placed)
    warnings += [f"rank {r} shares no ProfilerStep with rank {alignment.reference}: placed by its file's start time"
                 for r, mine in steps.items() if mine and not alignment.common_steps[r]]  # fmt: skip
    moved = {r: placed[r] - alignment.skew_ns[r] for r in placed}
    base = min(moved.values())  # no rank's rows before time 0
    shifts: list[_Shift] = []
    next_region = next_op = next_frame = next_stack = next_corr = 0
    rank_rows: list[dict[str, Any]] = []
    for f, t in ranked:
        regions = _span(t["regions"], "region_id") or (0, -1)
        ops = _span(t["ops"], "op_id") or (0, -1)
        frames = _span(t["frames"], "frame_id") or (0, -1)
        stacks = _span(t["stacks"], "stack_id") or (0, -1)
        corr = [s for s in (_span(t["runtime_calls"], "correlation"), _batched_span(t, "engine_slices", "correlation")) if s]
        corr_lo, corr_hi = (min(s[0] for s in corr), max(s[1] for s in corr)) if corr else (0, -1)
        shift = _Shift(rank=f.rank, region_base=next_region, region_shift=next_region + 1 - regions[0],
                       op_shift=next_op - ops[0], frame_shift=next_frame - frames[0], stack_shift=next_stack - stacks[0],
                       correlation_shift=next_corr - corr_lo, time_shift=moved[f.rank] - base,
                       shift_times=t.run_info.time_unit is schema.TimeUnit.NS)  # fmt: skip
        shifts.append(shift)
        next_region += 1 + regions[1] - regions[0] + 1
        next_op += ops[1] - ops[0] + 1
        next_frame += frames[1] - frames[0] + 1
        next_stack += stacks[1] - stacks[0] + 1
        next_corr += corr_hi - corr_lo + 1
        rank_rows.append({"rank": f.rank, "world_size": f.world_size, "file": f.name, "rank_from": f.rank_from.value,
                          "region_id": shift.region_base, "start_offset_ns": shift.time_shift,
                          "file_offset_ns": placed[f.rank], "skew_ns": alignment.skew_ns[f.rank],
                          "aligned_on": alignment.placement(f.rank).value, "common_steps": alignment.common_steps[f.rank],
                          "host_name": (hosts or {}).get(f.rank)})  # fmt: skip
    if next_op >= 2**63 or next_region >= 2**31:
        raise TraceFormatError(ranked[0][0].path, "too many rows to merge the ranks into one run")
    tables: dict[str, pa.Table] = {}
    slices: dict[str, TableSlices] = {}
    for name, table_schema in schema.TABLES.items():
        target = _plain_schema(table_schema)
        if name not in _WHOLE:
            slices[name] = TableSlices(sum(t.num_rows(name) for _, t in ranked), _batches(name, ranked, shifts, target), target)
            continue
        parts = [_moved(name, t[name], s, target) for (_, t), s in zip(ranked, shifts, strict=True) if t[name].num_rows]
        if name == "regions":
            parts = _with_rank_regions(parts, ranked, shifts, target)
        tables[name] = pa.concat_tables(parts) if parts else pa.Table.from_batches([], schema=target)
    info = _merged_info([t.run_info for _, t in ranked], rank_rows, warnings, first + base if known else None,
                        alignment.reference)
    return Trace(run_info=info, tables=tables, slices=slices)


def _batched_span(trace: Trace, name: str, column: str) -> tuple[int, int] | None:
    lo = hi = None
    for batch in trace.batches(name):
        got = _span(pa.Table.from_batches([batch]), column)
        if got:
            lo = got[0] if lo is None else min(lo, got[0])
            hi = got[1] if hi is None else max(hi, got[1])
    return (lo, hi) if lo is not None and hi is not None else None


def _batches(name: str, ranked: list[tuple[RankFile, Trace]], shifts: list[_Shift],
             target: pa.Schema) -> Callable[[], Iterator[pa.RecordBatch]]:
    """The merged table `name`, in batches of exactly the written size (the last fewer), each made column by column
    from the pieces of the ranks' (memory-mapped) batches it covers: one batch and one column's pieces are held."""

    def make() -> Iterator[pa.RecordBatch]:
        rows = batch_rows()
        pieces: list[tuple[pa.RecordBatch, _Shift]] = []
        held = 0
        for (_, t), shift in zip(ranked, shifts, strict=True):
            for batch in t.batches(name):
                at = 0
                while at < batch.num_rows:
                    take = min(rows - held, batch.num_rows - at)
                    pieces.append((batch.slice(at, take), shift))
                    held, at = held + take, at + take
                    if held == rows:
                        yield _assembled(name, pieces, target)
                        pieces, held = [], 0
        if held:
            yield _assembled(name, pieces, target)

    return make


def _assembled(name: str, pieces: list[tuple[pa.RecordBatch, _Shift]], target: pa.Schema) -> pa.RecordBatch:
    columns = []
    for field in target:
        parts = [_piece_column(name, field, piece, shift) for piece, shift in pieces]
        columns.append(parts[0] if len(parts) == 1 else pa.concat_arrays(parts))
        del parts  # this column's moved pieces go before the next column's are made
    return pa.RecordBatch.from_arrays(columns, schema=target)


def _piece_column(name: str, field: pa.Field, piece: pa.RecordBatch, shift: _Shift) -> pa.Array:
    at = piece.schema.get_field_index(field.name)
    if at < 0:  # a column the rank's file lacks
        return pa.nulls(piece.num_rows, field.type)
    col = _moved_column(name, field.name, piece.column(at), shift)
    return col if col.type.equals(field.type) else col.cast(field.type)


def _with_rank_regions(parts: list[pa.Table], ranked: list[tuple[RankFile, Trace]], shifts: list[_Shift],
                       target: pa.Schema) -> list[pa.Table]:
    """Each rank's own region (``rank N``: its regions' span, their device, the greatest of their peaks: a region's
    figures include its nested regions') before its regions."""
    out: list[pa.Table] = []
    moved = iter(parts)
    for (_, t), shift in zip(ranked, shifts, strict=True):
        own = next(moved) if t["regions"].num_rows else None
        if own is not None and own.num_rows:
            start = pc.min_max(own.column("start_ns"))[0]
            end = pc.min_max(pc.call("add", own.column("start_ns"), own.column("dur_ns")))[1]
            tops = pc.call("filter", own, pc.call("equal", own.column("parent_id"), pa.scalar(shift.region_base, pa.int32())))
            devices = [d for d in tops.column("device").to_pylist() if d]
            modes = set(tops.column("mode").to_pylist())
            peak = pc.min_max(own.column("peak_memory_bytes"))[1]
        else:
            start, end, devices, modes, peak = shift.time_shift, shift.time_shift, [], set(), None
        row = {"region_id": [shift.region_base], "parent_id": [None], "name": [rank_region_name(shift.rank)],
               "start_ns": [int(start)], "dur_ns": [int(end) - int(start)],
               "mode": [modes.pop() if len(modes) == 1 else schema.Mode.UNKNOWN.value], "phase": [schema.Phase.NONE.value],
               "device": [devices[0] if devices else None], "peak_memory_bytes": [peak], "error": [None], "tags": [None]}  # fmt: skip
        out.append(pa.Table.from_pydict(row, schema=target))
        if own is not None:
            out.append(own.select(target.names).cast(target) if own.schema.names != target.names else own.cast(target))
    return out


def _merged_info(infos: list[RunInfo], ranks: list[dict[str, Any]], warnings: list[str], start: int | None,
                 reference: int | None) -> RunInfo:
    missing: list[str] = []
    devices: list[str] = []
    for info in infos:
        missing += [m for m in info.missing_signals if m not in missing]
        devices += [d for d in info.devices if d not in devices]
    start_time = (datetime.datetime.fromtimestamp(start / 1e9, datetime.UTC).isoformat() if start is not None
                  else infos[0].start_time)  # fmt: skip
    extra: dict[str, Any] = {"ranks": ranks, "world_size": max((r["world_size"] or 0 for r in ranks), default=0) or len(ranks),
                             "reference_rank": reference}
    if warnings:
        extra["problems"] = warnings
    return RunInfo(source=schema.Source.CONVERTED, torch_version=infos[0].torch_version, devices=devices,
                   start_time=start_time, producer="portscope convert", converted_from=infos[0].converted_from,
                   missing_signals=missing, time_unit=infos[0].time_unit, extra=extra)  # fmt: skip


def rank_of_regions(trace: Trace) -> dict[int, int]:
    """Every region's rank (region id -> rank) in a merged run: the ``rank N`` region it nests in ({}: not a
    multi-rank run)."""
    regions = trace["regions"]
    ids = regions.column("region_id").to_pylist()
    parents = regions.column("parent_id").to_pylist()
    names = regions.column("name").to_pylist()
    listed = {r["region_id"]: r["rank"] for r in trace.run_info.extra.get("ranks") or [] if isinstance(r, dict)
              and isinstance(r.get("region_id"), int) and isinstance(r.get("rank"), int)}  # fmt: skip
    parent = dict(zip(ids, parents, strict=True))
    for rid, pid, name in zip(ids, parents, names, strict=True):
        if pid is None and rid not in listed and (m := _RANK_REGION.match(str(name))):
            listed[rid] = int(m.group(1))
    out: dict[int, int] = {}
    for rid in ids:
        chain = []
        r: int | None = rid
        while r is not None and r not in out and r not in listed and len(chain) <= len(ids):
            chain.append(r)
            r = parent.get(r)
        rank = out.get(r) if r in out else listed.get(r) if r is not None else None
        if r is not None and r in listed:
            out[r] = listed[r]
        for c in chain:
            if rank is not None:
                out[c] = rank
    return out

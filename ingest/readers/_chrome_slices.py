"""Engine slices and operators of Chrome-based readers made slice by slice from the event columns (bounded memory).

A reader says which spans (or instants) go on which lanes, part after part (`SliceRows.add`); the rows are
then made `SLICE_ROWS` at a time from the compact columns of `_chrome_events.ChromeEvents`, one record
batch each, when the trace is written (`Trace.slices`): no Arrow table of every slice is held, and every
batch shares one dictionary per column (the values some row uses, known before the first batch), as an
Arrow IPC file requires. Read whole (`sliced=False`), the same batches are gathered into one table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..columns import Coder, table_of
from ..schema import REFERENCES, EngineKind, SliceKind
from ..spill import DiskColumn, release_memory
from ..trace import TableSlices, Trace
from . import _chrome_events
from ._chrome_events import ChromeEvents

SLICE_ROWS = 1 << 20  # rows per record batch made (tests make it tiny)
KINDS = [k.value for k in SliceKind]


@dataclasses.dataclass(frozen=True)
class Lane:
    """Where the spans of one thread go: lane name, engine kind and slice kind."""

    engine: str
    engine_kind: EngineKind = EngineKind.OTHER
    slice_kind: SliceKind = SliceKind.COMPUTE


class Links:
    """A value for some spans (sorted span numbers, one value each), e.g. the flow id bound to a span: 16 bytes a
    span that has one, nothing for the others (a column for every span costs 8 bytes each)."""

    def __init__(self, spans: np.ndarray, values: np.ndarray) -> None:
        order = np.argsort(spans, kind="stable")
        spans, values = spans[order], values[order]
        last = np.r_[spans[1:] != spans[:-1], True] if len(spans) else np.zeros(0, dtype=bool)  # the last one given wins
        self.spans, self.values = spans[last], values[last]

    def of(self, index: np.ndarray) -> np.ndarray:
        """Per span of `index`: its value, or -1."""
        if not len(self.spans):
            return np.full(len(index), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.spans, index), len(self.spans) - 1)
        return np.where(self.spans[at] == index, self.values[at], -1)


PerSpan = Links | DiskColumn | np.ndarray  # a value per span (-1: none): sparse, on disk, or in memory


def values_of(column: PerSpan, idx: np.ndarray) -> np.ndarray:
    """The values of the spans `idx` (sorted) from a per-span column of any kind."""
    if isinstance(column, Links):
        return column.of(idx)
    if isinstance(column, DiskColumn):
        if len(idx) and int(idx[-1]) - int(idx[0]) == len(idx) - 1:  # sorted and distinct: a range
            return column.read(int(idx[0]), int(idx[-1]) + 1)
        return column.take(idx)
    return column[idx]


@dataclasses.dataclass
class _Part:
    index: DiskColumn | None  # spans (or instants) in row order; None: all of them, in order
    rows: int
    keys: np.ndarray  # the part's lanes: (pid code << 32 | tid code), sorted
    at: np.ndarray  # ... and their positions in SliceRows.lanes
    instants: bool
    correlation: PerSpan | None  # per span, -1: none
    op_ids: PerSpan | None  # per span, -1: none
    kinds: PerSpan | None  # position in KINDS of spans whose kind is not their lane's (-1: its lane's)

    def lanes_of(self, src: Any, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which of the spans `idx` have a lane here, their lane positions)."""
        key = (src.gather("pid", idx).astype(np.int64) << 32) | src.gather("tid", idx)
        if not len(self.keys):
            return np.zeros(len(idx), dtype=bool), np.zeros(0, dtype=np.int32)
        pos = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        found = self.keys[pos] == key
        return found, self.at[pos[found]]

    def chunks(self, src: Any) -> Iterator[np.ndarray]:
        """The part's spans, SLICE_ROWS at a time (all spans: taken in order, those without a lane left out)."""
        if self.index is not None:
            for _, block in self.index.blocks(SLICE_ROWS):
                yield block
            return
        for lo in range(0, len(src), SLICE_ROWS):
            yield np.arange(lo, min(lo + SLICE_ROWS, len(src)), dtype=np.int64)


class SliceRows:
    """The engine_slices table of one region, part after part, made in slices when written."""

    def __init__(self, ev: ChromeEvents, rid: int, t0: int) -> None:
        self.ev, self.rid, self.t0 = ev, rid, t0
        self.lanes: list[Lane] = []
        self._lane_at: dict[Lane, int] = {}
        self.parts: list[_Part] = []

    def add(self, lanes: dict[tuple[int, int], Lane], index: np.ndarray | DiskColumn | None = None, *,
            instants: bool = False, correlation: PerSpan | None = None, op_ids: PerSpan | None = None,
            kinds: dict[int, SliceKind] | PerSpan | None = None) -> None:  # fmt: skip
        """The spans `index` (sorted; default all; or the instants) whose thread has a lane in `lanes`, as rows.

        `correlation` and `op_ids`: per span (-1: none); `kinds`: a span's slice kind instead of its lane's (a dict,
        or per span its position in KINDS, -1: its lane's).
        Keeps 8 bytes a row where `index` is given (the rows that have a lane), on disk past HOLD_ROWS, nothing
        where it is not and every thread has a lane.
        """
        src = self.ev.instants if instants else self.ev
        for lane in lanes.values():
            self._lane_at.setdefault(lane, len(self._lane_at))
        self.lanes = list(self._lane_at)
        keys = np.array([(p << 32) | t for p, t in lanes], dtype=np.int64)
        at = np.array([self._lane_at[lane] for lane in lanes.values()], dtype=np.int32)
        order = np.argsort(keys)
        if isinstance(index, np.ndarray):
            given = DiskColumn("q", _chrome_events.HOLD_ROWS)
            given.extend(index)
            index = given
        part = _Part(index, 0, keys[order], at[order], instants, correlation, op_ids, None)
        kept, rows = DiskColumn("q", _chrome_events.HOLD_ROWS), 0
        for idx in part.chunks(src):
            found = part.lanes_of(src, idx)[0]
            rows += int(np.count_nonzero(found))
            kept.extend(idx[found])
        if index is not None or rows < len(src):
            part.index = kept
        part.rows = rows
        if kinds is not None and not isinstance(kinds, dict):
            part.kinds = kinds
        elif kinds:
            part.kinds = Links(np.fromiter(kinds.keys(), dtype=np.int64, count=len(kinds)),
                               np.array([KINDS.index(k.value) for k in kinds.values()], dtype=np.int64))  # fmt: skip
        self.parts.append(part)

    def __len__(self) -> int:
        return sum(p.rows for p in self.parts)

    def slices(self) -> TableSlices:
        """The rows as a table made slice by slice (dictionaries fixed first)."""
        ev = self.ev
        vals = ev.values.values
        used = np.zeros(len(vals), dtype=bool)
        for part in self.parts:
            src = ev.instants if part.instants else ev
            for idx in part.chunks(src):
                used[src.gather("name", idx[part.lanes_of(src, idx)[0]] if part.index is None else idx)] = True
        name = Coder([v if used[c] else None for c, v in enumerate(vals)], used)
        engine = Coder(sorted({lane.engine for lane in self.lanes}), np.ones(len({lane.engine for lane in self.lanes}), dtype=bool))
        engines = {w: n for n, w in enumerate(engine.words.to_pylist())}
        lane_engine = np.array([engines[lane.engine] for lane in self.lanes] or [0], dtype=np.int32)
        ekinds = sorted({lane.engine_kind.value for lane in self.lanes})
        ekind = Coder(ekinds, np.ones(len(ekinds), dtype=bool))
        lane_ekind = np.array([ekinds.index(lane.engine_kind.value) for lane in self.lanes] or [0], dtype=np.int32)
        kind = Coder(KINDS, np.ones(len(KINDS), dtype=bool))
        lane_kind = np.array([KINDS.index(lane.slice_kind.value) for lane in self.lanes] or [0], dtype=np.int8)
        rid, t0 = self.rid, self.t0

        def optional(column: PerSpan | None, idx: np.ndarray) -> pa.Array | None:
            """The values of the spans `idx` with -1 as null."""
            if column is None:
                return None
            values = values_of(column, idx)
            return pa.array(values, pa.int64(), mask=values < 0)

        def batches() -> Iterator[pa.RecordBatch]:
            for part in self.parts:
                src = ev.instants if part.instants else ev
                for idx in part.chunks(src):
                    release_memory()  # the previous slice's arrays are written and dropped: their pages go back
                    found, pos = part.lanes_of(src, idx)
                    idx = idx[found]
                    k = lane_kind[pos]
                    if part.kinds is not None:
                        own = values_of(part.kinds, idx)
                        k = np.where(own >= 0, own, k)
                    n = len(idx)
                    table = table_of("engine_slices", {
                        "region_id": np.full(n, rid, dtype=np.int32), "engine": engine(lane_engine[pos]),
                        "engine_kind": ekind(lane_ekind[pos]), "kind": kind(k.astype(np.int32)),
                        "name": name(src.gather("name", idx)), "start": src.gather("ts" if part.instants else "start", idx) - t0,
                        "dur": np.zeros(n, dtype=np.int64) if part.instants else src.gather("dur", idx),
                        "op_id": optional(part.op_ids, idx),
                        "correlation": optional(part.correlation, idx)})  # fmt: skip
                    yield from table.to_batches()

        return TableSlices(len(self), batches)


def finish(trace: Trace, tables: dict[str, TableSlices], *, sliced: bool) -> Trace:
    """The trace with its big tables as slices (written one slice at a time), or gathered whole (one chunk each)."""
    for name, rows in tables.items():
        if trace.tables.get(name) is not None and trace.tables[name].num_rows:
            raise RuntimeError(f"table {name!r} has rows already: the slices would replace them")
        if sliced:
            trace.tables.pop(name, None)
            trace.slices[name] = rows
        else:
            table = pa.Table.from_batches(list(rows.batches()), schema=rows.table_schema(name))
            trace.tables[name] = table.combine_chunks()
    if sliced:  # a whole table whose rows point into a sliced one is given as slices too: checked once that one is written
        for (source, _), (target, _) in REFERENCES.items():
            if target in trace.slices and source not in trace.slices and trace.tables[source].num_rows:
                table = trace.tables.pop(source)
                trace.slices[source] = TableSlices(table.num_rows, lambda table=table: iter(table.to_batches()))
    return trace

__all__ = ["KINDS", "SLICE_ROWS", "Lane", "Links", "PerSpan", "SliceRows", "finish", "values_of"]

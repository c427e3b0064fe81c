"""Linked events and the rules' findings -> the portscope tables of one run (`Trace`).

The last step of every conversion: `assemble(translated)` links the events (`link`), applies the rules (`rules`)
and writes regions, operators, engine lanes, transfers, signals, compiles and runtime calls. What a table holds
is decided here once for every reader; what a log line says of an event (`events.Logged`: a call site, a stack,
a compile's id) goes to that event's signals and compiles. `Assembly` is this module's start of the assembly (the
events linked, the rules applied) and `build`, which writes the tables in order, each group of tables by a part it
inherits, one concern a module:

* `assemble_regions.RegionTables`: the regions and the operators' call sites. A run whose file is a list of regions
  (`Translated.root_name` None) has its annotations as its top-level regions, with what the file says of each
  (`events.RegionFacts`).
* `assemble_ops.OperatorTables`: the operators (with their placements), runtime calls and comms tables.
* `assemble_findings.FindingTables`: the transfers, signals and compiles tables of the rules' findings. An event
  that stands for N occurrences (`events` column ``count``) makes signals of count N, and a counted copy N rows of
  the transfers table (its bytes split evenly; at most `assemble_findings.MAX_COUNTED_ROWS`).
* `engine_lanes.EngineLanes`: the engine lanes; here, less the events whose file gives them no time
  (`Logged.timed` false: not drawn, and no time in the signals and transfers tables), and a static schedule's engine
  slices (events that read and write buffers) with what the rules found of them (``waited_on``, the extra
  ``depends_on``) and their instruction's source line (the extra ``call_site``).
* `assemble_files.ParkedColumns`: the per-event columns a big trace keeps in temporary files while the big tables
  are written.

The operators table, one row per operator, is made `SLICE_ROWS` rows at a time as it is written (`Trace.slices`):
converting never holds it whole. `SLICE_ROWS` is read here when an assembly begins (`Assembly.slice_rows`), so a
test that sets it here sets it for every part.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from . import progress, schema
from .arrow_compute import dictionary_encode
from .assemble_files import ParkedColumns, distinct, to_file
from .assemble_findings import FindingTables
from .assemble_ops import OperatorTables
from .assemble_regions import RegionTables
from .builder import StackInterner
from .engine_lanes import EngineLanes, LanePart
from .events import KIND_CODES, NONE, EventKind, Logged, SparseColumn, Translated, rows_where
from .link import link
from .linked import SIGNAL_KINDS, Findings, Linked
from .rules import apply_rules
from .rules_transfers import copy_directions
from .schema import SignalKind
from .spill import DiskColumn, release_memory
from .trace import TableSlices, Trace

SLICE_ROWS = 1 << 18  # event rows made into one record batch of a sliced table (operators, lanes...)
DEPENDS_ON = pa.field("depends_on", pa.list_(pa.int64()))  # engine_slices extra: producer correlations (FORMAT.md)
SLICE_CALL_SITE = pa.field("call_site", pa.dictionary(pa.int32(), pa.string()))  # engine_slices extra: "path:line"


class Assembly(RegionTables, OperatorTables, FindingTables, ParkedColumns, EngineLanes):
    """One run's events linked, the rules applied, and its tables planned and written, method by method (`build`)."""

    def __init__(self, t: Translated) -> None:
        self.t = t
        self.slice_rows = SLICE_ROWS
        ev = t.events
        self.n_events = len(ev)
        self.texts, self.threads, self.arguments, self.logs = ev.texts, ev.threads, ev.arguments, ev.logs
        self.facts = ev.facts
        self.schedule: dict[int, tuple] = {}  # a static schedule's slices: row -> (waited_on, depends_on, site, bytes)
        self.comm_values = ev.comms
        self.a = ev.arrays(release=True)
        progress.current().stage(progress.Stage.LINKING)
        big = self.n_events > SLICE_ROWS  # the C heap trimmed after each big step: its freed blocks not kept resident
        self.links = link(self.a)
        if big:
            release_memory()
        self.linked = Linked(self.a, ev.texts, self.links, infer_fallback=t.infer_fallback, threads=ev.threads,
                             arguments=ev.arguments, logs=ev.logs)  # fmt: skip
        self.found = apply_rules(self.linked)
        if big:
            release_memory()
        self.copy_rows, self.copy_dir = copy_directions(self.linked)  # the lanes name copy engines by direction
        self.stacks = StackInterner()
        self.parked: dict[str, DiskColumn] = {}
        kind = self.a["kind"]
        self.op_rows = rows_where(kind == KIND_CODES[EventKind.OP])
        # op_id of an operator's event row: its index among the operators (rows first to last when they are contiguous)
        contiguous = len(self.op_rows) and self.op_rows[-1] - self.op_rows[0] == len(self.op_rows) - 1
        self.first_op = int(self.op_rows[0]) if contiguous else None
        work = np.isin(kind, [KIND_CODES[k] for k in (EventKind.KERNEL, EventKind.COPY, EventKind.MEMSET)])
        self.devices = [d for d in distinct(self.a["device"], rows_where(work), SLICE_ROWS).tolist() if d >= 0]
        # operators the device ran, joined to their work by the reader's ids (no runtime call): drawn as that work, not
        # on a host lane; those ids are not the format's and are not written
        ran = work & (self.links.launcher < 0) & (self.links.op >= 0)
        self.ran_op = np.zeros(len(self.op_rows), dtype=bool)
        if ran.any():
            corr = self.a["correlation"]
            for lo in range(0, len(ran), SLICE_ROWS):  # a slice at a time: the work rows, their operators
                rows = lo + np.flatnonzero(ran[lo : lo + SLICE_ROWS])
                self.ran_op[self.op_id(self.links.op[rows])] = True
                if isinstance(corr, DiskColumn):  # in a file: rewritten there
                    corr.put(rows, NONE)
            if not isinstance(corr, DiskColumn):
                keep = ~ran[corr.rows]  # type: ignore[union-attr]  # ids joined something: a sparse column
                self.a["correlation"] = SparseColumn(corr.rows[keep], corr.values[keep], len(kind))  # type: ignore[union-attr, assignment]

    def op_id(self, op_rows: np.ndarray) -> np.ndarray:
        """op_id of operator event rows (-1 stays -1)."""
        op_rows = np.asarray(op_rows, dtype=np.int64)
        ids = op_rows - self.first_op if self.first_op is not None else np.searchsorted(self.op_rows, op_rows)
        return np.where(op_rows >= 0, ids, -1)

    def region_of(self, rows: np.ndarray, start_ns: np.ndarray | None = None) -> np.ndarray:
        """region_id of event rows by their start (an annotation's own region is itself)."""
        start = self.column("start_ns", rows) if start_ns is None else start_ns
        return self.region_codes[self.links.region_change(start)]

    def device_name(self, dev: int) -> str:
        """A device's name by its number (``cuda:N`` where the file names none; -1: the host, ``cpu``)."""
        return (self.t.device_names.get(dev) or f"cuda:{dev}") if dev >= 0 else "cpu"

    def build(self, sliced: bool) -> Trace:
        big = sliced and len(self.a["kind"]) > SLICE_ROWS  # the per-event links go to files once their readers are done
        tables: dict[str, pa.Table] = {"regions": self.regions()}
        self.call_sites()
        if big:  # the call sites are made: the frame links are read no more
            self.links.frame = self.links.frame_parent = None  # type: ignore[assignment]
        runtime_calls = self.runtime_calls(sliced)
        tables["comms"] = self.comms()
        placement = self.placements()
        if big:  # the rules and placements are done: the findings, the lanes and the sliced tables read op and
            # launcher by rows, from files (12 bytes an event less held while the big tables are made)
            self.links.call_parent = None  # type: ignore[assignment]
            for name in ("op", "launcher"):
                if getattr(self.links, name).strides != (0,):
                    setattr(self.links, name, to_file(getattr(self.links, name), SLICE_ROWS))
            release_memory()
        tables["transfers"], tables["signals"], tables["compiles"] = self.findings(self.found, sliced)  # type: ignore[assignment]
        self.schedule = self._schedule(self.found)
        found = self.found.signal_columns()  # what the lanes read of the findings: the events that fell back
        self.fallbacks = found["event"][found["kind"] == SIGNAL_KINDS.index(SignalKind.CPU_FALLBACK)].astype(
            np.int32 if len(self.a["kind"]) < 2**31 else np.int64)  # fmt: skip
        self.found = None  # type: ignore[assignment]  # written: not held while the big tables are
        slices: dict[str, TableSlices] = {}
        if isinstance(runtime_calls, TableSlices):
            slices["runtime_calls"] = runtime_calls
        else:
            tables["runtime_calls"] = runtime_calls
        for name in ("transfers", "signals"):
            if isinstance(tables[name], TableSlices):  # in a temporary file until written
                slices[name] = tables.pop(name)  # type: ignore[arg-type]
        tables["frames"] = self.stacks.frames_table()
        tables["stacks"] = self.stacks.stacks_table()
        slices["ops"] = self.ops(placement)
        if sliced:  # what the sliced tables read back, on disk, before the lanes are planned; what they never read, gone
            self.park(("start_ns", "dur_ns", "name", "args", "thread", "output_shapes", "output_dtypes"))
        slices["engine_slices"] = self.engine_slices(placement)
        if self.schedule:  # with a schedule's extra columns
            slices["engine_slices"] = dataclasses.replace(
                slices["engine_slices"], schema=schema.ENGINE_SLICES.append(DEPENDS_ON).append(SLICE_CALL_SITE))
        if sliced:
            self.park(("correlation",))
            for c in ("device", "stream", "lane", "engine_kind", "unit", "copy_kind", "bytes", "total_allocated",
                      "total_reserved"):  # fmt: skip
                self.a[c] = None  # type: ignore[assignment]
            self.links.launcher = self.links.frame = self.links.frame_parent = self.links.call_parent = None  # type: ignore[assignment]  # noqa: E501
            release_memory()
        trace = Trace(run_info=self.t.run_info, tables=tables, slices=slices)
        return trace if sliced else trace.gather()

    def logged(self, rows: np.ndarray) -> list[Logged | None]:
        """What a log line says of each event row (None: nothing)."""
        if not self.logs:
            return [None] * len(rows)
        codes = np.asarray(self.a["logged"][rows]).tolist()
        return [self.logs[c] if c != NONE else None for c in codes]

    def untimed(self, rows: np.ndarray) -> np.ndarray:
        """A flag per event row: its file gives it no time (`Logged.timed` false)."""
        if not self.logs or not any(not x.timed for x in self.logs):
            return np.zeros(len(rows), dtype=bool)
        return np.array([x is not None and not x.timed for x in self.logged(rows)], dtype=bool)

    def _device_lanes(self) -> LanePart | None:
        """`EngineLanes._device_lanes` less the device work its file gives no time (`Logged.timed` false: a dump's
        counted copies): an untimed event is not drawn."""
        part = super()._device_lanes()
        if part is None or not any(not x.timed for x in self.logs):
            return part
        keep = ~self.untimed(part.rows)
        if keep.all():
            return part
        n = len(part.rows)
        return dataclasses.replace(part, **{f: v[keep] for f in ("rows", "engine", "engine_kind", "kind", "name", "nbytes",
                                                                 "start", "dur")
                                            if (v := getattr(part, f)) is not None and len(v) == n})  # fmt: skip

    def _schedule(self, f: Findings) -> dict[int, tuple]:
        """A static schedule's slices (a run whose events read and write buffers): per span row, (what its engine
        idled on, the correlations it read from, its instruction's source line, its bytes); else none."""
        if not any(x.reads or x.writes for x in self.logs):
            return {}
        a = self.a
        rows = np.flatnonzero(a["kind"] == KIND_CODES[EventKind.SPAN])
        logged = self.logged(rows)
        nbytes = np.asarray(a["bytes"][rows]).tolist()
        return {r: (f.waited.get(r), f.depends.get(r), x.call_site if x is not None else None, b if b != NONE else None)
                for r, x, b in zip(rows.tolist(), logged, nbytes, strict=True)}

    def _slices(self, rows: np.ndarray, engine: pa.Array, engine_kind: pa.Array | list[str], kind: pa.Array | list[str],
                op: np.ndarray, nbytes: np.ndarray | None = None, name: pa.Array | None = None,
                start: np.ndarray | None = None, dur: np.ndarray | None = None) -> pa.Table:
        """`EngineLanes._slices`, with a static schedule's own columns where the run is one (`_schedule`)."""
        if not self.schedule:
            return super()._slices(rows, engine, engine_kind, kind, op, nbytes, name, start, dur)
        said = [self.schedule.get(r, (None, None, None, None)) for r in rows.tolist()]
        if nbytes is None:  # a schedule's spans carry their bytes (a copy engine's instruction)
            nbytes = np.array([x[3] if x[3] is not None else NONE for x in said], dtype=np.int64)
        table = super()._slices(rows, engine, engine_kind, kind, op, nbytes, name, start, dur)
        waited = dictionary_encode(pa.array([x[0] for x in said], pa.string()))
        table = table.set_column(table.schema.get_field_index("waited_on"), "waited_on", waited)
        table = table.append_column(DEPENDS_ON, pa.array([list(x[1]) if x[1] else None for x in said], DEPENDS_ON.type))
        return table.append_column(SLICE_CALL_SITE, dictionary_encode(pa.array([x[2] for x in said], pa.string())))

    def _region(self, rows: np.ndarray, op: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """The region of a row: its operator's where it has one (as the operators table says), else its own (what
        the lanes, `EngineLanes._slices`, and the finding tables write)."""
        if not len(rows):
            return np.zeros(0, dtype=np.int32)
        own = self.region_of(rows, start)
        if not len(self.op_rows) or not (op >= 0).any():
            return own.astype(np.int32)
        op_rows = self.op_rows[np.maximum(op, 0)]
        same = op_rows == rows  # an operator's own row: its start is the row's
        by_op = own.copy()
        other = (op >= 0) & ~same
        if other.any():
            by_op[other] = self.region_of(op_rows[other])
        return np.where(op >= 0, by_op, own).astype(np.int32)


def assemble(translated: Translated, *, sliced: bool = False) -> Trace:
    """The Trace of one reader's events: linked, the rules applied, every table written. sliced: the operators
    table as `Trace.slices`, made as it is written (else gathered)."""
    made = Assembly(translated)
    trace = made.build(sliced)
    trace.run_info.extra.setdefault("events", made.n_events)
    kernels = made.a["kind"] == KIND_CODES[EventKind.KERNEL]
    if kernels.any():
        trace.run_info.extra["kernels_linked_to_operators"] = int(np.count_nonzero(made.links.op[kernels] >= 0))
    return trace


__all__ = ["DEPENDS_ON", "SLICE_CALL_SITE", "SLICE_ROWS", "Assembly", "assemble"]

"""Linked events and the rules' findings -> the portscope tables of one run (`Trace`).

The last step of every conversion: `assemble(translated)` links the events (`link`), applies the rules (`rules`)
and writes regions, operators, engine lanes, transfers, signals, compiles and runtime calls. What a table holds
is decided here once for every reader; what a log line says of an event (`events.Logged`: a call site, a stack,
a compile's id) goes to that event's signals and compiles. The operators table, one row per operator, is made
`SLICE_ROWS` rows at a time as it is written (`Trace.slices`): converting never holds it whole.

An event that stands for N occurrences (`events` column ``count``) makes signals of count N, and a counted copy N
rows of the transfers table (its bytes split evenly; at most `MAX_COUNTED_ROWS`); an event whose file gives it no
time (`Logged.timed` false) has no time in the signals and transfers tables and is not drawn. A run whose file is a list of regions
(`Translated.root_name` None) has its annotations as its top-level regions, with what the file says of each
(`events.RegionFacts`). A static schedule's engine slices (events that read and write buffers) carry what the rules
found of them (``waited_on``, the extra ``depends_on``) and their instruction's source line (the extra
``call_site``).
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from . import progress, schema
from .arrow_compute import dictionary_encode
from .arrow_values import array
from .batches import batch_rows
from .builder import StackInterner
from .callsites import parse_frame, relative_frames, site_of_frames
from .columns import Coder, nullable, table_of
from .engine_lanes import EngineLanes, LanePart, used_codes
from .events import KIND_CODES, NONE, EventKind, Logged, RegionFacts, SparseColumn, Translated, rows_where
from .frame_chains import frame_chains
from .link import link
from .linked import DIRECTIONS, NO_WORD, SIGNAL_KINDS, Findings, Linked
from .rules import apply_rules
from .rules_compile import compiled_regions, compiler_ops
from .rules_fallbacks import inferred_fallback_ops, launched_ops
from .rules_memory import memory_peaks
from .rules_transfers import copy_directions
from .schema import (
    Direction,
    Mode,
    Placement,
    SignalKind,
)
from .spill import DiskColumn, release_memory
from .trace import TableSlices, Trace

SLICE_ROWS = 1 << 18  # event rows made into one record batch of a sliced table (operators, lanes...)
MAX_COUNTED_ROWS = 1_000_000  # transfers rows written for one counted copy at most (its signal keeps the count)
DEPENDS_ON = pa.field("depends_on", pa.list_(pa.int64()))  # engine_slices extra: producer correlations (FORMAT.md)
SLICE_CALL_SITE = pa.field("call_site", pa.dictionary(pa.int32(), pa.string()))  # engine_slices extra: "path:line"
_MIN = np.iinfo(np.int64).min
_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
_PLACES = [Placement.HOST.value, Placement.DEVICE.value, Placement.FALLBACK.value, Placement.COMPILER.value]  # by code


class Assembly(EngineLanes):
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
        self.devices = [d for d in _distinct(self.a["device"], rows_where(work)).tolist() if d >= 0]
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

    def park(self, columns: tuple[str, ...]) -> None:
        """Move these per-event columns to temporary files (a trace of more than `SLICE_ROWS` events): the sliced
        tables read them back a slice at a time (`column`), so what is resident while they are written is a slice."""
        if len(self.a["kind"]) <= SLICE_ROWS:
            return
        for c in columns:
            values = self.a[c]
            if not isinstance(values, np.ndarray) or values.strides == (0,):  # a constant, or kept sparse: small
                continue
            self.parked[c] = _to_file(values)
            self.a[c] = None  # type: ignore[assignment]
        release_memory()

    def column(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Values of a per-event column at sorted event rows (read from its file where parked)."""
        disk = self.parked.get(name)
        if disk is None:
            return self.a[name][rows]
        if not len(rows):
            return np.zeros(0, dtype=disk.dtype)
        if len(rows) > 1 and (rows[1:] < rows[:-1]).any():  # not in order: gathered a window at a time
            return disk.take(rows)
        lo = int(rows[0])
        return disk.read(lo, int(rows[-1]) + 1)[rows - lo]

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
        return (self.t.device_names.get(dev) or f"cuda:{dev}") if dev >= 0 else "cpu"

    # -- regions ----------------------------------------------------------------------------------------------------
    def regions(self) -> pa.Table:
        """The regions table (the root, then one per annotation; no root where the file is a list of regions: the
        annotations alone); sets `region_codes` (the region id from each of `Links.region_times`; an event outside
        every annotation of a run without a root: the first region)."""
        a, links = self.a, self.links
        anns = links.annotations
        rooted = self.t.root_name is not None or not len(anns)
        first = int(rooted)
        by_row = np.argsort(anns, kind="stable")
        sorted_rows = anns[by_row]

        def region_id(rows: np.ndarray) -> np.ndarray:  # of annotation rows (-1, outside all: 0, the root or the first)
            if not len(anns):
                return np.zeros(len(rows), dtype=np.int32)
            at = np.minimum(np.searchsorted(sorted_rows, rows), len(anns) - 1)
            return np.where(rows >= 0, first + by_row[at], 0).astype(np.int32)

        self.region_codes = region_id(links.region_rows)  # per change of the innermost annotation (`Links.region_change`)
        facts = [self.facts[c] if c != NONE else RegionFacts() for c in np.asarray(a["region_facts"][anns]).tolist()]
        starts = [0] * first + a["start_ns"][anns].tolist()
        spans = [max(self.links.end_ns, self.t.end_ns)] * first + a["dur_ns"][anns].tolist()
        peaks = memory_peaks(self.linked, [(s, s + d) for s, d in zip(starts, spans, strict=True)],
                             device_only=self.t.root_device != "cpu")  # fmt: skip
        facts = [RegionFacts(mode=self.t.root_mode)] * first + facts
        ran, compiled = compiled_regions(self.linked)  # a region the file gives no mode: compiled where it ran compiled code
        modes = [f.mode if f.mode is not Mode.UNKNOWN or not c else Mode.COMPILED
                 for f, c in zip(facts, [ran] * first + compiled.tolist(), strict=True)]  # fmt: skip
        peaks = [f.peak_memory_bytes if f.peak_memory_bytes is not None else p for f, p in zip(facts, peaks, strict=True)]
        around = links.annotation_parent
        parent = [None] * first + [p if r >= 0 or rooted else None
                                   for r, p in zip(around.tolist(), region_id(around).tolist(), strict=True)]
        names = [self.t.root_name or "run"] * first + [self.texts[c] or "" for c in a["name"][anns].tolist()]
        n = len(names)
        return table_of("regions", {
            "region_id": np.arange(n, dtype=np.int32), "parent_id": array(parent, pa.int32()), "name": names,
            "start_ns": starts, "dur_ns": [d if f.timed else 0 for d, f in zip(spans, facts, strict=True)],
            "mode": [m.value for m in modes], "phase": [f.phase.value for f in facts],
            "device": [self.t.root_device] * n, "peak_memory_bytes": array(peaks, pa.int64()),
            "tags": [f.tags for f in facts]})  # fmt: skip

    # -- call sites -------------------------------------------------------------------------------------------------
    def call_sites(self) -> None:
        """Per operator row, its call site (an index into `site_texts`, the last entry: none) from the Python frames
        open at its start; stacks interned."""
        if self.links.frame.strides == (0,):  # no Python frames: no call site
            self.site_texts, self.site_stacks = [None], np.full(1, -1, dtype=np.int64)
            self.op_site = np.broadcast_to(np.int32(0), (len(self.a["kind"]),))
            return
        python = rows_where(self.a["kind"] == KIND_CODES[EventKind.PYTHON])
        up = np.asarray(self.links.frame_parent[python])
        for lo in range(0, len(up), SLICE_ROWS):  # the caller's place among them, in place (no 8-byte search whole)
            part = up[lo : lo + SLICE_ROWS]
            part[:] = np.where(part >= 0, np.searchsorted(python, part), -1)
        chains = frame_chains(up, _ValuesAt(self.a["name"], python), len(self.texts))
        del up
        frames = np.asarray(self.links.frame[self.op_rows])  # each operator's innermost frame (-1: none)
        chain = np.empty(len(frames), dtype=chains.of_frame.dtype)
        for lo in range(0, len(frames), SLICE_ROWS):  # each operator's chain (-1: none), a slice at a time
            f = frames[lo : lo + SLICE_ROWS]
            at = np.minimum(np.searchsorted(python, f), len(python) - 1)
            chain[lo : lo + SLICE_ROWS] = np.where(f >= 0, chains.of_frame[at], -1)
        del python
        chains = chains._replace(of_frame=chains.of_frame[:0])  # what is left to read: the chains' codes
        used = np.flatnonzero(np.bincount(chain + 1, minlength=len(chains.parent) + 1)) - 1  # -1 first: no frame
        index = np.zeros(len(chains.parent) + 1, dtype=np.int32)
        index[used + 1] = np.arange(len(used), dtype=np.int32)
        index = index[chain + 1]  # each operator's place among the chains used
        first = np.full(len(used), np.iinfo(frames.dtype).max, dtype=frames.dtype)
        np.minimum.at(first, index, frames)  # the chains in order of their first innermost frame (file order)
        del frames, chain
        order = np.argsort(first, kind="stable")
        place = np.empty(len(used), dtype=np.int64)
        place[order] = np.arange(len(used))
        sites: list[str | None] = []
        stack_ids: list[int] = []
        parsed: dict[int, tuple[str, int, str] | None] = {}
        for c in used[order].tolist():
            frame_chain = []
            for code in chains.codes(c):
                if code not in parsed:
                    m = _FRAME.match(self.texts[code] or "")
                    parsed[code] = (m.group(1), int(m.group(2)), m.group(3)) if m else None
                if parsed[code] is not None:
                    frame_chain.append(parsed[code])
            sites.append(site_of_frames(frame_chain) if frame_chain else None)
            stack_ids.append(self.stacks.intern(relative_frames(frame_chain)) if frame_chain else -1)
        self.site_texts = [*sites, None]
        self.site_stacks = np.asarray([*stack_ids, -1], dtype=np.int64)
        if len(used) <= 1:  # no frames, or one chain for all: no per-row column
            self.op_site = np.broadcast_to(np.int32(0 if len(used) else len(sites)), (len(self.a["kind"]),))
            return
        self.op_site = np.full(len(self.a["kind"]), len(sites), dtype=np.int32)  # event row -> site index
        self.op_site[self.op_rows] = place[index]

    # -- tables -----------------------------------------------------------------------------------------------------
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
                    setattr(self.links, name, _to_file(getattr(self.links, name)))
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

    def placements(self) -> np.ndarray:
        """Per operator, a code into `_PLACES`: 0 host, 1 device (it or an operator inside it launched device work),
        2 inferred fallback, 3 compiler (it ran in the compiler's time: whatever it launched is the compiler's)."""
        placement = np.zeros(len(self.op_rows), dtype=np.int8)
        if self.devices:
            placement[launched_ops(self.linked)[self.op_rows]] = 1
            if self.t.infer_fallback:
                placement[self.op_id(inferred_fallback_ops(self.linked))] = 2
        placement[self.op_id(compiler_ops(self.linked))] = 3
        return placement

    def ops(self, placement: np.ndarray) -> TableSlices:
        a, rows = self.a, self.op_rows
        name, name_index = self._used_texts("name", rows)
        args_used = used_codes(a["args"].__getitem__, rows, len(self.arguments))
        shapes, strides, dtypes = (Coder([args[k] for args in self.arguments], args_used) for k in range(3))
        bytes_in = np.array([args[3] for args in self.arguments], dtype=np.int64)
        place = Coder(_PLACES, np.bincount(placement, minlength=len(_PLACES)) > 0)
        devices = ["cpu", self.t.root_device, "cpu", "cpu"]  # by placement code (the compiler's operators: the host's)
        used = _distinct(a["device"], rows)
        used = used[used >= 0]
        # a code into `devices`: by placement, or the operator's own device
        where_on = placement.astype(np.int8 if len(used) < 120 else np.int32)
        if len(used):  # operators of their own device: a slice at a time
            devices += [self.device_name(int(d)) for d in used.tolist()]
            for lo in range(0, len(rows), SLICE_ROWS):
                own = np.asarray(a["device"][rows[lo : lo + SLICE_ROWS]])
                mine = np.flatnonzero(own >= 0)
                where_on[lo + mine] = len(_PLACES) + np.searchsorted(used, own[mine])
        device = Coder(devices, np.bincount(where_on, minlength=len(devices)) > 0)
        outputs = {}  # outputs' texts: a few among many names, coded by the used ones only
        for c in ("output_shapes", "output_dtypes"):
            outputs[c] = self._used_texts(c, rows)
        sites = Coder(self.site_texts, used_codes(self.op_site.__getitem__, rows, len(self.site_texts)))
        tid = [t[1] if type(t[1]) is int and -(2**31) <= t[1] < 2**31 else None for t in self.threads]
        tids = np.array([v if v is not None else 0 for v in tid] or [0], dtype=np.int64)
        tid_null = np.array([v is None for v in tid] or [True], dtype=bool)

        step = batch_rows()  # a batch as written: passed on whole (four slices of a quarter each were copied into one)

        def batches() -> Iterator[pa.RecordBatch]:
            for lo in range(0, len(rows), step):
                part = rows[lo : lo + step]
                args, thread, site = self.column("args", part), self.column("thread", part), self.op_site[part]
                start = self.column("start_ns", part)
                stack = self.site_stacks[site]
                where = placement[lo : lo + step]
                yield from table_of("ops", {
                    "op_id": np.arange(lo, lo + len(part), dtype=np.int64), "region_id": self.region_of(part, start),
                    "name": name(name_index[self.column("name", part)]), "start_ns": start, "dur_ns": self.column("dur_ns", part),
                    "placement": place(where), "device": device(where_on[lo : lo + step]), "input_shapes": shapes(args),
                    "input_strides": strides(args), "input_dtypes": dtypes(args), "bytes_in": bytes_in[args],
                    **{c: coder(index[self.column(c, part)]) for c, (coder, index) in outputs.items()},
                    "bytes_out": np.zeros(len(part), dtype=np.int64), "call_site": sites(site),
                    "stack_id": nullable(stack, stack < 0), "thread": nullable(tids[thread], tid_null[thread]),
                }).to_batches()  # fmt: skip

        return TableSlices(len(rows), batches)

    def _used_texts(self, column: str, rows: np.ndarray) -> tuple[Coder, np.ndarray]:
        """(a coder of the texts some of these rows use in a text column, each text code's index among them): a few
        among many texts (kernel names) coded without going through them all."""
        used = np.flatnonzero(used_codes(self.a[column].__getitem__, rows, len(self.texts)))
        index = np.zeros(len(self.texts), dtype=np.int32)
        index[used] = np.arange(len(used), dtype=np.int32)
        return Coder([self.texts[t] for t in used.tolist()], np.ones(len(used), dtype=bool)), index

    def runtime_calls(self, sliced: bool = False) -> pa.Table | TableSlices:
        """The runtime_calls table; sliced with more than `SLICE_ROWS` calls, made a slice at a time as it is
        written (each slice's columns read back from where they are then: memory or a parked column's file)."""
        rows = rows_where(self.a["kind"] == KIND_CODES[EventKind.RUNTIME])
        name, name_index = self._used_texts("name", rows)

        def table(part: np.ndarray) -> pa.Table:
            op, corr = self._op_of(part), self.column("correlation", part)
            start = self.column("start_ns", part)
            return table_of("runtime_calls", {
                "region_id": self.region_of(part, start), "op_id": nullable(op, op < 0),
                "name": name(name_index[self.column("name", part)]), "start_ns": start,
                "dur_ns": self.column("dur_ns", part), "correlation": nullable(corr, corr == NONE)})  # fmt: skip

        if not sliced or len(rows) <= SLICE_ROWS:
            return table(rows)
        return TableSlices(len(rows), lambda: (batch for lo in range(0, len(rows), SLICE_ROWS)
                                               for batch in table(rows[lo : lo + SLICE_ROWS]).to_batches()))  # fmt: skip

    def comms(self) -> pa.Table:
        """A row per operator with communication arguments (`events.Comm`), in operator order."""
        column = self.a["comm"]
        if not self.comm_values or not isinstance(column, SparseColumn):  # none (a spilled reader writes none)
            return table_of("comms", {c: [] for c in schema.COMMS.names})
        keep = np.asarray(self.a["kind"][column.rows]) == KIND_CODES[EventKind.OP]
        rows, codes = column.rows[keep], column.values[keep].tolist()
        comms = [self.comm_values[c] for c in codes]
        return table_of("comms", {
            "op_id": self.op_id(rows), "process_group": [c.process_group for c in comms],
            "process_group_description": [c.description for c in comms], "seq": [c.seq for c in comms],
            "collective": [c.collective for c in comms], "group_size": [c.group_size for c in comms]})  # fmt: skip

    def transfers(self, t: dict[str, np.ndarray], count: np.ndarray, sliced: bool) -> pa.Table | TableSlices:
        """The transfers table: a row per copy found (a counted copy as many rows, its bytes split evenly), made
        `SLICE_ROWS` copies at a time, each column coded by one dictionary of the values some row uses; sliced: more
        than a slice of them waits in a temporary file until written."""
        a, rows, direction = self.a, t["event"], t["direction"]
        devs = _distinct(a["device"], rows) if len(rows) else rows
        places = ["cpu", *(self.device_name(int(d)) if d >= 0 else self.t.root_device for d in devs.tolist())]
        ends = {"src_device": DIRECTIONS.index(Direction.H2D), "dst_device": DIRECTIONS.index(Direction.D2H)}
        parts = [slice(lo, lo + SLICE_ROWS) for lo in range(0, len(rows), SLICE_ROWS)] or [slice(0, 0)]

        def op_rows_of(part: slice) -> np.ndarray:  # the operator row around each copy (-1: none)
            return self.links.op[rows[part]] if len(rows[part]) else rows[part]

        def codes(part: slice, op_rows: np.ndarray) -> dict[str, np.ndarray]:  # dictionary codes per copy
            d = direction[part]
            device = np.searchsorted(devs, a["device"][rows[part]]) + 1
            site = np.where(op_rows >= 0, self.op_site[np.maximum(op_rows, 0)], len(self.site_texts) - 1)
            return {"direction": d, "call_site": site, **{c: np.where(d == host, 0, device) for c, host in ends.items()}}

        used = {"direction": np.zeros(len(DIRECTIONS), bool), "call_site": np.zeros(len(self.site_texts), bool),
                "src_device": np.zeros(len(places), bool), "dst_device": np.zeros(len(places), bool)}  # fmt: skip
        for part in parts:  # the values some row uses (a copy counted none times has no row: its site is kept)
            written = count[part] > 0
            for c, v in codes(part, op_rows_of(part)).items():
                used[c][v if c == "call_site" else v[written]] = True
        coders = {c: Coder([d.value for d in DIRECTIONS] if c == "direction" else self.site_texts if c == "call_site"
                           else places, flags) for c, flags in used.items()}  # fmt: skip
        cause = Coder(["explicit"], np.array([bool((count > 0).any())]))

        def table(part: slice) -> pa.Table:
            at = rows[part]
            each, nbytes = _counted(count[part], t["bytes"][part])  # a counted copy: as many rows, its bytes split

            def rows_of(v: np.ndarray) -> np.ndarray:
                return v if each is None else v[each]

            op_rows = op_rows_of(part)
            op = self.op_id(op_rows) if len(at) else at
            coded = codes(part, op_rows)
            stack = self.site_stacks[rows_of(coded["call_site"])]
            untimed = rows_of(self._untimed(at))
            return table_of("transfers", {
                "region_id": rows_of(self._region(at, op)), "op_id": nullable(rows_of(op), rows_of(op) < 0),
                "bytes": nbytes, **{c: coder(rows_of(coded[c])) for c, coder in coders.items()},
                "start_ns": nullable(rows_of(a["start_ns"][at]), untimed), "dur_ns": nullable(rows_of(a["dur_ns"][at]), untimed),
                "cause": cause(np.zeros(len(untimed), dtype=np.int32)), "stack_id": nullable(stack, stack < 0)})  # fmt: skip

        if sliced and len(parts) > 1:  # made and moved to a temporary file a slice at a time
            return _in_file(table(part) for part in parts)
        return pa.concat_tables([table(part) for part in parts])

    def findings(self, f: Findings, sliced: bool = False) -> tuple[pa.Table | TableSlices, pa.Table | TableSlices, pa.Table]:
        """The transfers, signals and compiles tables of the rules' findings (columns: nothing per row in Python).
        The signals in order of their events' start (ties in the order found), made `SLICE_ROWS` at a time; sliced:
        more than a slice of them waits in a temporary file until written."""
        t, s = f.transfer_columns(), f.signal_columns()
        rows, direction = t["event"], t["direction"]
        op_rows = self.links.op[rows] if len(rows) else rows
        count = self._counts(rows)
        transfers = self.transfers(t, count, sliced)
        # the signals: the transfers' then the rules' others, one source each (not joined: millions of AI CPU kernels)
        signal_of = np.array([SIGNAL_KINDS.index(d.signal) for d in DIRECTIONS], dtype=np.int8)
        none = np.full(len(rows), NO_WORD, dtype=np.int32)
        sources = [{"event": rows, "op": np.asarray(op_rows, dtype=np.int64), "kind": signal_of[direction],
                    "reason": t["reason"], "note": none, "word": none, "bytes": t["bytes"], "count": count,
                    "text": self.a["name"][np.where(op_rows >= 0, op_rows, rows)] if len(rows) else rows.astype(np.int32)},
                   {**s, "text": s["name_text"], "word": s["name_word"], "count": self._counts(s["event"])}]  # fmt: skip
        n = len(rows) + len(s["event"])
        order = self._in_time_order(sources)
        positions = [np.arange(lo, min(lo + SLICE_ROWS, n)) if order is None else order[lo : lo + SLICE_ROWS]
                     for lo in range(0, n, SLICE_ROWS)] or [np.zeros(0, dtype=np.int64)]  # fmt: skip
        coders = self._signal_coders(f, sources)
        for x in self.logs:  # the source line a log printed under a call site: the frames table's source column
            if x.call_site and x.source and (frame := parse_frame(x.call_site))[1] is not None:
                self.stacks.sources[(frame[0], frame[1], frame[2] or "")] = x.source  # type: ignore[index]
        if sliced and len(positions) > 1:  # made and moved to a temporary file a slice at a time
            signals: pa.Table | TableSlices = _in_file(self._signal_slice(sources, coders, len(f.words), p) for p in positions)
        else:
            signals = pa.concat_tables([self._signal_slice(sources, coders, len(f.words), p) for p in positions])
        return transfers, signals, self.compiles(f)

    def _in_time_order(self, sources: list[dict[str, np.ndarray]]) -> np.ndarray | None:
        """None where the signals (the sources one after the other) come in order of their events' start, else the
        order (stable)."""
        last = _MIN
        for source in sources:
            for lo in range(0, len(source["event"]), SLICE_ROWS):
                start = self.a["start_ns"][source["event"][lo : lo + SLICE_ROWS]]
                if len(start) and (start[0] < last or (start[1:] < start[:-1]).any()):
                    return np.argsort(np.concatenate([self.a["start_ns"][src["event"]] for src in sources]), kind="stable")
                last = start[-1] if len(start) else last
        return None

    def _signal_coders(self, f: Findings, sources: list[dict[str, np.ndarray]]) -> dict[str, tuple[Coder, np.ndarray]]:
        """(a coder shared by every slice, the index of each code in its values) of the signals' dictionary columns:
        kind, reason, note, the operator name shown (the texts some signal shows, then the rules' words), call site."""
        words = len(f.words)
        used = {c: np.zeros(size, dtype=bool) for c, size in (("kind", len(SIGNAL_KINDS)), ("reason", words + 1),
                                                               ("note", words + 1), ("word", words + 1))}  # fmt: skip
        texts = np.zeros(len(self.texts), dtype=bool)
        sites = np.zeros(len(self.site_texts), dtype=bool)
        for src in sources:
            for c in used:
                used[c][_words(src[c], words) if c != "kind" else src[c]] = True
            texts[src["text"][src["word"] == NO_WORD]] = True
            sites[np.asarray(self.op_site[np.maximum(src["op"], 0)])[src["op"] >= 0]] = True
            sites[-1] |= bool((src["op"] < 0).any())
        shown = np.flatnonzero(texts)
        text_index = np.zeros(len(self.texts) + words + 1, dtype=np.int32)  # text codes, then words after them
        text_index[shown] = np.arange(len(shown), dtype=np.int32)
        text_index[len(self.texts) + np.arange(words + 1)] = len(shown) + np.arange(words + 1, dtype=np.int32)
        names = [*(self.texts[c] for c in shown.tolist()), *f.words, None]
        name_used = np.r_[np.ones(len(shown), dtype=bool), used["word"]]
        identity = np.arange(max(words + 1, len(SIGNAL_KINDS), len(self.site_texts)), dtype=np.int32)
        return {"kind": (Coder([k.value for k in SIGNAL_KINDS], used["kind"]), identity),
                "reason": (Coder([*f.words, None], used["reason"]), identity),
                "note": (Coder([*f.words, None], used["note"]), identity),
                "op_name": (Coder(names, name_used), text_index),
                "call_site": (Coder(self.site_texts, sites), identity)}

    def _signal_slice(self, sources: list[dict[str, np.ndarray]], coders: dict[str, tuple[Coder, np.ndarray]],
                      words: int, at: np.ndarray) -> pa.Table:  # fmt: skip
        """The signals at positions `at` (of the sources one after the other) as a table of the schema."""
        first = len(sources[0]["event"])
        mine = at < first

        def pick(c: str) -> np.ndarray:
            out = np.empty(len(at), dtype=sources[1][c].dtype if len(sources[1][c]) else sources[0][c].dtype)
            out[mine] = sources[0][c][at[mine]]
            out[~mine] = sources[1][c][at[~mine] - first]
            return out

        def code(c: str, codes: np.ndarray) -> pa.Array:
            coder, index = coders[c]
            return coder(index[codes])

        ev, ops = pick("event"), pick("op")
        sig_op = self.op_id(ops)
        s = np.where(ops >= 0, self.op_site[np.maximum(ops, 0)], len(self.site_texts) - 1)
        site: pa.Array | list = code("call_site", s)
        stack: pa.Array | list = nullable(self.site_stacks[s], self.site_stacks[s] < 0)
        time: np.ndarray | list = self.a["start_ns"][np.where(ops >= 0, ops, ev)] if len(ev) else ev
        logged = self._logged(ev) if self.logs else []
        if any(x is not None for x in logged):  # a log line's own call site, stack and (missing) time
            site, stack, time = site.to_pylist(), stack.to_pylist(), time.tolist()  # type: ignore[union-attr]
            for i, x in enumerate(logged):
                if x is not None:
                    site[i] = x.call_site or site[i]
                    stack[i] = self.stacks.intern(x.stack) if x.stack else stack[i]
                    time[i] = time[i] if x.timed else None
        word = pick("word")
        shown = np.where(word >= 0, len(self.texts) + word, pick("text"))
        return table_of("signals", {
            "region_id": self._region(ev, sig_op), "op_id": nullable(sig_op, sig_op < 0),
            "kind": code("kind", pick("kind")), "reason": code("reason", _words(pick("reason"), words)),
            "op_name": code("op_name", shown), "count": pick("count"), "bytes": pick("bytes"),
            "call_site": site, "stack_id": stack, "note": code("note", _words(pick("note"), words)), "time_ns": time})  # fmt: skip

    def compiles(self, f: Findings) -> pa.Table:
        """A row per compile the rules found, in file order: a runtime call's online compile (its operator's name,
        its duration) or a `compile` event a log recorded (what the log line says of it, its time as logged)."""
        a, name = self.a, self.texts
        order = np.argsort(np.asarray(f.compile_event, dtype=np.int64), kind="stable")
        crow = np.asarray(f.compile_event, dtype=np.int64)[order]
        at = order.tolist()
        cop = self.links.op[crow] if len(crow) else crow
        logged = [x or Logged() for x in self._logged(crow)]
        logged_compile = (a["kind"][crow] == KIND_CODES[EventKind.COMPILE]).tolist()
        dur = a["dur_ns"][crow].tolist()
        time = a["start_ns"][crow].tolist()
        return table_of("compiles", {
            "region_id": self._region(crow, self.op_id(cop)), "kind": [f.compile_kind[i].value for i in at],
            "compile_id": [x.compile_id for x in logged],
            "key": [name[a["name"][o if o >= 0 else r]] for r, o in zip(crow.tolist(), cop.tolist(), strict=True)],
            "frame": [x.frame for x in logged], "op_count": [x.op_count for x in logged],
            "compile_ns": [x.compile_ns if c else d for x, c, d in zip(logged, logged_compile, dur, strict=True)],
            "reason": [f.compile_reason[i] for i in at], "call_site": [x.call_site for x in logged],
            "time_ns": [t if x.timed else None for x, t in zip(logged, time, strict=True)]})  # fmt: skip

    def _counts(self, rows: np.ndarray) -> np.ndarray:
        """How many occurrences each event row stands for (`events` column ``count``; none given: one). A column of one
        value (no reader gave counts): that value for every row, held once."""
        count = self.a["count"]
        if isinstance(count, np.ndarray) and count.strides == (0,) and len(count):
            return np.broadcast_to(np.int64(1 if int(count[0]) == NONE else int(count[0])), (len(rows),))
        given = np.asarray(count[rows], dtype=np.int64)
        return np.where(given == NONE, 1, given)

    def _untimed(self, rows: np.ndarray) -> np.ndarray:
        """A flag per event row: its file gives it no time (`Logged.timed` false)."""
        if not self.logs or not any(not x.timed for x in self.logs):
            return np.zeros(len(rows), dtype=bool)
        return np.array([x is not None and not x.timed for x in self._logged(rows)], dtype=bool)

    def _device_lanes(self) -> LanePart | None:
        """`EngineLanes._device_lanes` less the device work its file gives no time (`Logged.timed` false: a dump's
        counted copies): an untimed event is not drawn."""
        part = super()._device_lanes()
        if part is None or not any(not x.timed for x in self.logs):
            return part
        keep = ~self._untimed(part.rows)
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
        logged = self._logged(rows)
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

    def _logged(self, rows: np.ndarray) -> list[Logged | None]:
        """What a log line says of each event row (None: nothing)."""
        if not self.logs:
            return [None] * len(rows)
        codes = np.asarray(self.a["logged"][rows]).tolist()
        return [self.logs[c] if c != NONE else None for c in codes]

    def _region(self, rows: np.ndarray, op: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """The region of a row: its operator's where it has one (as the operators table says), else its own."""
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


class _ValuesAt:
    """A column's values at some rows, gathered where asked (`[at]`: at rows[at]) rather than whole."""

    def __init__(self, values: np.ndarray | DiskColumn, rows: np.ndarray) -> None:
        self.values, self.rows = values, rows

    def __getitem__(self, at: np.ndarray) -> np.ndarray:
        return np.asarray(self.values[self.rows[at]])


def _in_file(tables: Iterator[pa.Table]) -> TableSlices:
    """A table made slice by slice into a temporary Arrow file (every slice sharing its dictionaries), read back a
    slice a batch as it is written."""
    file = tempfile.TemporaryFile(prefix="portscope-table-")  # noqa: SIM115 (lives as long as the slices)
    writer, rows, table_schema = None, 0, None
    for table in tables:
        if writer is None:
            table_schema = table.schema
            writer = pa.ipc.new_file(pa.PythonFile(file, mode="w"), table_schema)
        for batch in table.to_batches():
            writer.write_batch(batch)
        rows += table.num_rows
        del table
        release_memory()
    assert writer is not None and table_schema is not None, "a table of no slice"
    writer.close()

    def batches() -> Iterator[pa.RecordBatch]:
        file.seek(0)
        reader = pa.ipc.open_file(pa.PythonFile(file, mode="r"))
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)

    return TableSlices(rows, batches, table_schema)


def _to_file(values: np.ndarray) -> DiskColumn:
    """A column moved to a temporary file, `SLICE_ROWS` values at a time."""
    disk = DiskColumn(values.dtype.char, hold=1 << 16)
    for lo in range(0, len(values), SLICE_ROWS):
        disk.extend(values[lo : lo + SLICE_ROWS])
    disk.flush()
    return disk


def _distinct(column: np.ndarray | DiskColumn, rows: np.ndarray) -> np.ndarray:
    """The distinct values of a column at these rows, read `SLICE_ROWS` at a time."""
    found = [np.unique(column[rows[lo : lo + SLICE_ROWS]]) for lo in range(0, len(rows), SLICE_ROWS)]
    return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def _counted(count: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(per row written, the finding it is of; None: one each) and each row's bytes: a finding of count N is N rows
    (at most `MAX_COUNTED_ROWS`), its bytes split evenly (the first ones a byte more where they do not divide)."""
    if not len(count) or (count == 1).all():
        return None, nbytes
    times = np.clip(count, 0, MAX_COUNTED_ROWS)
    each = np.repeat(np.arange(len(count)), times)
    k = np.arange(len(each)) - np.repeat(np.cumsum(times) - times, times)  # a row's place among its finding's
    per = np.maximum(times[each], 1)
    return each, nbytes[each] // per + (k < nbytes[each] % per)


def _words(codes: np.ndarray, none: int) -> np.ndarray:
    """Codes into `Findings.words` with `NO_WORD` as `none` (a None after the words)."""
    return np.where(codes == NO_WORD, none, codes)


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


__all__ = ["DEPENDS_ON", "MAX_COUNTED_ROWS", "SLICE_CALL_SITE", "SLICE_ROWS", "Assembly", "assemble"]

"""Linked events and the rules' findings -> the portscope tables of one run (`Trace`).

The last step of every conversion: `assemble(translated)` links the events (`link`), applies the rules (`rules`)
and writes regions, operators, engine lanes, transfers, signals, compiles and runtime calls. What a table holds
is decided here once for every reader.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from . import progress, schema
from .builder import StackInterner
from .callsites import relative_frames, site_of_frames
from .events import KIND_CODES, NONE, EventKind, Translated
from .link import link
from .rules import (
    Findings,
    Linked,
    apply_rules,
    copy_directions,
    inferred_fallback_ops,
    launched_ops,
    memory_peaks,
)
from .schema import Direction, EngineKind, Mode, Placement, SliceKind
from .trace import Trace

_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
_DMA = {Direction.H2D: EngineKind.DMA_H2D, Direction.D2H: EngineKind.DMA_D2H, Direction.D2D: EngineKind.DMA_D2D,
        Direction.UNKNOWN: EngineKind.OTHER}  # fmt: skip


def table_of(name: str, columns: dict[str, object]) -> pa.Table:
    """A table of the schema from whole columns (lists, numpy arrays or Arrow arrays); missing columns are null."""
    table_schema = schema.TABLES[name]
    n = max((len(v) for v in columns.values() if v is not None), default=0)  # type: ignore[arg-type]
    arrays = []
    for field in table_schema:
        values = columns.get(field.name)
        if values is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(values, pa.Array):
            arrays.append(values.cast(field.type))
        elif pa.types.is_dictionary(field.type):
            arrays.append(pa.array(values, pa.string()).dictionary_encode())
        else:
            arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=table_schema)


def coded(texts: list[str | None], codes: np.ndarray) -> pa.DictionaryArray:
    """texts[codes] (None: null) as a dictionary column holding only the texts some row uses."""
    if not len(codes):
        return pa.DictionaryArray.from_arrays(pa.array([], pa.int32()), pa.array([], pa.string()))
    used, inverse = np.unique(codes, return_inverse=True)
    words = [texts[c] for c in used.tolist()]
    nulls = np.array([w is None for w in words], dtype=bool)[inverse]
    return pa.DictionaryArray.from_arrays(pa.array(inverse.astype(np.int32), mask=nulls if nulls.any() else None),
                                          pa.array([w if w is not None else "" for w in words], pa.string()))


def _nullable(values: np.ndarray, null: np.ndarray) -> pa.Array:
    return pa.array(values, mask=null if null.any() else None)


class _Assembly:
    def __init__(self, t: Translated) -> None:
        self.t = t
        ev = t.events
        self.n_events = len(ev)
        self.a = ev.arrays(release=True)
        self.texts = ev.texts
        self.lanes = ev.lanes
        progress.current().stage(progress.Stage.LINKING)
        self.links = link(self.a, len(ev.lanes))
        self.linked = Linked(self.a, ev.texts, self.links, infer_fallback=t.infer_fallback)
        self.found = apply_rules(self.linked)
        self.stacks = StackInterner()
        kind = self.a["kind"]
        self.op_rows = np.flatnonzero(kind == KIND_CODES[EventKind.OP])
        self.op_id = np.full(len(kind), -1, dtype=np.int64)  # event row -> op_id
        self.op_id[self.op_rows] = np.arange(len(self.op_rows))
        devices = self.a["device"][np.isin(kind, [KIND_CODES[k] for k in (EventKind.KERNEL, EventKind.COPY,
                                                                           EventKind.MEMSET)])]  # fmt: skip
        self.devices = sorted(set(devices[devices >= 0].tolist()))

    def device_name(self, dev: int) -> str:
        return self.t.device_names.get(dev) or f"cuda:{dev}" if dev >= 0 else "cpu"

    # -- regions ----------------------------------------------------------------------------------------------------
    def regions(self) -> tuple[pa.Table, np.ndarray]:
        """(the regions table, region_id per event row)."""
        a, links = self.a, self.links
        anns = np.flatnonzero(a["kind"] == KIND_CODES[EventKind.ANNOTATION])
        anns = anns[np.lexsort((anns, -a["dur_ns"][anns], a["start_ns"][anns]))]
        ids = np.full(len(a["kind"]) + 1, 0, dtype=np.int64)  # indexed by annotation row + 1 (0: the root)
        ids[anns + 1] = np.arange(1, len(anns) + 1)
        starts = [0, *a["start_ns"][anns].tolist()]
        durs = [self.links.end_ns, *a["dur_ns"][anns].tolist()]
        spans = [(s, s + d) for s, d in zip(starts, durs, strict=True)]
        peaks = memory_peaks(self.linked, spans, device_only=self.t.root_device != "cpu")
        parent = [None, *ids[links.region[anns] + 1].tolist()]
        names = [self.t.root_name, *(self.texts[c] or "" for c in a["name"][anns].tolist())]
        n = len(names)
        table = table_of("regions", {
            "region_id": np.arange(n, dtype=np.int32), "parent_id": pa.array(parent, pa.int32()), "name": names,
            "start_ns": starts, "dur_ns": durs, "mode": [Mode.UNKNOWN.value] * n,
            "phase": [schema.Phase.NONE.value] * n, "device": [self.t.root_device] * n,
            "peak_memory_bytes": pa.array(peaks, pa.int64())})  # fmt: skip
        return table, ids[links.region + 1]

    # -- call sites -------------------------------------------------------------------------------------------------
    def call_sites(self) -> tuple[list[str | None], np.ndarray]:
        """(site per distinct innermost frame, index into it per op row; -1: none) and stacks interned."""
        frames = self.links.frame[self.op_rows]
        innermost, index = np.unique(frames, return_inverse=True)
        sites: list[str | None] = []
        stack_ids: list[int | None] = []
        parsed: dict[int, tuple[str, int, str] | None] = {}
        for f in innermost.tolist():
            chain = []
            while f >= 0:
                code = int(self.a["name"][f])
                if code not in parsed:
                    m = _FRAME.match(self.texts[code] or "")
                    parsed[code] = (m.group(1), int(m.group(2)), m.group(3)) if m else None
                if parsed[code] is not None:
                    chain.append(parsed[code])
                f = int(self.links.frame_parent[f])
            if chain:
                sites.append(site_of_frames(chain))
                stack_ids.append(self.stacks.intern(relative_frames(chain)))
            else:
                sites.append(None)
                stack_ids.append(None)
        self.site_texts = sites
        self.site_stacks = stack_ids
        return sites, index

    # -- tables -----------------------------------------------------------------------------------------------------
    def build(self) -> Trace:
        a = self.a
        regions, region_of = self.regions()
        self.region_of = region_of
        sites, site_index = self.call_sites()
        op_site = np.full(len(a["kind"]), -1, dtype=np.int64)
        op_site[self.op_rows] = site_index if self.op_rows.size and any(s is not None for s in sites) else -1
        self.op_site = op_site
        tables = {"regions": regions, "ops": self.ops(), "runtime_calls": self.runtime_calls()}
        tables["engine_slices"] = self.engine_slices(tables["ops"])
        tables["transfers"], tables["signals"], tables["compiles"] = self.findings(self.found)
        tables["frames"] = self.stacks.frames_table()
        tables["stacks"] = self.stacks.stacks_table()
        return Trace(run_info=self.t.run_info, tables=tables)

    def _site(self, rows: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """(call_site, stack_id) columns of event rows by their operator (-1 rows: null)."""
        s = np.where(rows >= 0, self.op_site[np.maximum(rows, 0)], -1)
        texts = [*self.site_texts, None] if hasattr(self, "site_texts") else [None]
        stacks = [*self.site_stacks, None] if hasattr(self, "site_stacks") else [None]
        s = np.where(s >= 0, s, len(texts) - 1)
        stack = np.array([v if v is not None else -1 for v in stacks], dtype=np.int64)[s]
        return coded(texts, s), _nullable(stack, stack < 0)

    def ops(self) -> pa.Table:
        a, rows = self.a, self.op_rows
        placement = np.zeros(len(rows), dtype=np.int64)  # 0 host, 1 device, 2 fallback
        if self.devices:
            placement[launched_ops(self.linked)[rows]] = 1
            if self.t.infer_fallback:
                placement[self.op_id[inferred_fallback_ops(self.linked)]] = 2
        places = [Placement.HOST.value, Placement.DEVICE.value, Placement.FALLBACK.value]
        site, stack = self._site(rows)
        tid = [v if type(v) is int and -(2**31) <= v < 2**31 else None for v in self.lanes]
        tids = np.array([v if v is not None else 0 for v in tid] or [0], dtype=np.int64)[a["tid"][rows]]
        tid_null = np.array([v is None for v in tid] or [True], dtype=bool)[a["tid"][rows]]
        bytes_in = a["bytes_in"][rows]
        return table_of("ops", {
            "op_id": np.arange(len(rows), dtype=np.int64), "region_id": self.region_of[rows].astype(np.int32),
            "name": coded(self.texts, a["name"][rows]), "start_ns": a["start_ns"][rows], "dur_ns": a["dur_ns"][rows],
            "placement": coded(places, placement), "device": coded(["cpu", self.t.root_device, "cpu"], placement),
            "input_shapes": coded(self.texts, a["shapes"][rows]), "input_strides": coded(self.texts, a["strides"][rows]),
            "input_dtypes": coded(self.texts, a["dtypes"][rows]), "bytes_in": np.where(bytes_in == NONE, 0, bytes_in),
            "bytes_out": np.zeros(len(rows), dtype=np.int64), "call_site": site, "stack_id": stack,
            "thread": _nullable(tids, tid_null)})  # fmt: skip

    def runtime_calls(self) -> pa.Table:
        a = self.a
        rows = np.flatnonzero(a["kind"] == KIND_CODES[EventKind.RUNTIME])
        op = self.op_id[np.maximum(self.links.op[rows], 0)]
        op = np.where(self.links.op[rows] >= 0, op, -1)
        corr = a["correlation"][rows]
        return table_of("runtime_calls", {
            "region_id": self.region_of[rows].astype(np.int32), "op_id": _nullable(op, op < 0),
            "name": coded(self.texts, a["name"][rows]), "start_ns": a["start_ns"][rows], "dur_ns": a["dur_ns"][rows],
            "correlation": _nullable(corr, corr == NONE)})  # fmt: skip

    def engine_slices(self, ops: pa.Table) -> pa.Table:
        a, links = self.a, self.links
        parts = []
        # host lanes: the operators no other encloses, a lane per thread (the busiest: "host")
        rows = self.op_rows[links.op[self.op_rows] < 0]
        thread = a["pid"][rows].astype(np.int64) * max(len(self.lanes), 1) + a["tid"][rows]
        all_threads = a["pid"][self.op_rows].astype(np.int64) * max(len(self.lanes), 1) + a["tid"][self.op_rows]
        if len(rows):
            values, counts = np.unique(all_threads, return_counts=True)
            main = values[np.argmax(counts)]
            lanes, lane_codes = np.unique(thread, return_inverse=True)
            names = ["host" if t == main else f"host thread {self.lanes[int(t % max(len(self.lanes), 1))]}" for t in lanes.tolist()]
            placement = ops.column("placement").to_numpy(zero_copy_only=False)[self.op_id[rows]] if ops.num_rows else []
            fallback = np.asarray(placement == Placement.FALLBACK.value, dtype=np.int64)
            parts.append(self._slices(rows, coded(names, lane_codes), [EngineKind.HOST.value] * len(rows),
                                      coded([SliceKind.COMPUTE.value, SliceKind.FALLBACK.value], fallback),
                                      op=self.op_id[rows]))  # fmt: skip
        parts += self._device_slices()
        parts += self._memory_slices()
        parts += self._other_spans()
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return table_of("engine_slices", {})
        return pa.concat_tables(parts).unify_dictionaries().combine_chunks()

    def _slices(self, rows: np.ndarray, engine: pa.Array, engine_kind: list[str], kind: pa.Array | list[str],
                op: np.ndarray, nbytes: np.ndarray | None = None, name: pa.Array | None = None,
                start: np.ndarray | None = None, dur: np.ndarray | None = None) -> pa.Table:
        a = self.a
        corr = a["correlation"][rows]
        b = nbytes if nbytes is not None else np.full(len(rows), NONE, dtype=np.int64)
        return table_of("engine_slices", {
            "region_id": self._region(rows, op), "engine": engine, "engine_kind": engine_kind,
            "kind": kind, "name": name if name is not None else coded(self.texts, a["name"][rows]),
            "start": a["start_ns"][rows] if start is None else start, "dur": a["dur_ns"][rows] if dur is None else dur,
            "op_id": _nullable(op, op < 0), "bytes": _nullable(np.maximum(b, 0), b == NONE),
            "correlation": _nullable(corr, corr == NONE)})  # fmt: skip

    def _op_of(self, rows: np.ndarray) -> np.ndarray:
        op = self.links.op[rows]
        return np.where(op >= 0, self.op_id[np.maximum(op, 0)], -1)

    def _device_slices(self) -> list[pa.Table]:
        """Kernels, memsets, copies and device waits in the order the trace gives them."""
        a = self.a
        multi = len(self.devices) > 1
        directions = list(Direction)
        copy_rows, copy_dir = copy_directions(self.linked)
        direction_of = dict(zip(copy_rows.tolist(), copy_dir.tolist(), strict=True))
        codes = [KIND_CODES[k] for k in (EventKind.KERNEL, EventKind.MEMSET, EventKind.COPY, EventKind.WAIT)]
        rows = np.flatnonzero(np.isin(a["kind"], codes))
        if not len(rows):
            return []
        engines, engine_kinds, slice_kinds = [], [], []
        copy_code, wait_code = KIND_CODES[EventKind.COPY], KIND_CODES[EventKind.WAIT]
        for row, kind, lane, ekind, dev, stream in zip(rows.tolist(), a["kind"][rows].tolist(), a["lane"][rows].tolist(),
                                                       a["engine_kind"][rows].tolist(), a["device"][rows].tolist(),
                                                       a["stream"][rows].tolist(), strict=True):  # fmt: skip
            prefix = f"{self.device_name(dev)} " if multi else ""
            if kind == copy_code:
                d = directions[direction_of[row]]
                engines.append(self.texts[lane] or f"{prefix}DMA {d.value}")
                engine_kinds.append(self.texts[ekind] or _DMA[d].value)
                slice_kinds.append(SliceKind.TRANSFER.value)
            else:
                engines.append(self.texts[lane] or f"{prefix}stream {stream if stream != NONE else 0}")
                engine_kinds.append(self.texts[ekind] or EngineKind.STREAM.value)
                slice_kinds.append(SliceKind.SYNC.value if kind == wait_code else SliceKind.COMPUTE.value)
        nbytes = np.where(np.isin(a["kind"][rows], codes[1:3]), a["bytes"][rows], NONE)  # copies' and memsets'
        launcher = self.links.launcher[rows]  # a copy with no byte count of its own: its launching call's
        nbytes = np.where((nbytes == NONE) & (a["kind"][rows] == copy_code) & (launcher >= 0),
                          a["bytes"][np.maximum(launcher, 0)], nbytes)  # fmt: skip
        return [self._slices(rows, pa.array(engines).dictionary_encode(), engine_kinds, slice_kinds,
                             op=self._op_of(rows), nbytes=nbytes)]  # fmt: skip

    def _memory_slices(self) -> list[pa.Table]:
        """A lane per device: one slice from each allocator event to the next, its bytes the total allocated."""
        a = self.a
        rows = np.flatnonzero((a["kind"] == KIND_CODES[EventKind.MEMORY]) & (a["total_allocated"] != NONE))
        out = []
        for dev in sorted(set(a["device"][rows].tolist())):
            on = rows[a["device"][rows] == dev]
            on = on[np.argsort(a["start_ns"][on], kind="stable")]
            starts = a["start_ns"][on]
            ends = np.r_[starts[1:], max(self.links.end_ns, int(starts[-1]))]
            name = f"memory {self.device_name(dev)}"
            out.append(self._slices(on, pa.array([name] * len(on)).dictionary_encode(), [EngineKind.OTHER.value] * len(on),
                                    [SliceKind.ANNOTATION.value] * len(on), op=self._op_of(on), nbytes=a["total_allocated"][on],
                                    name=pa.array(["allocated"] * len(on)).dictionary_encode(), dur=ends - starts))  # fmt: skip
        return out

    def _other_spans(self) -> list[pa.Table]:
        a = self.a
        rows = np.flatnonzero(a["kind"] == KIND_CODES[EventKind.SPAN])
        if not len(rows):
            return []
        lanes = [self.texts[a["lane"][r]] or f"{self.lanes[a['pid'][r]]} / {self.lanes[a['tid'][r]]}" for r in rows.tolist()]
        kinds = [self.texts[a["engine_kind"][r]] or EngineKind.OTHER.value for r in rows.tolist()]
        slice_kinds = [SliceKind.DISPATCH.value if k == EngineKind.DISPATCH.value else SliceKind.ANNOTATION.value for k in kinds]
        return [self._slices(rows, pa.array(lanes).dictionary_encode(), kinds, slice_kinds, op=self._op_of(rows))]

    def findings(self, f: Findings) -> tuple[pa.Table, pa.Table, pa.Table]:
        a = self.a
        # transfers, and a signal per transfer
        rows = np.asarray(f.transfer_event, dtype=np.int64)
        op = self._op_of(rows) if len(rows) else np.zeros(0, dtype=np.int64)
        site, stack = self._site(np.where(rows >= 0, self.links.op[rows], -1) if len(rows) else rows)
        dev = a["device"][rows] if len(rows) else np.zeros(0, dtype=np.int64)
        device = [self.device_name(int(d)) if d >= 0 else self.t.root_device for d in dev.tolist()]
        src = ["cpu" if d is Direction.H2D else device[i] for i, d in enumerate(f.transfer_direction)]
        dst = ["cpu" if d is Direction.D2H else device[i] for i, d in enumerate(f.transfer_direction)]
        transfers = table_of("transfers", {
            "region_id": self._region(rows, op), "op_id": _nullable(op, op < 0),
            "direction": [d.value for d in f.transfer_direction], "bytes": np.asarray(f.transfer_bytes, dtype=np.int64),
            "src_device": src, "dst_device": dst, "start_ns": a["start_ns"][rows], "dur_ns": a["dur_ns"][rows],
            "cause": ["explicit"] * len(rows), "call_site": site, "stack_id": stack})  # fmt: skip
        ev = [*f.transfer_event, *f.sig_event]
        ops = [*(self.links.op[rows].tolist() if len(rows) else []), *f.sig_op]
        kinds = [*(d.signal.value for d in f.transfer_direction), *(k.value for k in f.sig_kind)]
        transfer_op_names = [self.texts[a["name"][o]] if o >= 0 else self.texts[a["name"][r]]
                             for r, o in zip(f.transfer_event, ops[: len(rows)], strict=True)]  # fmt: skip
        reasons = [*(self.texts[a["name"][r]] for r in f.transfer_event), *f.sig_reason]
        op_names = [*transfer_op_names, *f.sig_op_name]
        notes = [*([None] * len(rows)), *f.sig_note]
        nbytes = [*f.transfer_bytes, *f.sig_bytes]
        ev_a = np.asarray(ev, dtype=np.int64)
        op_a = np.asarray(ops, dtype=np.int64)
        order = np.lexsort((np.arange(len(ev_a)), a["start_ns"][ev_a])) if len(ev_a) else ev_a
        sig_op = self._op_of_rows(op_a)
        site, stack = self._site(op_a)
        signals = table_of("signals", {
            "region_id": self._region(ev_a, sig_op), "op_id": _nullable(sig_op, sig_op < 0), "kind": kinds,
            "reason": reasons, "op_name": op_names, "count": np.ones(len(ev_a), dtype=np.int64),
            "bytes": np.asarray(nbytes, dtype=np.int64), "call_site": site, "stack_id": stack, "note": notes,
            "time_ns": a["start_ns"][np.where(op_a >= 0, op_a, ev_a)] if len(ev_a) else []})  # fmt: skip
        signals = signals.take(pa.array(order)) if len(ev_a) else signals
        crow = np.asarray(f.compile_event, dtype=np.int64)
        cop = self.links.op[crow] if len(crow) else crow
        compiles = table_of("compiles", {
            "region_id": self._region(crow, self._op_of_rows(cop)), "kind": [schema.CompileKind.PROGRAM.value] * len(crow),
            "key": [self.texts[a["name"][o if o >= 0 else r]] for r, o in zip(crow.tolist(), cop.tolist(), strict=True)],
            "compile_ns": a["dur_ns"][crow], "reason": [self.texts[a["name"][r]] for r in crow.tolist()],
            "time_ns": a["start_ns"][crow]})  # fmt: skip
        return transfers, signals, compiles

    def _op_of_rows(self, op_rows: np.ndarray) -> np.ndarray:
        """op_id of operator event rows (-1 stays -1)."""
        return np.where(op_rows >= 0, self.op_id[np.maximum(op_rows, 0)], -1) if len(op_rows) else op_rows

    def _region(self, rows: np.ndarray, op: np.ndarray) -> np.ndarray:
        """The region of a row: its operator's where it has one (as the operators table says), else its own."""
        if not len(rows):
            return np.zeros(0, dtype=np.int32)
        by_op = self.region_of[self.op_rows[np.maximum(op, 0)]] if len(self.op_rows) else np.zeros(len(rows), dtype=np.int64)
        return np.where(op >= 0, by_op, self.region_of[rows]).astype(np.int32)


def assemble(translated: Translated) -> Trace:
    """The Trace of one reader's events: linked, the rules applied, every table written."""
    made = _Assembly(translated)
    trace = made.build()
    trace.run_info.extra.setdefault("events", made.n_events)
    return trace


__all__ = ["assemble", "coded", "table_of"]

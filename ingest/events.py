"""The one event model every reader translates its format into (docs/architecture.md).

A reader's whole job is to fill an `EventColumns` (one row per event of its file, in any order) and say what the
file is (`Translated`); the linker (`link`) then finds what encloses what and what launched what, the rule layer
(`rules`) turns the linked events into signals, and `assemble` writes the portscope tables. No reader decides
what is a sync, a transfer's direction, a fallback or a compile: that is written once, in `rules`.

Columns (all times in ns from the start of the run; ``None`` where the format does not say):

========================  =================================================================================
``kind``                  `EventKind`: what the event is
``name``                  as the format names it (``aten::mm``, ``cudaLaunchKernel``, ``Memcpy DtoH``...),
                          a vendor's lane prefix removed (``AscendCL@aclrtMemcpy`` -> ``aclrtMemcpy``)
``pid``, ``tid``          the lane: process and thread of host events; device and stream of device work
                          (kept as one ``thread`` code per event)
``start_ns``, ``dur_ns``  span (``dur_ns`` 0 for an instant)
``correlation``           joins a runtime call to the device work it launched
``copy_kind``             a copy call's own direction argument (cudaMemcpyKind / hipMemcpyKind /
                          aclrtMemcpyKind: 0 HtoH, 1 HtoD, 2 DtoH, 3 DtoD, 4 default)
``bytes``                 bytes copied or set (copies, memsets), bytes allocated (+) or freed (-) (memory)
``device``                device index of device work and memory events (-1: the host)
``stream``                stream or queue of device work
``unit``                  the device unit that ran a kernel, as the vendor names it (``AI_CPU``, ``AI_CORE``)
``total_allocated``,      memory events: the allocator's running totals on ``device`` after this event
``total_reserved``
``shapes``, ``strides``,  operator arguments in the trace format's notation (``1x7x64;;64``)
``dtypes``, ``bytes_in``
``lane``, ``engine_kind``  where a reader wants device work drawn (``NPU 0 Stream 3``, an `EngineKind` value);
                          None: by device and stream
``drawn_as``              a span the format itself calls a sync (a schedule's synthetic sync instruction): a
                          `SliceKind` value; None: as its lane's engine kind says
``logged``                `placement` and `compile` events: a code into `EventColumns.logs`, what the log
                          line says beyond name and time (a `Logged`)
``output_shapes``,        an operator's outputs where the format lists them (torch_npu's kernel_details), in
``output_dtypes``         the notation of ``shapes`` and ``dtypes``
``comm``                  a communication operator's own arguments where the format writes them: a code
                          into `EventColumns.comms` (a `Comm`: process group, sequence number...)
``flow``                  `flow` points: their phase and what they bind to (`flow_point`); their id is
                          their ``correlation``
``count``                 how many occurrences the event stands for, where the format keeps counts, not
                          records (an explain dump's per-operator counters, ``op_statistic.csv``'s Count);
                          none: one. Its signals count as many; a counted copy is that many transfers
``region_facts``          `annotation` events: a code into `EventColumns.facts`, what the format says of the
                          region beyond its name and span (a `RegionFacts`: mode, phase, peak memory, tags)
========================  =================================================================================
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np
import pyarrow as pa

from .schema import Mode, Phase
from .spill import DiskColumn
from .trace import RunInfo


class EventKind(enum.Enum):
    """What an event is, whatever format it came from."""

    OP = "op"  # a framework operator on a host thread (cpu_op)
    RUNTIME = "runtime"  # a host call into the device runtime or driver (cudaLaunchKernel, aclrtMemcpy...)
    KERNEL = "kernel"  # device work that computes
    COPY = "copy"  # device work that copies (memcpy, DMA)
    MEMSET = "memset"  # device work that fills memory
    PYTHON = "python"  # a Python frame (with_stack): gives operators their call sites
    ANNOTATION = "annotation"  # a user's named range (record_function, ProfilerStep#N): a region
    MEMORY = "memory"  # an allocation (+bytes) or a free (-bytes), with the allocator's totals
    WAIT = "wait"  # device-side evidence that the host waited (a driver sync slice, Kineto's cuda_sync)
    SPAN = "span"  # any other span the format holds: drawn on its lane, read by no rule
    PLACEMENT = "placement"  # where a backend's log or profile says work ran (`device` -1: the host; `unit`: the
    # device unit), an operator or a data movement it counts by site; no span: not drawn
    COMPILE = "compile"  # a framework's log record of a compilation (`Logged.record` names it), no span: not drawn
    FLOW = "flow"  # a point of a flow (Chrome's s/t/f) on a thread: the linker binds it to a span, which takes the id
    # (`correlation`) its flow carries unless it has one of its own (`link.bound_flows`); not drawn


class FlowPhase(enum.Enum):
    """Where a flow point is on its flow (Chrome's ``s``, ``t``, ``f``)."""

    START = "start"
    STEP = "step"
    END = "end"


class FlowBinding(enum.Enum):
    """The span a flow point binds to on its thread (Chrome's rules): ENCLOSING the innermost one open at its time
    (``s``, ``t``, and ``f`` with ``"bp": "e"``; the next one when none is), NEXT the first one starting at or after
    it (``f`` otherwise, and flow events v2's points), the longest first of those starting together."""

    ENCLOSING = "enclosing"
    NEXT = "next"


def flow_point(phase: FlowPhase, binding: FlowBinding) -> int:
    """The `flow` column's code of a flow point."""
    return list(FlowPhase).index(phase) + len(FlowPhase) * list(FlowBinding).index(binding)


def flow_binds_enclosing(codes: np.ndarray) -> np.ndarray:
    """Per `flow` code: whether the point binds to the span enclosing it."""
    return np.asarray(codes) // len(FlowPhase) == list(FlowBinding).index(FlowBinding.ENCLOSING)


def flow_starts(codes: np.ndarray) -> np.ndarray:
    """Per `flow` code: whether the point is its flow's start."""
    return np.asarray(codes) % len(FlowPhase) == list(FlowPhase).index(FlowPhase.START)


SPAN_KINDS = (EventKind.OP, EventKind.RUNTIME, EventKind.PYTHON, EventKind.ANNOTATION)
DEVICE_KINDS = (EventKind.KERNEL, EventKind.COPY, EventKind.MEMSET, EventKind.WAIT)
KIND_CODES = {k: i for i, k in enumerate(EventKind)}

INT_COLUMNS = ("correlation", "copy_kind", "bytes", "device", "stream", "total_allocated", "total_reserved", "logged",
               "comm", "count", "region_facts", "flow")
TEXT_COLUMNS = ("name", "unit", "lane", "engine_kind", "output_shapes", "output_dtypes", "drawn_as")
ARG_COLUMNS = ("shapes", "strides", "dtypes", "bytes_in")  # an operator's arguments, kept once per distinct set
COLUMNS = ("kind", "thread", "args", "start_ns", "dur_ns", *INT_COLUMNS, *TEXT_COLUMNS)
NONE = -(2**63)  # "not given" in an integer column
NO_ARGS: tuple[str | None, str | None, str | None, int] = (None, None, None, 0)
_DICT = pa.dictionary(pa.int32(), pa.string())
EVENTS = pa.schema([
    pa.field("kind", _DICT, nullable=False), pa.field("name", _DICT), pa.field("pid", _DICT), pa.field("tid", _DICT),
    pa.field("start_ns", pa.int64(), nullable=False), pa.field("dur_ns", pa.int64(), nullable=False),
    *(pa.field(c, pa.int64()) for c in INT_COLUMNS), *(pa.field(c, _DICT) for c in TEXT_COLUMNS[1:]),
    pa.field("shapes", _DICT), pa.field("strides", _DICT), pa.field("dtypes", _DICT), pa.field("bytes_in", pa.int64()),
])  # fmt: skip
_ALWAYS = ("kind", "thread", "args", "start_ns", "dur_ns")  # columns every event has
_DTYPES = {"kind": np.int8, "thread": np.int32, "args": np.int32, **dict.fromkeys(TEXT_COLUMNS, np.int32)}


def rows_where(flags: np.ndarray, step: int = 1 << 20) -> np.ndarray:
    """The rows where `flags` holds, int32 where they fit (4 bytes a row), found `step` flags at a time (never the
    8 bytes a flag of one whole `np.flatnonzero`)."""
    if len(flags) >= 2**31:
        return np.flatnonzero(flags)
    found = [(lo + np.flatnonzero(flags[lo : lo + step])).astype(np.int32) for lo in range(0, len(flags), step)]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int32)


@dataclasses.dataclass(frozen=True)
class Logged:
    """What a log line (or a file's record) says of an event beyond its name and time (kept once per distinct one):
    of `placement` and `compile` events, and of any event whose file says more (an untimed count, a note, an
    instruction's source line and tensors).

    record: the log record it came from, as the log names it (``dynamo_output_graph``, ``restart_reasons``...; an
    explain dump's key: ``cpu_fallback_by_op``, ``hidden_host_bounce``, ``recompile_by_op``).
    reason: the log's own words for why (a fallback's detail, a graph break's or recompile's reason).
    call_site: ``file:line (function)`` the log names; stack: the user's frames it prints, innermost first;
    source: the call site's line of source as the log prints it. compile_id, frame_key: a compile's id (with its
    attempt: ``0/1_1``) and its frame's (``0/1``); frame: the compiled code's ``file:line (name)``; op_count,
    compile_ns: what the log measured of it. timed: False where the line has no usable time (the event then sits
    at the previous line's, or its region's start). fix: the remedy the file itself names for it (an explain
    dump's notes). reads, writes: the buffers (tensors, as the file numbers them) the event reads and writes (a
    compiler schedule's instructions: the rules find what each one waited on)."""

    record: str | None = None
    reason: str | None = None
    call_site: str | None = None
    stack: tuple[tuple[str, int, str], ...] = ()
    source: str | None = None
    compile_id: str | None = None
    frame_key: str | None = None
    frame: str | None = None
    op_count: int | None = None
    compile_ns: int | None = None
    timed: bool = True
    fix: str | None = None
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class RegionFacts:
    """What a format says of one of its regions (an `annotation` event) beyond its name and span (kept once per
    distinct one).

    mode, phase: how the region ran, where the format says. peak_memory_bytes: the region's peak as the format
    states it (an explain dump's ``device_memory.peak_bytes``; None: from the memory events inside it). tags: a
    JSON object of the format's own labels. timed: False where the format gives the region no wall time (a
    schedule in cycles): its span only places the events in it, and its duration is written 0."""

    mode: Mode = Mode.UNKNOWN
    phase: Phase = Phase.NONE
    peak_memory_bytes: int | None = None
    tags: str | None = None
    timed: bool = True


@dataclasses.dataclass(frozen=True)
class Comm:
    """What a communication operator's own arguments say (PyTorch's ``record_param_comms``: ``Process Group Name``,
    ``Process Group Description``, ``Seq``, ``Collective name``, ``Group size``); None where not written. A call's
    (process_group, seq) names one collective on every rank of its group."""

    process_group: str | None = None
    description: str | None = None
    seq: int | None = None
    collective: str | None = None
    group_size: int | None = None


def _code_of(value: Any, codes: dict[Any, int], values: list[Any]) -> int:
    """The code of `value` among `values` (a new one appended)."""
    code = codes.get(value)
    if code is None:
        code = codes[value] = len(values)
        values.append(value)
    return code


class SparseColumn:
    """An integer column most events lack (a correlation, a device, bytes): the rows that have a value, in order, and
    their values; indexing gives `NONE` elsewhere, as the dense column would (16 bytes a value, nothing per event)."""

    def __init__(self, rows: np.ndarray, values: np.ndarray, n: int) -> None:
        self.rows, self.values, self.n = rows, values, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        at = np.asarray(index)
        if at.dtype == bool:
            at = np.flatnonzero(at)
        if not len(self.rows):
            return np.full(at.shape, NONE, dtype=np.int64) if at.ndim else NONE
        pos = np.minimum(np.searchsorted(self.rows, at), len(self.rows) - 1)
        out = np.where(self.rows[pos] == at, self.values[pos], NONE)
        return out if at.ndim else int(out)

    def present(self) -> np.ndarray:
        """The rows that have a value."""
        return self.rows


class EventColumns:
    """Events accumulated column by column (`add` one, `extend` many); `arrays` gives numpy columns.

    Kept compactly: a thread code per event (into `threads`: (pid, tid) as the file gives them), an arguments code
    (into `arguments`: (shapes, strides, dtypes, bytes_in)), text codes (into `texts`), and an optional integer
    column only for the parts where some event has it (~30 bytes an operator). spill: every column but the kinds
    goes to a temporary file as events are added (`arrays` gives `spill.DiskColumn`s): a reader of tens of millions
    of events holds one byte an event."""

    def __init__(self, *, spill: bool = False) -> None:
        self.spill = spill  # every column but the kinds in a temporary file as it grows (`spill.DiskColumn`)
        self._disk: dict[str, DiskColumn] = {}
        self._disk_rows = 0
        self.texts: list[str | None] = [None]  # code 0: no text
        self._text_codes: dict[str | None, int] = {None: 0}
        self.threads: list[tuple[object, object]] = []
        self._thread_codes: dict[tuple, int] = {}
        self.arguments: list[tuple[str | None, str | None, str | None, int]] = [NO_ARGS]  # code 0: none
        self._argument_codes: dict[tuple, int] = {NO_ARGS: 0}
        self.logs: list[Logged] = []  # the `logged` column's values
        self._log_codes: dict[Logged, int] = {}
        self.comms: list[Comm] = []  # the `comm` column's values
        self._comm_codes: dict[Comm, int] = {}
        self.facts: list[RegionFacts] = []  # the `region_facts` column's values
        self._fact_codes: dict[RegionFacts, int] = {}
        self._rows: dict[str, list[int]] = {c: [] for c in COLUMNS}
        self._parts: list[dict[str, np.ndarray]] = []

    def __len__(self) -> int:
        return len(self._rows["kind"]) + sum(len(p["kind"]) for p in self._parts) + self._disk_rows

    def text(self, value: object) -> int:
        value = value if value is None or type(value) is str else str(value)
        code = self._text_codes.get(value)
        if code is None:
            code = self._text_codes[value] = len(self.texts)
            self.texts.append(value)
        return code

    def thread(self, pid: object, tid: object) -> int:
        key = (type(pid), pid, type(tid), tid)
        code = self._thread_codes.get(key)
        if code is None:
            code = self._thread_codes[key] = len(self.threads)
            self.threads.append((pid, tid))
        return code

    def argument(self, args: tuple[str | None, str | None, str | None, int]) -> int:
        code = self._argument_codes.get(args)
        if code is None:
            code = self._argument_codes[args] = len(self.arguments)
            self.arguments.append(args)
        return code

    def log(self, logged: Logged) -> int:
        """The `logged` code of what a log line says (`add(..., logged=code)`)."""
        return _code_of(logged, self._log_codes, self.logs)

    def comm(self, comm: Comm) -> int:
        """The `comm` code of a communication operator's arguments (`add(..., comm=code)`, or a column of codes)."""
        return _code_of(comm, self._comm_codes, self.comms)

    def region_facts(self, facts: RegionFacts) -> int:
        """The `region_facts` code of what a format says of a region (`add(EventKind.ANNOTATION, ..., region_facts=code)`)."""
        return _code_of(facts, self._fact_codes, self.facts)

    def add(self, kind: EventKind, name: str | None, pid: object, tid: object, start_ns: int, dur_ns: int = 0,
            **fields: Any) -> None:
        """One event; `fields` are the optional columns (module docstring)."""
        rows = self._rows
        rows["kind"].append(KIND_CODES[kind])
        rows["thread"].append(self.thread(pid, tid))
        rows["start_ns"].append(start_ns)
        rows["dur_ns"].append(max(dur_ns, 0))
        rows["name"].append(self.text(name))
        args = tuple(fields.get(c) for c in ARG_COLUMNS[:3])
        rows["args"].append(self.argument((*args, int(fields.get("bytes_in") or 0))) if any(args) else 0)  # type: ignore[arg-type]
        for c in INT_COLUMNS:
            v = fields.get(c)
            rows[c].append(v if type(v) is int and NONE < v < 2**63 else NONE)
        for c in TEXT_COLUMNS[1:]:
            rows[c].append(self.text(fields.get(c)))

    def extend(self, kind: EventKind | np.ndarray, n: int, *, texts: dict[str, tuple[list, np.ndarray]],
               lanes: dict[str, tuple[list, np.ndarray]] | None = None,
               threads: tuple[list[tuple[object, object]], np.ndarray] | None = None,
               arguments: tuple[list[tuple[str | None, str | None, str | None, int]], np.ndarray] | None = None,
               **columns: np.ndarray) -> None:
        """`n` events at once: `texts` and `lanes` (pid, tid) as (values, int codes into them) per column, or
        `threads` as ((pid, tid) pairs, codes), `arguments` as (argument tuples, codes), the other columns as int64
        arrays (`NONE`: not given); `kind` one kind for all or an array of `KIND_CODES`. Texts "shapes", "strides",
        "dtypes" and a "bytes_in" column are accepted instead of `arguments`."""
        part: dict[str, np.ndarray] = {}
        part["kind"] = np.full(n, KIND_CODES[kind], dtype=np.int8) if isinstance(kind, EventKind) else kind.astype(np.int8)
        if threads is None:
            assert lanes is not None, "extend needs lanes or threads"
            (pids, pid_codes), (tids, tid_codes) = lanes["pid"], lanes["tid"]
            width = max(len(tids), 1)
            pairs, inverse = np.unique(np.asarray(pid_codes, dtype=np.int64) * width + tid_codes, return_inverse=True)
            threads = ([(pids[k // width], tids[k % width]) for k in pairs.tolist()], inverse.reshape(-1))
        pairs_given, thread_codes = threads
        remap_threads = np.asarray([self.thread(p, t) for p, t in pairs_given] or [0], dtype=np.int32)
        part["thread"] = remap_threads[thread_codes] if n else np.zeros(0, np.int32)
        if arguments is None and any(c in texts for c in ARG_COLUMNS[:3]):
            arguments = self._arguments_of(n, texts, columns.get("bytes_in"))
        if arguments is not None:
            values, arg_codes = arguments
            remap = np.asarray([self.argument(v) for v in values] or [0], dtype=np.int32)
            part["args"] = remap[arg_codes] if n else np.zeros(0, dtype=np.int32)
        else:
            part["args"] = np.zeros(n, dtype=np.int32)
        for c in TEXT_COLUMNS:
            if c in texts:
                values, text_codes = texts[c]
                if values is self.texts:  # codes of this table's own texts already (a reader that coded them here)
                    part[c] = np.asarray(text_codes, dtype=np.int32)
                    continue
                remap = np.asarray([self.text(v) for v in values] or [0], dtype=np.int32)
                part[c] = remap[text_codes] if n else np.zeros(0, dtype=np.int32)
        part["start_ns"] = columns["start_ns"].astype(np.int64)
        part["dur_ns"] = np.maximum(columns.get("dur_ns", np.zeros(n, dtype=np.int64)).astype(np.int64), 0)
        for c in INT_COLUMNS:  # a column no event of the part has is not stored
            given = columns.get(c)
            if given is not None and (given != NONE).any():
                part[c] = given.astype(np.int64)
        if self.spill:
            self._to_disk(self._held_part())
            self._to_disk(part)
        else:
            self._parts.append(part)

    def _held_part(self) -> dict[str, np.ndarray]:
        """The events `add` holds, as a part (and no longer held)."""
        part = {c: np.asarray(v, dtype=_DTYPES.get(c, np.int64)) for c, v in self._rows.items()}
        self._rows = {c: [] for c in COLUMNS}
        return {c: v for c, v in part.items() if c in _ALWAYS or (v != (NONE if c in INT_COLUMNS else 0)).any()}

    def _to_disk(self, part: dict[str, np.ndarray]) -> None:
        """Append a part to the columns' temporary files (spill mode; a column no event had so far is made then, led
        by its empty value for the events before)."""
        size = len(part["kind"])
        if not size:
            return
        for c in COLUMNS:
            empty = NONE if c in INT_COLUMNS else 0
            column = self._disk.get(c)
            if column is None and c not in part:
                continue
            if column is None:
                column = self._disk[c] = DiskColumn(np.dtype(_DTYPES.get(c, np.int64)).char)
                for lo in range(0, self._disk_rows, 1 << 20):
                    column.extend(np.full(min(1 << 20, self._disk_rows - lo), empty, dtype=column.dtype))
            column.extend(part[c] if c in part else np.full(size, empty, dtype=column.dtype))
        self._disk_rows += size

    def _arguments_of(self, n: int, texts: dict[str, tuple[list, np.ndarray]],
                      bytes_in: np.ndarray | None) -> tuple[list, np.ndarray]:  # fmt: skip
        """(argument tuples, codes) from separate shapes / strides / dtypes texts and bytes."""
        cols = []
        for c in ARG_COLUMNS[:3]:
            values, codes = texts.pop(c, ([None], np.zeros(n, dtype=np.int64)))
            cols.append([values[k] for k in np.asarray(codes).tolist()])
        nbytes = bytes_in.tolist() if bytes_in is not None else [0] * n
        rows = [(a, b, c, max(int(d), 0) if d != NONE else 0) for a, b, c, d in zip(*cols, nbytes, strict=True)]
        found: dict[tuple, int] = {}
        codes = np.fromiter((found.setdefault(r, len(found)) for r in rows), dtype=np.int64, count=n)
        return list(found), codes

    def arrays(self, *, release: bool = False) -> dict[str, np.ndarray]:
        """Every column as a numpy array: kinds as `KIND_CODES`, threads, arguments and texts as int32 codes (texts:
        0 none), integers as int64 with `NONE` where not given (a column no event has: one read-only constant, no
        memory). release: give each part's memory back as its column is joined (this object then holds no events:
        call once). In spill mode every column but the kinds stays in its temporary file: a `DiskColumn` (indexed
        as an array: the values at rows), integer columns dense with `NONE`; rows in the order added."""
        if self.spill:
            return self._disk_arrays()
        rows = {c: np.asarray(v, dtype=_DTYPES.get(c, np.int64)) for c, v in self._rows.items()}
        parts = [p for p in (rows, *self._parts) if len(p["kind"])] or [rows]
        if release:
            self._rows = {c: [] for c in COLUMNS}
            self._parts = []
        sizes = [len(p["kind"]) for p in parts]
        n = sum(sizes)
        out: dict[str, np.ndarray] = {}
        for c in COLUMNS:
            dtype = _DTYPES.get(c, np.int64)
            empty = NONE if c in INT_COLUMNS else 0
            if c not in ("kind", "thread", "args", "start_ns", "dur_ns") and not any(
                    c in p and (p[c] != empty).any() for p in parts):  # fmt: skip
                out[c] = np.broadcast_to(np.asarray(empty, dtype=dtype), (n,))
            elif c in INT_COLUMNS:  # kept for the events that have it
                rows, values, first = [], [], 0
                for p, size in zip(parts, sizes, strict=True):
                    if c in p:
                        have = np.flatnonzero(p[c] != NONE)
                        rows.append(have + first)
                        values.append(p[c][have])
                    first += size
                out[c] = SparseColumn(np.concatenate(rows), np.concatenate(values), n)  # type: ignore[assignment]
            else:
                pieces = [p[c] if c in p else np.full(size, empty, dtype=dtype) for p, size in zip(parts, sizes, strict=True)]
                out[c] = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            if release:
                for p in parts:
                    p.pop(c, None)
        return out

    def _disk_arrays(self) -> dict[str, Any]:
        self._to_disk(self._held_part())
        n = self._disk_rows
        out: dict[str, Any] = {}
        for c in COLUMNS:
            column = self._disk.get(c)
            if column is None:
                out[c] = np.broadcast_to(np.asarray(NONE if c in INT_COLUMNS else 0, dtype=_DTYPES.get(c, np.int64)), (n,))
            else:
                column.flush()
                out[c] = column
        out["kind"] = out["kind"][:] if n else np.zeros(0, dtype=np.int8)  # the kinds in memory: one byte an event
        return out

    def table(self) -> pa.Table:
        """The events as an Arrow table of `EVENTS` (what SQL and the architecture document show)."""
        a = {c: v[:] if isinstance(v, DiskColumn) else v for c, v in self.arrays().items()}
        kinds = pa.array([k.value for k in EventKind], pa.string())
        texts = pa.array(self.texts, pa.string())
        cols = {"kind": pa.DictionaryArray.from_arrays(pa.array(a["kind"].astype(np.int32)), kinds)}
        for i, c in enumerate(("pid", "tid")):
            values = pa.array([None if t[i] is None else str(t[i]) for t in self.threads] or [None], pa.string())
            cols[c] = pa.DictionaryArray.from_arrays(pa.array(a["thread"]), values)
        for c in TEXT_COLUMNS:
            codes = np.ascontiguousarray(a[c])
            cols[c] = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes == 0), texts)
        for c in ("start_ns", "dur_ns", *INT_COLUMNS):
            v = a[c][np.arange(len(a["kind"]))] if isinstance(a[c], SparseColumn) else np.ascontiguousarray(a[c])
            cols[c] = pa.array(v, pa.int64(), mask=v == NONE if c in INT_COLUMNS else None)
        for i, c in enumerate(ARG_COLUMNS[:3]):
            values = pa.array([args[i] for args in self.arguments], pa.string())
            cols[c] = pa.DictionaryArray.from_arrays(pa.array(a["args"], mask=a["args"] == 0), values)
        cols["bytes_in"] = pa.array(np.array([args[3] for args in self.arguments], dtype=np.int64)[a["args"]])
        return pa.table({f.name: cols[f.name] for f in EVENTS}, schema=EVENTS)


@dataclasses.dataclass
class Translated:
    """What a reader gives: the events of one file and what the file says about its run.

    root_name: the run's top region (the file the user gave, never the recorder's own temporary path); None: the
    file is a list of regions (an explain dump's dumps, a schedule), given as annotations: they are the top-level
    regions, with no region around them.
    root_device: the device the run works on (``cuda:0``, ``npu:0``, ``cpu``; None: the format does not say).
    root_mode: how the run executed, where the format says (a fallback log: eager; a compile log: compiled).
    end_ns: the run's end where the format says more than its events do (a log's last record; else their end).
    infer_fallback: mark operators that launched no device work as host fallbacks (a guess; off by default).
    device_names: the name of each device index where it is not ``cuda:<index>`` (``npu:0``).
    """

    events: EventColumns
    run_info: RunInfo
    root_name: str | None
    root_device: str | None
    infer_fallback: bool = False
    root_mode: Mode = Mode.UNKNOWN
    end_ns: int = 0
    device_names: dict[Any, str] = dataclasses.field(default_factory=dict)  # device -> name; default cuda:<device>


__all__ = ["ARG_COLUMNS", "COLUMNS", "DEVICE_KINDS", "EVENTS", "INT_COLUMNS", "KIND_CODES", "NONE", "NO_ARGS", "SPAN_KINDS",
           "TEXT_COLUMNS", "Comm", "EventColumns", "EventKind", "FlowBinding", "FlowPhase", "Logged", "RegionFacts",
           "SparseColumn", "Translated", "flow_binds_enclosing", "flow_point", "flow_starts", "rows_where"]

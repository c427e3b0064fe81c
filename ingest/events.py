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
========================  =================================================================================
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np
import pyarrow as pa

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


SPAN_KINDS = (EventKind.OP, EventKind.RUNTIME, EventKind.PYTHON, EventKind.ANNOTATION)
DEVICE_KINDS = (EventKind.KERNEL, EventKind.COPY, EventKind.MEMSET, EventKind.WAIT)
KIND_CODES = {k: i for i, k in enumerate(EventKind)}

INT_COLUMNS = ("correlation", "copy_kind", "bytes", "device", "stream", "total_allocated", "total_reserved",
               "bytes_in")  # fmt: skip
TEXT_COLUMNS = ("name", "unit", "shapes", "strides", "dtypes", "lane", "engine_kind")
COLUMNS = ("kind", "pid", "tid", "start_ns", "dur_ns", *INT_COLUMNS, *TEXT_COLUMNS)
NONE = -(2**63)  # "not given" in an integer column
_DICT = pa.dictionary(pa.int32(), pa.string())
EVENTS = pa.schema([
    pa.field("kind", _DICT, nullable=False), pa.field("name", _DICT), pa.field("pid", _DICT), pa.field("tid", _DICT),
    pa.field("start_ns", pa.int64(), nullable=False), pa.field("dur_ns", pa.int64(), nullable=False),
    *(pa.field(c, pa.int64()) for c in INT_COLUMNS), *(pa.field(c, _DICT) for c in TEXT_COLUMNS[1:]),
])  # fmt: skip


class EventColumns:
    """Events accumulated column by column (`add` one, `extend` many); `arrays` gives numpy columns."""

    def __init__(self) -> None:
        self.texts: list[str | None] = [None]  # code 0: no text
        self._text_codes: dict[str | None, int] = {None: 0}
        self.lanes: list[object] = []  # distinct pid / tid values, as the file gives them
        self._lane_codes: dict[tuple[type, object], int] = {}
        self._rows: dict[str, list[int]] = {c: [] for c in COLUMNS}
        self._parts: list[dict[str, np.ndarray]] = []

    def __len__(self) -> int:
        return len(self._rows["kind"]) + sum(len(p["kind"]) for p in self._parts)

    def text(self, value: str | None) -> int:
        code = self._text_codes.get(value)
        if code is None:
            code = self._text_codes[value] = len(self.texts)
            self.texts.append(value)
        return code

    def lane(self, value: object) -> int:
        key = (type(value), value)
        code = self._lane_codes.get(key)
        if code is None:
            code = self._lane_codes[key] = len(self.lanes)
            self.lanes.append(value)
        return code

    def add(self, kind: EventKind, name: str | None, pid: object, tid: object, start_ns: int, dur_ns: int = 0,
            **fields: Any) -> None:
        """One event; `fields` are the optional columns (module docstring)."""
        rows = self._rows
        rows["kind"].append(KIND_CODES[kind])
        rows["pid"].append(self.lane(pid))
        rows["tid"].append(self.lane(tid))
        rows["start_ns"].append(start_ns)
        rows["dur_ns"].append(max(dur_ns, 0))
        rows["name"].append(self.text(name))
        for c in INT_COLUMNS:
            v = fields.get(c)
            rows[c].append(v if type(v) is int and NONE < v < 2**63 else NONE)
        for c in TEXT_COLUMNS[1:]:
            rows[c].append(self.text(fields.get(c)))

    def extend(self, kind: EventKind | np.ndarray, n: int, *, texts: dict[str, tuple[list, np.ndarray]],
               lanes: dict[str, tuple[list, np.ndarray]], **columns: np.ndarray) -> None:
        """`n` events at once: `texts` and `lanes` as (values, int codes into them) per column, the other columns
        as int64 arrays (`NONE`: not given); `kind` one kind for all or an array of `KIND_CODES`."""
        part: dict[str, np.ndarray] = {}
        part["kind"] = np.full(n, KIND_CODES[kind], dtype=np.int8) if isinstance(kind, EventKind) else kind.astype(np.int8)
        for c in ("pid", "tid"):
            values, codes = lanes[c]
            part[c] = np.asarray([self.lane(v) for v in values] or [0], dtype=np.int64)[codes]
        for c in TEXT_COLUMNS:
            if c in texts:
                values, codes = texts[c]
                remap = np.asarray([self.text(v if v is None or type(v) is str else str(v)) for v in values] or [0],
                                   dtype=np.int32)  # fmt: skip
                part[c] = remap[codes] if len(codes) else np.zeros(0, dtype=np.int32)
            else:
                part[c] = np.zeros(n, dtype=np.int32)
        part["start_ns"] = columns["start_ns"].astype(np.int64)
        part["dur_ns"] = np.maximum(columns.get("dur_ns", np.zeros(n, dtype=np.int64)).astype(np.int64), 0)
        for c in INT_COLUMNS:  # a column no event of the part has is not stored
            given = columns.get(c)
            if given is not None and (given != NONE).any():
                part[c] = given.astype(np.int64)
        self._parts.append(part)

    def arrays(self, *, release: bool = False) -> dict[str, np.ndarray]:
        """Every column as a numpy array: kinds as `KIND_CODES`, pid/tid as codes into `lanes`, texts as int32 codes
        into `texts` (0: none), integers as int64 with `NONE` where not given (a column no event has: one read-only
        constant, no memory). release: give each part's memory back as its column is joined (this object is then
        empty: call once)."""
        rows = {c: np.asarray(v, dtype=np.int32 if c in TEXT_COLUMNS else np.int64) for c, v in self._rows.items()}
        rows["kind"] = rows["kind"].astype(np.int8)
        parts = [rows, *self._parts]
        if release:
            self._rows = {c: [] for c in COLUMNS}
            self._parts = []
        sizes = [len(p["kind"]) for p in parts]
        n = sum(sizes)
        out: dict[str, np.ndarray] = {}
        for c in COLUMNS:
            if c in INT_COLUMNS and not any(c in p and (p[c] != NONE).any() for p in parts):
                out[c] = np.broadcast_to(np.int64(NONE), (n,))
            else:
                pieces = [p[c] if c in p else np.full(size, NONE, dtype=np.int64) for p, size in zip(parts, sizes, strict=True)]
                out[c] = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            if release:
                for p in parts:
                    p.pop(c, None)
        for c in ("pid", "tid"):
            out[c] = out[c].astype(np.int32, copy=False)
        return out

    def table(self) -> pa.Table:
        """The events as an Arrow table of `EVENTS` (what SQL and the architecture document show)."""
        a = self.arrays()
        kinds = pa.array([k.value for k in EventKind], pa.string())
        texts = pa.array(self.texts, pa.string())
        lanes = pa.array([None if v is None else str(v) for v in self.lanes], pa.string())
        cols = {"kind": pa.DictionaryArray.from_arrays(pa.array(a["kind"].astype(np.int32)), kinds)}
        for c in ("pid", "tid"):
            cols[c] = pa.DictionaryArray.from_arrays(pa.array(a[c].astype(np.int32)), lanes)
        for c in TEXT_COLUMNS:
            codes = a[c]
            cols[c] = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes == 0), texts)
        for c in ("start_ns", "dur_ns", *INT_COLUMNS):
            v = a[c]
            cols[c] = pa.array(v, pa.int64(), mask=v == NONE if c in INT_COLUMNS else None)
        return pa.table({f.name: cols[f.name] for f in EVENTS}, schema=EVENTS)


@dataclasses.dataclass
class Translated:
    """What a reader gives: the events of one file and what the file says about its run.

    root_name: the run's top region (the file the user gave, never the recorder's own temporary path).
    root_device: the device the run works on (``cuda:0``, ``npu:0``, ``cpu``).
    infer_fallback: mark operators that launched no device work as host fallbacks (a guess; off by default).
    device_names: the name of each device index where it is not ``cuda:<index>`` (``npu:0``).
    """

    events: EventColumns
    run_info: RunInfo
    root_name: str
    root_device: str
    infer_fallback: bool = False
    device_names: dict[Any, str] = dataclasses.field(default_factory=dict)  # device -> name; default cuda:<device>


__all__ = ["COLUMNS", "DEVICE_KINDS", "EVENTS", "INT_COLUMNS", "KIND_CODES", "NONE", "SPAN_KINDS", "TEXT_COLUMNS",
           "EventColumns", "EventKind", "Translated"]

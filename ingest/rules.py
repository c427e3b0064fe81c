"""The rule layer: every signal a converted trace holds is a declared rule over the linked events, written once.

A rule has a name, what it detects, the signal kinds it gives and `find(linked) -> Findings`; `RULES` is the
registry (`catalog.RuleSet`: no two of one name). Every reader's events go through the same rules, so a rule fixed
here is fixed for every format. The rules:

* **sync** needs device evidence: a runtime call that waits (`SYNC_RUNTIME_CALLS`), a synchronous device->host copy
  call, or a device-side wait event, inside the operator. The outermost operator of a sync kind around the evidence
  (``aten::item`` around ``aten::_local_scalar_dense``; ``aten::index`` around ``aten::nonzero`` is boolean
  indexing) gives the reason; an operator's name alone never makes a sync. A wait inside a compiler phase (the
  autotuner's) is the compiler's: part of its compile, not a sync.
* **transfer**: a copy's direction comes from its runtime call's kind argument when the trace has it, else from the
  copy's label; a runtime copy call that launched no device work the trace shows is a transfer of its own (its
  direction from its kind argument or name, else unknown).
* **online compile**: a compile call nested in another compile call counts once.
* **ai-cpu**: a kernel the device ran on its AI CPU is a device-side fallback, and so is an operator a profile's
  totals place on it (``op_statistic.csv``: a `placement` of unit AI_CPU, counted).
* **inferred fallback** (asked for): a leaf operator on a launching thread that launched no device work.
* **logged fallback**: an operator a backend's log places on the host; its cause from the words the backend logged
  (a backend's own counts by operator, an explain dump's ``cpu_fallback_by_op``: its reason as it names it).
* **host bounce**: data a backend's dump counts by site as moved through the host (``hidden_host_bounce``); the
  site names the kind (`HOST_BOUNCE_SITES`); its ``*_batch_to_per_entry`` sites are bookkeeping, not bounces.
* **counted recompile**: operators a backend's dump counts as recompiled (``recompile_by_op``): dispatch recompiles.
* **compiled graph**, **graph break**, **recompile**: a framework's compile log records (TORCH_TRACE), by frame of
  each log file (every rank's log numbers its frames from 0/0); a frame's last graph record is its graph (an earlier
  attempt's was discarded by a restart); a frame whose log holds no graph-break or recompile record of its own (older
  torch) gets them from its compile metrics, a restart Dynamo names only by its class being no break.
* **compiler phase**: a profiler trace's compiler phase spans (PyTorch's ``(dynamo_timed)`` ranges, which the Kineto
  reader keeps out of the regions): the outermost on its thread is one compiled graph, as long as the span. The
  compiler's time on a thread is its outermost compiler spans there (those phases and the compile events that carry
  a ``<event>_data: compile_id=`` marker, such as ``dynamo`` around a frame's whole compile): an operator that starts
  in it is the compiler's (`compiler_ops`: it traced or compiled, on fake tensors; not the program's work), and a
  wait in it is no sync.
* **dataflow**: in a static schedule (events that read and write numbered buffers: `Logged.reads`, ``writes``), an
  instruction depends on the last one that wrote each buffer it reads before it began (else the last other one that
  wrote it), and its engine idled on its latest producer (``transfer`` for a copy engine's, else ``dependency``)
  where that one ended after the engine's previous slice and no later than it began.
The signal a file's own count stands for counts as many (`events` column ``count``); a file's own remedy
(`Logged.fix`) is the signal's note.
Memory (`memory_peaks`) gives each region the greatest allocator total held during it (the total it began with included). Mode (`compiled_regions`): a
region in which the program called compiled code (a `kineto_vocabulary.is_compiled_call` range starting in it or in a
region nested in it, outside the compiler's time) ran compiled; one without such a call is left as its file says (a
profiler trace cannot tell eager from a region nested in a compiled call, or from one holding no program work).
"""

from __future__ import annotations

import dataclasses
import re
from array import array
from collections.abc import Callable

import numpy as np

from .catalog import (
    BOOL_INDEX_OPS,
    NO_WORK_OPS,
    SYNC_OPS,
    Cause,
    OpCall,
    RuleSet,
    cause_hint,
    logged_cause,
    sync_cause,
)
from .events import KIND_CODES, NO_ARGS, NONE, EventKind, Logged
from .kineto_vocabulary import (
    COMPILER_PHASE_SUFFIX,
    ONLINE_COMPILE_CALLS,
    SYNC_RUNTIME_CALLS,
    compiler_event_of,
    copy_direction,
    is_compiled_call,
    is_host_copy,
)
from .link import Links
from .schema import CompileKind, Direction, SignalKind

AI_CPU = "AI_CPU"
AI_CPU_NOTE = "the device ran this kernel on its AI CPU (no AI Core kernel for its dtype or shape): try another dtype or shape"
COMPILE_NOTE = ("an operator compiled online (no pre-built binary for its shapes): try static shapes or binary kernels "
                "(torch_npu.npu.set_compile_mode(jit_compile=False))")
# cudaMemcpyKind, hipMemcpyKind and aclrtMemcpyKind share their numbering (4: default / unified: not a direction)
COPY_KINDS = {1: Direction.H2D, 2: Direction.D2H, 3: Direction.D2D}  # cuda/hipMemcpyKind
HOST_TO_HOST = 0
_NO_TIME = np.iinfo(np.int64).min
DEFAULT_KIND = 4  # cuda/hipMemcpyDefault: the runtime tells the direction from the pointers (unified addressing)
COPY_CALL_PREFIXES = ("cudaMemcpy", "hipMemcpy", "aclrtMemcpy", "cuMemcpy", "hipMemcpyDtoH", "hipMemcpyHtoD")
# the records of a compile log (TORCH_TRACE) that the compile rules read, as `Logged.record` names them
GRAPH_RECORD = "dynamo_output_graph"  # Dynamo compiled a graph
BREAK_RECORD = "dynamo_graph_break_reason"  # a graph break, its reason and user stack
RECOMPILE_RECORD = "recompile_reasons"  # a recompile, the guards that failed
RESTART_RECORD = "restart_reasons"  # older torch: a restart reason in a frame's compile metrics (a graph break)
# a restart reason Dynamo writes as the exception's class, str(type(e)), for a restart that names no reason: one of its
# own (TensorifyScalarRestartAnalysis...), not a graph break (`_graph_breaks`)
RESTART_WITHOUT_BREAK = re.compile(r"<class '[\w.]+'>")
METRICS_RECOMPILE_RECORD = "recompile_reason"  # older torch: a recompile's reason in a frame's compile metrics
UNREADABLE = "unknown (payload unreadable)"
# the records of an explain dump (a backend's counts, no timeline) that rules read, as the dump's keys name them
COUNTED_FALLBACK_RECORD = "cpu_fallback_by_op"  # fallbacks counted by operator, the reason as the backend names it
BOUNCE_RECORD = "hidden_host_bounce"  # data moved through the host, counted by site
COUNTED_RECOMPILE_RECORD = "recompile_by_op"  # dispatch recompiles counted by operator
HOST_BOUNCE_SITES: dict[str, SignalKind] = {  # a dump's bounce site -> its kind (any other site: host_bounce/other)
    "copy_d2d_host_bounce": SignalKind.BOUNCE_DTYPE,  # a device->device copy the device cannot do (a dtype change)
    "strided_v2v_cpu_fallback": SignalKind.BOUNCE_STRIDED,
    "op_arg_through_host": SignalKind.BOUNCE_OTHER,
    "copy_h2d_staging": SignalKind.BOUNCE_OTHER,
    "copy_h2d_noncontig_dst": SignalKind.BOUNCE_OTHER,
}
EXCLUDED_SITE_SUFFIX = "_batch_to_per_entry"  # v2v_/host_batch_to_per_entry: bookkeeping, not part of the totals
TRANSFER_WAIT, DEPENDENCY_WAIT = "transfer", "dependency"  # what an engine of a schedule idled on
_ALIGN = re.compile(r"(?:multiple of|aligned to|alignment of)\s*(\d+)")


def bounce_kind(site: str) -> SignalKind | None:
    """The signal kind of a host-bounce site a dump counts (None: bookkeeping, not a bounce)."""
    if site.endswith(EXCLUDED_SITE_SUFFIX):
        return None
    return HOST_BOUNCE_SITES.get(site, SignalKind.BOUNCE_OTHER)


def is_copy_call(name: str) -> bool:
    """A runtime call that copies (``cudaMemcpyAsync``, ``hipMemcpyWithStream``, ``aclrtMemcpy``...)."""
    return name.startswith(COPY_CALL_PREFIXES)


def is_sync_copy_call(name: str) -> bool:
    """A copy call that returns only once the copy is done (no ``Async`` in its name)."""
    return is_copy_call(name) and "Async" not in name


@dataclasses.dataclass
class Linked:
    """The events of one run (`events.EventColumns.arrays`), their texts and their links: what rules read."""

    a: dict[str, np.ndarray]
    texts: list[str | None]
    links: Links
    infer_fallback: bool = False
    threads: list[tuple[object, object]] = dataclasses.field(default_factory=list)  # (pid, tid) per thread code
    arguments: list[tuple[str | None, str | None, str | None, int]] = dataclasses.field(default_factory=lambda: [NO_ARGS])
    copies: tuple[np.ndarray, np.ndarray] | None = None  # `copy_directions`, once worked out
    phases: np.ndarray | None = None  # `_outer_phases`, once worked out
    compiling: np.ndarray | None = None  # `_compiler_spans`, once worked out (rules and the placements ask)
    logs: list[Logged] = dataclasses.field(default_factory=list)  # the `logged` column's values

    def __post_init__(self) -> None:
        self.kind = self.a["kind"]

    def rows(self, kind: EventKind) -> np.ndarray:
        return np.flatnonzero(self.kind == KIND_CODES[kind])

    def name(self, row: int) -> str:
        return self.texts[self.a["name"][row]] or ""

    def given_name(self, row: int) -> str | None:
        """The event's name as the file gives it (None: none, a dump's count not attributed to an operator)."""
        return self.texts[self.a["name"][row]]

    def names_where(self, test: Callable[[str], bool]) -> np.ndarray:
        """A flag per text code: whether `test` holds for that text."""
        return np.array([t is not None and test(t) for t in self.texts], dtype=bool)

    def logged(self, kind: EventKind) -> list[tuple[int, Logged]]:
        """(row, what its log line says) of the events of a kind, in file order (`Logged()`: nothing said)."""
        rows = self.rows(kind)
        codes = self.a["logged"][rows]
        said = [self.logs[c] if c != NONE else Logged() for c in np.asarray(codes).tolist()]
        return list(zip(rows.tolist(), said, strict=True))


SIGNAL_KINDS = list(SignalKind)  # a signal's kind as an int8 index into this
DIRECTIONS = list(Direction)  # a transfer's direction as an int8 index into this
NO_WORD = -1  # "none" in a words code column


class Columns:
    """Columns of equal length appended a row at a time (held in stdlib arrays: no Python object a row) or a chunk of
    numpy arrays at a time; `arrays` joins them once."""

    def __init__(self, dtypes: dict[str, str]) -> None:
        self.dtypes = dtypes  # column -> stdlib array typecode (``q`` int64, ``i`` int32, ``b`` int8)
        self._held = {c: array(t) for c, t in dtypes.items()}
        self._chunks: list[dict[str, np.ndarray]] = []
        self._joined: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(next(iter(self._held.values()))) + sum(len(next(iter(c.values()))) for c in self._chunks)

    def append(self, **row: int) -> None:
        for c, held in self._held.items():
            held.append(row[c])
        self._joined = None

    def extend(self, n: int, **columns: np.ndarray | int) -> None:
        """`n` rows: per column an array of `n` values or one value for all."""
        self._flush()  # one value for all rows: kept as one (a read-only broadcast)
        self._chunks.append({c: np.broadcast_to(np.asarray(columns[c], dtype=np.dtype(t)), (n,)) if np.ndim(columns[c]) == 0
                             else np.asarray(columns[c], dtype=np.dtype(t)) for c, t in self.dtypes.items()})  # fmt: skip
        self._joined = None

    def _flush(self) -> None:
        if len(next(iter(self._held.values()))):
            self._chunks.append({c: np.frombuffer(h, dtype=np.dtype(h.typecode)).copy() for c, h in self._held.items()})
            self._held = {c: array(t) for c, t in self.dtypes.items()}

    def arrays(self) -> dict[str, np.ndarray]:
        """Every column as one numpy array (one value for all rows: a read-only broadcast, no memory a row)."""
        if self._joined is None:
            self._flush()
            self._joined = {c: self._joined_column(c, np.dtype(t)) for c, t in self.dtypes.items()}
            self._chunks = [self._joined] if self._chunks else []
        return self._joined

    def _joined_column(self, c: str, dtype: np.dtype) -> np.ndarray:
        parts = [k[c] for k in self._chunks if len(k[c])]
        if not parts:
            return np.zeros(0, dtype=dtype)
        if all(p.strides == (0,) and p[0] == parts[0][0] for p in parts):
            return np.broadcast_to(parts[0][:1], (sum(len(p) for p in parts),))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)  # one part: as it is (not copied)


class Findings:
    """What rules found, as columns (no Python object per signal): signals (`signal_columns`: the event the signal is
    about, its operator (-1: none), its kind (an index into `SIGNAL_KINDS`), its reason and note (codes into `words`,
    `NO_WORD`: none), the operator name it shows (`name_word`, a code into `words`, else `name_text`, an event text
    code), its bytes), transfers (`transfer_columns`: event, direction (an index into `DIRECTIONS`), bytes, reason),
    compiles (few: lists) and a static schedule's dataflow (few: per event row, the correlations of the instructions
    it read from (`depends`) and what its engine idled on before it (`waited`))."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self._word_codes: dict[str, int] = {}
        self.signals = Columns({"event": "q", "op": "q", "kind": "b", "reason": "i", "name_text": "i", "name_word": "i",
                                "note": "i", "bytes": "q"})  # fmt: skip
        self.transfers = Columns({"event": "q", "direction": "b", "bytes": "q", "reason": "i"})
        self.compile_event: list[int] = []  # compiles table rows
        self.compile_kind: list[CompileKind] = []
        self.compile_reason: list[str | None] = []
        self.depends: dict[int, tuple[int, ...]] = {}
        self.waited: dict[int, str] = {}

    def word(self, text: str | None) -> int:
        """The code of a text in `words` (`NO_WORD`: None)."""
        if text is None:
            return NO_WORD
        code = self._word_codes.get(text)
        if code is None:
            code = self._word_codes[text] = len(self.words)
            self.words.append(text)
        return code

    def compiled(self, event: int, kind: CompileKind, reason: str | None) -> None:
        self.compile_event.append(event)
        self.compile_kind.append(kind)
        self.compile_reason.append(reason)

    def signal(self, event: int, op: int, kind: SignalKind, reason: str | None, op_name: str | None, note: str | None,
               nbytes: int = 0) -> None:
        """One signal (`op_name`: the operator name it shows)."""
        self.signals.append(event=event, op=op, kind=SIGNAL_KINDS.index(kind), reason=self.word(reason), name_text=0,
                            name_word=self.word(op_name), note=self.word(note), bytes=nbytes)  # fmt: skip

    def signals_of(self, events: np.ndarray, ops: np.ndarray, kind: SignalKind, reason: str | None,
                   name_text: np.ndarray, note: str | None) -> None:  # fmt: skip
        """A signal per event of `events` (their operators `ops`), each showing the event text `name_text` (codes)."""
        self.signals.extend(len(events), event=events, op=ops, kind=SIGNAL_KINDS.index(kind), reason=self.word(reason),
                            name_text=name_text, name_word=NO_WORD, note=self.word(note), bytes=0)  # fmt: skip

    def transfer(self, event: int, direction: Direction, nbytes: int, reason: str) -> None:
        self.transfers.append(event=event, direction=DIRECTIONS.index(direction), bytes=nbytes, reason=self.word(reason))

    def signal_columns(self) -> dict[str, np.ndarray]:
        return self.signals.arrays()

    def transfer_columns(self) -> dict[str, np.ndarray]:
        return self.transfers.arrays()


@dataclasses.dataclass(frozen=True)
class EventRule:
    """A declared rule over linked events."""

    name: str
    description: str
    kinds: tuple[SignalKind, ...]
    find: Callable[[Linked, Findings], None]


def copy_directions(linked: Linked) -> tuple[np.ndarray, np.ndarray]:
    """(COPY rows, their `Direction` index into list(Direction)): the launching call's kind argument, else the
    copy's own kind argument, else its label; a label that says nothing reads as d2d (what a device-side copy is).
    A default kind (`DEFAULT_KIND`: the runtime chose the direction from the pointers) leaves a label that says
    host->device or device->host as it is, and makes any other unknown (roctracer labels such copies "DtoD").
    Worked out once per run (the transfer and sync rules and the lanes all ask)."""
    if linked.copies is None:
        linked.copies = _copy_directions(linked)
    return linked.copies


def _copy_directions(linked: Linked) -> tuple[np.ndarray, np.ndarray]:
    rows = linked.rows(EventKind.COPY)
    directions = list(Direction)
    by_label = np.array([directions.index(copy_direction(t) or Direction.D2D) if t else directions.index(Direction.D2D)
                         for t in linked.texts], dtype=np.int64)  # fmt: skip
    kinds = _copy_kinds(linked, rows)
    out = _kind_says(kinds, by_label[linked.a["name"][rows]])
    return rows, np.where((kinds == DEFAULT_KIND) & (out == directions.index(Direction.D2D)),
                          directions.index(Direction.UNKNOWN), out)


def _copy_kinds(linked: Linked, rows: np.ndarray) -> np.ndarray:
    """The kind argument of each copy: its launching call's, else its own (NONE when neither has one)."""
    a, launcher = linked.a, linked.links.launcher[rows]
    kind = np.where(launcher >= 0, a["copy_kind"][np.maximum(launcher, 0)], NONE)
    return np.where(kind == NONE, a["copy_kind"][rows], kind)


def _kind_says(kind: np.ndarray, otherwise: np.ndarray) -> np.ndarray:
    """Direction indices (into `DIRECTIONS`): what a copy kind argument says (`COPY_KINDS`), else `otherwise`."""
    for code, direction in COPY_KINDS.items():
        otherwise = np.where(kind == code, DIRECTIONS.index(direction), otherwise)
    return otherwise


def _transfers(linked: Linked, out: Findings) -> None:
    a, links = linked.a, linked.links
    directions = list(Direction)
    rows, where = copy_directions(linked)
    launcher = links.launcher[rows]
    nbytes = np.where(a["bytes"][rows] != NONE, a["bytes"][rows],
                      np.where(launcher >= 0, a["bytes"][np.maximum(launcher, 0)], NONE))  # fmt: skip
    nbytes = np.where(nbytes == NONE, 0, np.maximum(nbytes, 0))
    # a host-to-host copy crosses no device boundary: its kind argument says so, or, without a copy kind, its label
    kind = _copy_kinds(linked, rows)
    host_only = (kind == HOST_TO_HOST) | (~np.isin(kind, list(COPY_KINDS)) & linked.names_where(is_host_copy)[a["name"][rows]])
    keep = ~host_only
    rows, where, nbytes, call = rows[keep], where[keep], nbytes[keep], launcher[keep]
    del launcher, host_only, keep
    # the reason, once per distinct (label, call's name, the call's kind when it is a copy kind, direction): one int64
    # key a copy (codes < len(texts) + 1, kinds < 4, directions < 8), its words made in row order
    n_texts, kinds = len(linked.texts) + 1, sorted(COPY_KINDS)
    kind = np.where(call >= 0, np.asarray(a["copy_kind"][np.maximum(call, 0)]), NONE)
    key = np.where(call >= 0, np.asarray(a["name"][np.maximum(call, 0)]) + 1, 0).astype(np.int64)
    del call
    key += np.asarray(a["name"][rows]).astype(np.int64) * n_texts
    key *= len(kinds) + 1
    for i, k in enumerate(kinds):
        key += np.where(kind == k, i + 1, 0)
    del kind
    key = key * len(directions) + where
    keys, first, which = np.unique(key, return_index=True, return_inverse=True)
    del key
    reasons = np.zeros(len(keys), dtype=np.int32)
    for k in np.argsort(first, kind="stable").tolist():
        rest, d = divmod(int(keys[k]), len(directions))
        rest, kind_at = divmod(rest, len(kinds) + 1)
        label_code, call_code = divmod(rest, n_texts)
        label = linked.texts[label_code] or ""
        said = copy_direction(label)
        # where the call's kind argument overrode what the label says, the reason says both
        reasons[k] = out.word(f"{label}; {linked.texts[call_code - 1] or ''} kind {kinds[kind_at - 1]}: {directions[d].value}"
                              if kind_at and said is not None and said is not directions[d] else label)
    out.transfers.extend(len(rows), event=rows, direction=where, bytes=nbytes, reason=reasons[which.reshape(-1)])
    # runtime copy calls that launched nothing the trace shows (no device activity recorded, or Ascend's aclrtMemcpy)
    calls = linked.rows(EventKind.RUNTIME)
    copy_call = linked.names_where(is_copy_call)[a["name"][calls]]
    launched = np.zeros(len(a["kind"]), dtype=bool)
    launched[links.launcher[links.launcher >= 0]] = True
    for row in calls[copy_call & ~launched[calls]].tolist():
        kind = int(a["copy_kind"][row])
        if kind == HOST_TO_HOST:
            continue
        direction = COPY_KINDS.get(kind) or copy_direction(linked.name(row)) or Direction.UNKNOWN
        out.transfer(row, direction, max(int(a["bytes"][row]), 0),
                     linked.name(row) + (f" kind {kind}" if kind in COPY_KINDS else ""))


def _syncs(linked: Linked, out: Findings) -> None:
    """Device evidence (a waiting runtime call, a synchronous d2h copy call, a device wait no such call launched, a d2h
    copy inside a sync operator), taken by start: the outermost sync operator around it (or the indexing operator
    around that one, when a boolean mask indexes) is the signal, its name the reason, once per operator; evidence in
    no sync operator (or in one no sync rule names) is a sync call in its operator, once per operator. Over arrays:
    a trace of a device wait per operator holds millions."""
    a, links = linked.a, linked.links
    calls = linked.rows(EventKind.RUNTIME)
    call_names = np.asarray(a["name"][calls])
    waits = calls[linked.names_where(lambda t: t in SYNC_RUNTIME_CALLS)[call_names]]
    sync_copies = calls[linked.names_where(is_sync_copy_call)[call_names]]
    del calls, call_names
    d2h = sync_copies[_call_directions(linked, sync_copies) == DIRECTIONS.index(Direction.D2H)]
    device_waits = linked.rows(EventKind.WAIT)
    device_waits = device_waits[~np.isin(np.asarray(links.launcher[device_waits]), np.concatenate([waits, d2h]))]
    sync_op = linked.names_where(lambda t: t in SYNC_OPS)
    rows = np.concatenate([waits, d2h, device_waits, _reads_back(linked, sync_op)]).astype(np.int64)
    del waits, d2h, device_waits
    rows = rows[~_while_compiling(linked, rows)]  # the compiler's own waits (autotuning): part of its compile
    if not len(rows):
        return
    rows = rows[np.lexsort((rows, np.asarray(a["start_ns"][rows])))]  # by start, then row
    op = np.asarray(links.op[rows]).astype(np.int64)
    at = _outermost(linked, op, sync_op)
    parent = np.where(at >= 0, np.asarray(links.op[np.maximum(at, 0)]), -1).astype(np.int64)
    bool_index = linked.names_where(lambda t: t in BOOL_INDEX_OPS)
    index = (parent >= 0) & bool_index[np.asarray(a["name"][np.maximum(parent, 0)])]
    subject = np.where(index, parent, at)
    # the sync rule of each subject, per distinct (name, boolean index); -1: no subject
    subject_key = np.where(at >= 0, np.asarray(a["name"][np.maximum(subject, 0)]).astype(np.int64) * 2 + index, -1)
    pairs, pair = np.unique(subject_key, return_inverse=True)
    rules = [None if k < 0 else sync_cause(OpCall(linked.texts[k // 2] or "", bool_index=bool(k % 2))) for k in pairs.tolist()]
    pair = pair.reshape(-1)
    named = np.array([r is not None for r in rules])[pair]
    del parent, index, subject_key
    key = np.where(named, subject, op)  # what each claims, in order: one signal an operator (-1: none, each signals)
    claimed = np.flatnonzero(key >= 0)
    emit = key < 0
    emit[claimed[np.unique(key[claimed], return_index=True)[1]]] = True
    emit = np.flatnonzero(emit)
    named, rows, op, subject, pair = named[emit], rows[emit], op[emit], subject[emit], pair[emit]
    del key, claimed, emit
    # what each says: a named one its rule's words, a call its name's and its operator's (one key per distinct saying)
    texts = len(linked.texts) + 1
    row_name = np.asarray(a["name"][rows]).astype(np.int64)
    op_name = np.where(op >= 0, np.asarray(a["name"][np.maximum(op, 0)]), -1).astype(np.int64)
    sayings, which = np.unique(np.where(named, pair, len(pairs) + row_name * texts + op_name + 1), return_inverse=True)
    which = which.reshape(-1)
    words = np.zeros((len(sayings), 3), dtype=np.int32)
    for w in np.argsort(np.unique(which, return_index=True)[1], kind="stable").tolist():  # as first said: words in order
        k = int(sayings[w])
        if k < len(pairs):
            rule = rules[k]
            said = (rule.cause.value, linked.texts[int(pairs[k]) // 2] or "", rule.hint)  # type: ignore[union-attr]
        else:
            name, op_code = divmod(k - len(pairs), texts)
            call = linked.texts[name] or ""
            said = (call, (linked.texts[op_code - 1] or "") if op_code else call, f"{call}: " + cause_hint(Cause.SYNC_CALL))
        words[w] = [out.word(t) for t in said]
    words = words[which]
    out.signals.extend(len(rows), event=np.where(named, subject, rows), op=np.where(named, subject, op),
                       kind=SIGNAL_KINDS.index(SignalKind.SYNC), reason=words[:, 0], name_text=0, name_word=words[:, 1],
                       note=words[:, 2], bytes=0)  # fmt: skip


def _outermost(linked: Linked, op: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Per operator row of `op` (-1: none): the outermost operator around it, itself included, whose name `flag`
    marks (-1: none), walking all of them out a level at a time."""
    a, links = linked.a, linked.links
    found = np.full(len(op), -1, dtype=np.int64)
    at = np.array(op, dtype=np.int64)
    live = np.flatnonzero(at >= 0)
    while len(live):
        cur = at[live]
        hit = flag[np.asarray(a["name"][cur])]
        found[live[hit]] = cur[hit]
        at[live] = np.asarray(links.op[cur])
        live = live[at[live] >= 0]
    return found


def _reads_back(linked: Linked, sync_op: np.ndarray) -> np.ndarray:
    """Device->host copies inside an operator of a sync kind (``.item()`` copies the scalar back and returns it: the
    host waits for that copy even where the trace holds no synchronize call)."""
    rows, where = copy_directions(linked)
    d2h = rows[where == DIRECTIONS.index(Direction.D2H)]
    return d2h[_outermost(linked, np.asarray(linked.links.op[d2h]), sync_op) >= 0]


def _call_directions(linked: Linked, calls: np.ndarray) -> np.ndarray:
    """Per copy call: its direction as an index into `DIRECTIONS`: its kind argument, else the device copy it
    launched (the last one), else its name, else unknown."""
    a = linked.a
    out = np.full(len(calls), DIRECTIONS.index(Direction.UNKNOWN), dtype=np.int8)
    if not len(calls):
        return out
    names, at = np.unique(np.asarray(a["name"][calls]), return_inverse=True)
    said = [copy_direction(linked.texts[c] or "") for c in names.tolist()]
    by_name = np.array([DIRECTIONS.index(d) if d is not None else -1 for d in said], dtype=np.int8)[at.reshape(-1)]
    out = np.where(by_name >= 0, by_name, out)
    rows, where = copy_directions(linked)
    launcher = np.asarray(linked.links.launcher[rows]).astype(np.int64)
    launcher, where = launcher[launcher >= 0], where[launcher >= 0]
    if len(launcher):
        order = np.argsort(launcher, kind="stable")  # a call's copies in file order: its last one found
        launcher, where = launcher[order], where[order]
        pos = np.maximum(np.searchsorted(launcher, calls, side="right") - 1, 0)
        out = np.where(launcher[pos] == calls, where[pos], out)
    return _kind_says(np.asarray(a["copy_kind"][calls]), out).astype(np.int8)


def _online_compiles(linked: Linked, out: Findings) -> None:
    a, links = linked.a, linked.links
    calls = linked.rows(EventKind.RUNTIME)
    compile_name = linked.names_where(lambda t: t in ONLINE_COMPILE_CALLS)
    for row in calls[compile_name[a["name"][calls]]].tolist():
        outer = int(links.call_parent[row])
        nested = False
        while outer >= 0:
            if compile_name[a["name"][outer]]:
                nested = True
                break
            outer = int(links.call_parent[outer])
        if nested:
            continue  # one compile, recorded by the call around it
        op = int(links.op[row])
        call = linked.name(row)
        out.signal(row, op, SignalKind.RECOMPILE, f"online-{call}", linked.name(op) if op >= 0 else call, COMPILE_NOTE)
        out.compiled(row, CompileKind.PROGRAM, call)


def _compiler_phases(linked: Linked, out: Findings) -> None:
    """Each outermost compiler phase span on its thread (`COMPILER_PHASE_SUFFIX`: Dynamo compiling a frame,
    AOTAutograd a backward graph...) is one graph compiled, as long as the span; the phases inside it are its own."""
    for row in _outer_phases(linked).tolist():
        phase = linked.name(row).removesuffix(COMPILER_PHASE_SUFFIX)
        out.signal(row, -1, SignalKind.COMPILE_GRAPH, phase, linked.name(row), None)
        out.compiled(row, CompileKind.GRAPH, phase)


def _outer_phases(linked: Linked) -> np.ndarray:
    """The rows of the compiler phase spans no other phase on their thread encloses, by thread then start (worked out
    once per run)."""
    if linked.phases is None:
        spans = _spans(linked)
        phase = linked.names_where(lambda t: t.endswith(COMPILER_PHASE_SUFFIX))
        linked.phases = _outermost_spans(linked, spans[phase[linked.a["name"][spans]]])
    return linked.phases


def _spans(linked: Linked) -> np.ndarray:
    """The rows a compiler range can be: spans and operators (a record_function range is an operator in newer torch)."""
    return np.concatenate([linked.rows(EventKind.SPAN), linked.rows(EventKind.OP)])


def _compiler_spans(linked: Linked) -> np.ndarray:
    """The rows of the compiler's outermost spans on their thread, by thread then start: its phases and its compile
    events, a range named as the event with the event's marker (``dynamo_data: compile_id=0/0``) starting inside it on
    its thread (``dynamo`` opens before the phase ``_compile.compile_inner (dynamo_timed)`` and closes after it).
    Worked out once per run."""
    if linked.compiling is None:
        phase_text = linked.names_where(lambda t: t.endswith(COMPILER_PHASE_SUFFIX))
        event_of = {code: e for code, t in enumerate(linked.texts)
                    if t and "_data: " in t and (e := compiler_event_of(t)) is not None}  # fmt: skip
        if not phase_text.any() and not event_of:  # no compiler in the run (most traces): nothing more to read
            linked.compiling = np.zeros(0, dtype=np.int64)
            return linked.compiling
        a, spans = linked.a, _spans(linked)
        names = np.asarray(a["name"][spans])
        phase = phase_text[names]
        marks: dict[str, list[tuple[int, int]]] = {}  # a compile event's name -> its markers' (thread, start)
        for row in spans[np.isin(names, list(event_of))].tolist():
            marks.setdefault(event_of[int(a["name"][row])], []).append((int(a["thread"][row]), int(a["start_ns"][row])))
        for i in np.flatnonzero(linked.names_where(lambda t: t in marks)[names]).tolist():  # a few: one an event
            row = int(spans[i])
            begin, thread = int(a["start_ns"][row]), int(a["thread"][row])
            end = begin + int(a["dur_ns"][row])
            phase[i] |= any(t == thread and begin <= m < end for t, m in marks[linked.name(row)])
        linked.compiling = _outermost_spans(linked, spans[phase])
    return linked.compiling


def _outermost_spans(linked: Linked, spans: np.ndarray) -> np.ndarray:
    """Those of `spans` no other of them on their thread encloses, by thread then start (at one start the longer)."""
    a = linked.a
    start, thread = np.asarray(a["start_ns"][spans]), np.asarray(a["thread"][spans])
    end = start + np.asarray(a["dur_ns"][spans])
    outer: list[int] = []
    open_until: dict[int, int] = {}
    for i in np.lexsort((-end, start, thread)).tolist():  # by thread, then start; the longer first at one start
        if int(start[i]) >= open_until.get(int(thread[i]), _NO_TIME):
            open_until[int(thread[i])] = int(end[i])
            outer.append(int(spans[i]))
    return np.asarray(outer, dtype=np.int64)


def _while_compiling(linked: Linked, rows: np.ndarray) -> np.ndarray:
    """A flag per row: it starts in the compiler's time on its own thread (inside one of its outermost spans there)."""
    a, inside = linked.a, np.zeros(len(rows), dtype=bool)
    spans = _compiler_spans(linked)
    if not len(spans) or not len(rows):
        return inside
    start, thread = np.asarray(a["start_ns"][rows]), np.asarray(a["thread"][rows])
    span_thread, begin = np.asarray(a["thread"][spans]), np.asarray(a["start_ns"][spans])
    end = begin + np.asarray(a["dur_ns"][spans])
    for t in np.unique(span_thread).tolist():  # a thread's outermost spans do not overlap: the last begun before
        mine, on = np.flatnonzero(span_thread == t), np.flatnonzero(thread == t)
        at = np.searchsorted(begin[mine], start[on], side="right") - 1
        inside[on] = (at >= 0) & (start[on] < end[mine][np.maximum(at, 0)])
    return inside


def compiler_ops(linked: Linked) -> np.ndarray:
    """The operators the compiler ran (placement `compiler`): those that start in its time on their thread, its own
    ranges recorded as operators included. Its tracing runs operators on fake tensors, Inductor's passes run
    operators of their own: the compiler's work, not the program's."""
    ops = linked.rows(EventKind.OP)
    return ops[_while_compiling(linked, ops)]


def compiled_regions(linked: Linked) -> tuple[bool, np.ndarray]:
    """(whether the program called compiled code anywhere in the run, a flag per annotation in `Links.annotations`
    order: it called some inside that region or a region nested in it). A call of compiled code is a range
    `is_compiled_call` names (``Torch-Compiled Region: 0/0``, ``CompiledFunction``, ``## Call CompiledFxGraph ...
    ##``) that starts outside the compiler's time; its region is the innermost one open at its start (an annotation
    so named: itself)."""
    links = linked.links
    flags = np.zeros(len(links.annotations), dtype=bool)
    named = linked.names_where(is_compiled_call)
    if not named.any():  # no compiled code in the run (most traces): no row to read
        return False, flags
    rows = np.concatenate([_spans(linked), linked.rows(EventKind.ANNOTATION)])
    rows = rows[named[linked.a["name"][rows]]]
    rows = rows[~_while_compiling(linked, rows)]
    if not len(rows) or not len(flags):
        return bool(len(rows)), flags
    order = np.argsort(links.annotations, kind="stable")
    inner = np.asarray(links.region_rows[links.region_change(np.asarray(linked.a["start_ns"][rows]))])
    inner = np.unique(inner[inner >= 0])
    at = order[np.searchsorted(links.annotations[order], inner)]  # each innermost annotation's place
    while len(at):  # marked, then the annotations around them, a level at a time
        at = at[~flags[at]]
        flags[at] = True
        up = links.annotation_parent[at]
        up = up[up >= 0]
        at = order[np.searchsorted(links.annotations[order], up)]
    return True, flags


def _ai_cpu(linked: Linked, out: Findings) -> None:
    a, links = linked.a, linked.links
    on_ai_cpu = linked.names_where(lambda t: t == AI_CPU)
    kernels = linked.rows(EventKind.KERNEL)
    rows = kernels[on_ai_cpu[a["unit"][kernels]]]
    op = np.asarray(links.op[rows], dtype=np.int64)
    out.signals_of(rows, op, SignalKind.CPU_FALLBACK, "ai-cpu", a["name"][np.where(op >= 0, op, rows)], AI_CPU_NOTE)
    placed = linked.rows(EventKind.PLACEMENT)  # operators a profile's totals place on the AI CPU (op_statistic)
    placed = placed[on_ai_cpu[a["unit"][placed]]]
    out.signals_of(placed, np.full(len(placed), -1, dtype=np.int64), SignalKind.CPU_FALLBACK, "ai-cpu",
                   a["name"][placed], AI_CPU_NOTE)  # fmt: skip


def _inferred_fallbacks(linked: Linked, out: Findings) -> None:
    if not linked.infer_fallback:
        return
    for op in inferred_fallback_ops(linked).tolist():
        out.signal(op, op, SignalKind.CPU_FALLBACK, Cause.NO_DEVICE_WORK.value, linked.name(op),
                   cause_hint(Cause.NO_DEVICE_WORK), linked.arguments[linked.a["args"][op]][3])  # fmt: skip


def _logged_fallbacks(linked: Linked, out: Findings) -> None:
    device = linked.a["device"]
    for row, logged in linked.logged(EventKind.PLACEMENT):
        if int(device[row]) != -1 or logged.record not in (None, COUNTED_FALLBACK_RECORD):
            continue  # the log says it ran on a device, or the record is not about an operator
        if logged.record == COUNTED_FALLBACK_RECORD:  # the backend's own classing, as it names it
            out.signal(row, -1, SignalKind.CPU_FALLBACK, logged.reason, linked.given_name(row), logged.fix)
            continue
        cause = logged_cause(logged.reason)
        reason = f"{cause.value} ({logged.reason})" if cause is not None else None
        out.signal(row, -1, SignalKind.CPU_FALLBACK, reason, linked.name(row),
                   logged.fix or _fallback_note(cause, logged.reason))  # fmt: skip


def _host_bounces(linked: Linked, out: Findings) -> None:
    nbytes = linked.a["bytes"]
    for row, logged in linked.logged(EventKind.PLACEMENT):
        if logged.record != BOUNCE_RECORD or (kind := bounce_kind(site := linked.name(row))) is None:
            continue
        out.signal(row, -1, kind, site, None, logged.fix, max(int(nbytes[row]), 0))


def _counted_recompiles(linked: Linked, out: Findings) -> None:
    for row, logged in linked.logged(EventKind.COMPILE):
        if logged.record == COUNTED_RECOMPILE_RECORD:  # counts by operator: no compiles row (that table lists single
            out.signal(row, -1, SignalKind.RECOMPILE, logged.reason, linked.given_name(row), logged.fix)  # compiles)


def _fallback_note(cause: Cause | None, text: str | None) -> str | None:
    """The fix a logged fallback reason points to, where its words say enough (an alignment's multiple, a dtype)."""
    if cause is Cause.UNALIGNED and text and (m := _ALIGN.search(text)):
        return cause_hint(Cause.UNALIGNED, multiple_of=m.group(1))
    if cause is Cause.DTYPE_NOT_SUPPORTED:
        return cause_hint(Cause.DTYPE_NOT_SUPPORTED, dtype="the device's dtype (e.g. float16)")
    return None


def _compiled_graphs(linked: Linked, out: Findings) -> None:
    """A frame's last graph record is the graph it compiled. Dynamo logs a graph per attempt at a frame and restarts
    the analysis (the next attempt) where one tells it to (torch 2.13: ``TensorifyScalarRestartAnalysis`` after
    attempt 0's graph): the graph it logged before is discarded, and the frame's compile metrics (the op count and
    compile time the events carry) are the last attempt's. A record of no frame is a graph of its own."""
    events = [(row, x) for row, x in linked.logged(EventKind.COMPILE) if x.record == GRAPH_RECORD]
    last = {_frame_of(linked, row, x): row for row, x in events}  # file order: the last attempt
    for row, x in events:
        if x.frame_key is None or last[_frame_of(linked, row, x)] == row:
            out.signal(row, -1, SignalKind.COMPILE_GRAPH, None, linked.name(row), None)
            out.compiled(row, CompileKind.GRAPH, None)


def _frame_of(linked: Linked, row: int, logged: Logged) -> tuple[int, str | None]:
    """A compile record's frame: its frame key in its process (its thread: every rank's log numbers its frames from
    0/0)."""
    return int(linked.a["thread"][row]), logged.frame_key


def _compile_records(linked: Linked, out: Findings, record: str, metrics_record: str, kind: CompileKind,
                     signal: SignalKind, unreadable: str | None, not_one: re.Pattern[str] | None = None) -> None:
    """`record` events (their reason, else `unreadable`), and `metrics_record` events of the frames none is of (a
    frame of a process), but those whose reason `not_one` matches whole."""
    events = linked.logged(EventKind.COMPILE)
    logged = {_frame_of(linked, row, x) for row, x in events if x.record == record}
    for row, x in events:
        if x.record == record:
            reason = x.reason or unreadable
        elif (x.record == metrics_record and _frame_of(linked, row, x) not in logged
              and not (not_one is not None and not_one.fullmatch(x.reason or ""))):  # fmt: skip
            reason = x.reason
        else:
            continue
        out.signal(row, -1, signal, reason, linked.name(row), None)
        out.compiled(row, kind, reason)


def _graph_breaks(linked: Linked, out: Findings) -> None:
    """A logged graph break; a frame with none (older torch logs no break record) has one per restart reason in its
    compile metrics, but a restart that is no break. Dynamo restarts a frame's analysis on a ``RestartAnalysis`` and
    records ``e.restart_reason or str(type(e))``: a graph break restarts with its reason in words (older torch:
    ``'skip function graph_break in file …'``; a failed speculation: the break's reason), while a restart Dynamo
    makes for reasons of its own names none (``TensorifyScalarRestartAnalysis``: a float it tensorifies;
    ``UnspecializeRestartAnalysis``, ``CompileCollectiveRestartAnalysis``) and is recorded as its class,
    ``<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>`` (`RESTART_WITHOUT_BREAK`): no break. Neither
    the metrics' ``num_graph_breaks`` (torch 2.13 counts the run's breaks so far; older torch writes none) nor the
    attempt (a break restarts as well) tells them apart."""
    _compile_records(linked, out, BREAK_RECORD, RESTART_RECORD, CompileKind.GRAPH_BREAK,
                     SignalKind.COMPILE_GRAPH_BREAK, None, RESTART_WITHOUT_BREAK)  # fmt: skip


def _recompiles(linked: Linked, out: Findings) -> None:
    _compile_records(linked, out, RECOMPILE_RECORD, METRICS_RECOMPILE_RECORD, CompileKind.RECOMPILE,
                     SignalKind.COMPILE_RECOMPILE, UNREADABLE)  # fmt: skip


def _dataflow(linked: Linked, out: Findings) -> None:
    """A static schedule's dependencies and waits (module docstring: dataflow); an instruction is the events of one
    correlation id (one per engine it ran on)."""
    if not any(x.reads or x.writes for x in linked.logs):
        return
    a = linked.a
    instructions: dict[int, dict] = {}
    for row, x in linked.logged(EventKind.SPAN):  # a schedule's spans: its instructions, all of them on the lanes
        corr = int(a["correlation"][row])
        key = corr if corr != NONE else -1 - row
        begin = int(a["start_ns"][row])
        ins = instructions.setdefault(key, {"key": key, "rows": [], "begin": begin, "end": begin + int(a["dur_ns"][row]),
                                            "reads": x.reads, "writes": x.writes, "copy": False})  # fmt: skip
        ins["rows"].append(row)
        ins["copy"] |= (linked.texts[a["engine_kind"][row]] or "").startswith("dma")
    writers: dict[int, list[dict]] = {}
    for ins in instructions.values():
        for t in ins["writes"]:
            writers.setdefault(t, []).append(ins)
    lane_end: dict[int, int] = {}
    for ins in sorted(instructions.values(), key=lambda i: (i["begin"], i["key"])):
        producers = []
        for t in ins["reads"]:
            others = [w for w in writers.get(t, []) if w is not ins]
            candidates = [w for w in others if w["end"] <= ins["begin"]] or others
            if candidates:
                producers.append(max(candidates, key=lambda w: (w["end"], w["key"])))
        depends = tuple(sorted({p["key"] for p in producers if p["key"] >= 0}))
        last = max(producers, key=lambda w: w["end"], default=None)
        for row in ins["rows"]:
            if depends:
                out.depends[row] = depends
            lane = int(a["thread"][row])
            free = lane_end.get(lane, 0)
            if last is not None and free < last["end"] <= ins["begin"]:
                out.waited[row] = TRANSFER_WAIT if last["copy"] else DEPENDENCY_WAIT
            lane_end[lane] = max(free, ins["end"])


def inferred_fallback_ops(linked: Linked) -> np.ndarray:
    """Leaf operators that launched no device work, on a thread whose operators launch some, that take tensors and
    are not of a kind that never computes, outside the compiler's phases (its tracing runs operators on fake tensors):
    a guess, as Kineto records no tensor devices."""
    a, links = linked.a, linked.links
    ops = linked.rows(EventKind.OP)
    if not len(ops):
        return ops
    has_child = np.zeros(len(a["kind"]), dtype=bool)
    parents = links.op[ops]
    has_child[parents[parents >= 0]] = True
    launched = launched_ops(linked)
    calls = linked.rows(EventKind.RUNTIME)
    launching = np.zeros(max(len(linked.threads), 1), dtype=bool)  # threads whose operators launch device work
    launching[a["thread"][calls[links.op[calls] >= 0]]] = True
    on_thread = launching[a["thread"][ops]]
    computes = linked.names_where(lambda t: t not in NO_WORK_OPS)[a["name"][ops]]
    typed = np.array([bool(args[2]) and any(args[2].split(";")) for args in linked.arguments], dtype=bool)[a["args"][ops]]
    return ops[~has_child[ops] & ~launched[ops] & on_thread & computes & typed & ~_while_compiling(linked, ops)]


def launched_ops(linked: Linked) -> np.ndarray:
    """A flag per event row: an operator that launched device work itself or through an operator inside it."""
    links = linked.links
    flag = np.zeros(len(linked.kind), dtype=bool)
    device = np.isin(linked.kind, [KIND_CODES[k] for k in (EventKind.KERNEL, EventKind.COPY, EventKind.MEMSET)])
    up = links.op[device]
    del device
    pending = np.zeros(len(flag), dtype=bool)  # operators to flag next, one level up at a time (flags: no sort)
    pending[up[up >= 0]] = True
    while pending.any():
        pending &= ~flag
        flag |= pending
        up = links.op[pending]
        pending[:] = False
        pending[up[up >= 0]] = True
    return flag


RULES: RuleSet[EventRule] = RuleSet([
    EventRule("transfer", "device copies, direction from the launching call's kind argument, else the label; runtime "
              "copy calls without device work", (SignalKind.TRANSFER_H2D, SignalKind.TRANSFER_D2H,
                                                 SignalKind.TRANSFER_D2D, SignalKind.TRANSFER_UNKNOWN), _transfers),
    EventRule("sync", "the host waited for the device: a waiting runtime call, a synchronous d2h copy or a device "
              "wait, inside the operator that caused it", (SignalKind.SYNC,), _syncs),
    EventRule("online-compile", "an operator compiled online by the runtime; nested compile calls count once",
              (SignalKind.RECOMPILE,), _online_compiles),
    EventRule("ai-cpu", "a kernel the device ran on its AI CPU", (SignalKind.CPU_FALLBACK,), _ai_cpu),
    EventRule("inferred-fallback", "a leaf operator that launched no device work (asked for: a guess)",
              (SignalKind.CPU_FALLBACK,), _inferred_fallbacks),
    EventRule("host-bounce", "data a backend's dump counts by site as moved through the host; the site names the kind",
              (SignalKind.BOUNCE_DTYPE, SignalKind.BOUNCE_STRIDED, SignalKind.BOUNCE_OTHER), _host_bounces),
    EventRule("logged-fallback", "an operator a backend's log places on the host; its cause from the logged words",
              (SignalKind.CPU_FALLBACK,), _logged_fallbacks),
    EventRule("counted-recompile", "operators a backend's dump counts as recompiled at dispatch",
              (SignalKind.RECOMPILE,), _counted_recompiles),
    EventRule("compiled-graph", "a graph a compile log records as compiled", (SignalKind.COMPILE_GRAPH,),
              _compiled_graphs),
    EventRule("compiler-phase", "a compiler phase a profiler trace records (PyTorch's dynamo_timed ranges); the "
              "outermost on its thread is one compile, nested phases count once", (SignalKind.COMPILE_GRAPH,),
              _compiler_phases),
    EventRule("graph-break", "a compile log's graph break; else (older torch) its frame's metrics' restart reasons",
              (SignalKind.COMPILE_GRAPH_BREAK,), _graph_breaks),
    EventRule("recompile", "a compile log's recompile, the guards that failed; else (older torch) its metrics'",
              (SignalKind.COMPILE_RECOMPILE,), _recompiles),
    EventRule("dataflow", "a static schedule: what each instruction read from, and what its engine idled on before it",
              (), _dataflow),
])  # fmt: skip


def apply_rules(linked: Linked) -> Findings:
    """Every rule of `RULES` over the linked events."""
    out = Findings()
    for rule in RULES:
        rule.find(linked, out)
    return out


def memory_peaks(linked: Linked, spans: list[tuple[int, int]], device_only: bool) -> list[int | None]:
    """Per (start_ns, end_ns) span: the greatest allocator total held during it on a device (None: no memory event
    before its end): the totals of the events inside it and, per device, the total held when it began (its last
    event before the span's start). `device_only`: events of devices only (a device run's peak is its device's),
    else every event."""
    a = linked.a
    rows = linked.rows(EventKind.MEMORY)
    rows = rows[a["total_allocated"][rows] != NONE]
    if device_only:
        rows = rows[a["device"][rows] >= 0]
    if not len(rows):
        return [None] * len(spans)
    lanes = []  # per device: its events' times and totals in time order
    device = np.asarray(a["device"][rows])
    for d in np.unique(device).tolist():
        on = rows[device == d]
        order = np.argsort(a["start_ns"][on], kind="stable")
        lanes.append((np.asarray(a["start_ns"][on])[order], np.asarray(a["total_allocated"][on])[order]))
    out: list[int | None] = []
    for start, end in spans:
        peak = None
        for times, totals in lanes:
            lo, hi = np.searchsorted(times, start, "left"), np.searchsorted(times, end, "right")
            held = totals[max(lo - 1, 0) : hi]  # from the total held at the start (if any event came before)
            if len(held):
                peak = max(peak or 0, int(held.max()))
        out.append(peak)
    return out


__all__ = ["AI_CPU", "AI_CPU_NOTE", "BOUNCE_RECORD", "BREAK_RECORD", "COMPILE_NOTE", "COPY_KINDS", "COUNTED_FALLBACK_RECORD",
           "COUNTED_RECOMPILE_RECORD", "DEPENDENCY_WAIT", "DIRECTIONS", "EXCLUDED_SITE_SUFFIX", "GRAPH_RECORD",
           "HOST_BOUNCE_SITES", "METRICS_RECOMPILE_RECORD", "NO_WORD", "RECOMPILE_RECORD", "RESTART_RECORD", "RULES",
           "SIGNAL_KINDS", "TRANSFER_WAIT", "UNREADABLE", "Columns", "EventRule", "Findings", "Linked", "apply_rules",
           "bounce_kind", "compiled_regions", "compiler_ops", "copy_directions", "inferred_fallback_ops", "is_copy_call",
           "is_sync_copy_call", "launched_ops", "memory_peaks"]

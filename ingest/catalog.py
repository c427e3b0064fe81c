"""The signal catalogue: the one definition of every signal, operator set, cause, hint and verdict.

Every producer of signals (the measured recorder, the predictor, the scheduler, the Kineto and NPU
readers) and every consumer (report, check, diff, the viewer) reads its definitions from here;
nothing else lists operators. The names profiler traces give categories, runtime calls and copies are in
`kineto_vocabulary`. Torch-free: operators are named as PyTorch names them
(``aten::add`` or ``aten::add.Tensor``; an overload matches its packet).

Public names (stable; other modules import them):

* Signals: :class:`SignalSpec`, :data:`SIGNALS` (SignalKind -> spec: description, hint, what it means
  for the verdict), :func:`hint_for`; :data:`SIGNAL_GROUPS` and :func:`group_counts` (the viewer's
  fallbacks / bounces / compiles columns).
* Causes (the ``reason`` of a signal row): :class:`Cause`, :func:`cause_hint`.
* Operator sets (:class:`OpSet`, ``op in SET`` accepts overload names): :data:`SYNC_OPS`,
  :data:`DATA_DEPENDENT_OPS`, :data:`SCALAR_READ_OPS`, :data:`BOOL_INDEX_OPS`, :data:`COPY_OPS`, :data:`CLONE_OPS`,
  :data:`FACTORY_OPS`, :data:`VIEW_OPS`, :data:`INDEX_ARITHMETIC_OPS`, :data:`NO_WORK_OPS`,
  :data:`MATMUL_OPS`; :func:`packet`.
* Fix notes: :func:`cause_hint`, :func:`dtype_hint` (a dtype note applicable to its operands), :func:`is_floating`.
* Operator rules (declared objects with name, description, match, hint): :class:`OpCall`,
  :class:`OpRule`, :class:`RuleSet`, :data:`SYNC_RULES`, :func:`sync_cause`, :func:`copy_ends`,
  :func:`never_falls_back`, :func:`dtype_agnostic`, :func:`is_index_arithmetic`, :func:`dtype_fallback_cause`;
  :class:`LoggedCauseRule`, :data:`LOGGED_CAUSE_RULES`, :func:`logged_cause` (reasons a backend logged).
* What each source provides: :class:`Provider`, :data:`PROVIDES`.
* The verdict: :class:`Status`, :class:`RegionFigures`, :class:`VerdictRule`, :data:`VERDICT_RULES`,
  :class:`Verdict`, :func:`verdict`, :func:`worst_status`; :func:`format_bytes` (the units verdicts print).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from .schema import Phase, SignalKind, Source

# ---- signals ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SignalSpec:
    """One signal kind: what it means, what usually fixes it, and what it says in a verdict.

    `unclean` is the verdict's words for a region where the signal appears (None: it does not make a
    region unclean); `warm_only`: it makes only a warm region unclean (a cold region is expected to compile).
    `compiles`: a run whose only signals are of such kinds has status "compiles", not "clean".
    """

    kind: SignalKind
    description: str
    hint: str
    unclean: str | None = None
    warm_only: bool = False
    compiles: bool = False


def _specs(*specs: SignalSpec) -> dict[SignalKind, SignalSpec]:
    out: dict[SignalKind, SignalSpec] = {}
    for spec in specs:
        if spec.kind in out:
            raise ValueError(f"signal kind {spec.kind.value} declared twice")
        out[spec.kind] = spec
    missing = [k.value for k in SignalKind if k not in out]
    if missing:
        raise ValueError(f"signal kinds without a catalogue entry: {', '.join(missing)}")
    return out


SIGNALS: Mapping[SignalKind, SignalSpec] = _specs(
    SignalSpec(SignalKind.CPU_FALLBACK, "an operator the device was asked for ran on the host",
               "try: an op and dtype the device supports", "ran on CPU"),
    SignalSpec(SignalKind.RECOMPILE, "a device program compiled for a key seen for the first time",
               "try: pad or bucket shapes to a few fixed sizes", "compiled in a warm region", warm_only=True, compiles=True),
    SignalSpec(SignalKind.WARM_MISS, "a warm call missed the program cache and went through the slow dispatch path",
               "try: make inputs contiguous (no broadcast views) or graph mode", "missed the warm cache"),
    SignalSpec(SignalKind.BOUNCE_DTYPE, "a dtype-changing copy went through host memory",
               "try: keep the computation in the device dtype", "copied through the host"),
    SignalSpec(SignalKind.BOUNCE_STRIDED, "a host result was written back into a strided device tensor",
               "try: write into contiguous tensors", "copied through the host"),
    SignalSpec(SignalKind.BOUNCE_OTHER, "a copy between device tensors went through host memory",
               "try: keep the data on the device", "copied through the host"),
    SignalSpec(SignalKind.TRANSFER_D2H, "bytes copied from the device to the host",
               "try: keep results on the device until the end", "device-to-host copies"),
    SignalSpec(SignalKind.TRANSFER_H2D, "bytes copied from the host to the device", "try: create tensors on the device"),
    SignalSpec(SignalKind.TRANSFER_D2D, "bytes copied between devices", "try: avoid copies between devices"),
    SignalSpec(SignalKind.TRANSFER_UNKNOWN, "a copy the trace records without its direction (a runtime copy call "
               "with no direction argument)", "try: record device activity to see each copy's direction"),
    SignalSpec(SignalKind.SYNC, "the host waited for the device",
               "try: avoid .item()/.tolist() and data-dependent shapes in the step", "host waited for the device"),
    SignalSpec(SignalKind.COPY_DTYPE, "a copy that changes dtype", "try: cast once, outside the step"),
    SignalSpec(SignalKind.COPY_NONCONTIGUOUS, "a copy from or into a non-contiguous tensor",
               "try: .contiguous() once, outside the step"),
    SignalSpec(SignalKind.COMPILE_GRAPH, "a graph captured by torch.compile",
               "compiled graphs (one-time cost when cold)", compiles=True),
    SignalSpec(SignalKind.COMPILE_GRAPH_BREAK, "torch.compile broke the graph",
               "try: remove the breaking call from the compiled function", "graph breaks"),
    SignalSpec(SignalKind.COMPILE_RECOMPILE, "torch.compile compiled a frame again because a guard failed",
               "try: fixed shapes (pad) or mark the dimension dynamic", "recompiled", compiles=True),
    SignalSpec(SignalKind.STATIC_OVER_LENGTH, "a prompt or generation longer than the static shapes the model was "
               "compiled for: the device refuses it", "try: a larger max_sequence_length / max_cache_length, or "
               "shorter prompts", "longer than the compiled shapes"),
    SignalSpec(SignalKind.STATIC_PADDING, "token positions a static-shape program computed as padding (count)",
               "try: a max_sequence_length closer to the real prompt lengths"),
)


# The columns of the runs and run pages: kinds summed under one heading.
SIGNAL_GROUPS: Mapping[str, frozenset[SignalKind]] = {
    "fallbacks": frozenset({SignalKind.CPU_FALLBACK}),
    "bounces": frozenset(k for k in SignalKind if k.is_bounce),
    "compiles": frozenset({SignalKind.RECOMPILE, SignalKind.COMPILE_GRAPH, SignalKind.COMPILE_RECOMPILE}),
}


def group_counts(counts: Mapping[SignalKind, int]) -> dict[str, int]:
    """Counts summed per SIGNAL_GROUPS heading."""
    return {name: sum(int(counts.get(k, 0)) for k in kinds) for name, kinds in SIGNAL_GROUPS.items()}


def hint_for(kind: SignalKind) -> str:
    """The default note of a signal kind (rows carry a more specific one when the producer knows the cause)."""
    return SIGNALS[kind].hint


# ---- causes (the `reason` column) ---------------------------------------------------------------


class Cause(enum.Enum):
    """Why a signal happened; the value is what the trace's ``reason`` column holds."""

    DTYPE_NOT_SUPPORTED = "dtype-not-supported"
    INDEX_DTYPE = "index-dtype-not-supported"
    UNALIGNED = "unaligned"
    SHAPE_CONDITION = "shape-condition"
    NO_KERNEL = "no-kernel"
    HOST_OPERANDS = "host-operands"
    NO_DEVICE_WORK = "no-device-work"
    ITEM = "item"
    DATA_DEPENDENT_SHAPE = "data-dependent-shape"
    BOOLEAN_INDEX = "boolean-index"
    SYNC_CALL = "sync-call"
    EXPLICIT_COPY = "explicit-copy"
    STRIDED_DESTINATION = "strided-destination"
    NEW_KEY = "new-key"
    BROADCAST_VIEW_INPUT = "broadcast-view-input"
    VIEW = "view"
    OTHER = "other"
    PROMPT_OVER_SEQUENCE = "prompt-exceeds-max-sequence-length"
    GENERATION_OVER_CACHE = "generation-exceeds-max-cache-length"


# Templates: fields in braces are filled by cause_hint(cause, **fields).
_CAUSE_HINTS: dict[Cause, str] = {
    Cause.DTYPE_NOT_SUPPORTED: "try: compute in {dtype}",
    Cause.INDEX_DTYPE: "try: compute positions and indices once, outside the step (or list the op in the "
                       "target's compute.index_ops if the device has an integer kernel for it)",
    Cause.UNALIGNED: "try: pad to a multiple of {multiple_of}",
    Cause.SHAPE_CONDITION: "try: pad to a multiple of {multiple_of} ({why})",
    Cause.NO_KERNEL: "try: graph mode (compile the whole forward)",
    Cause.HOST_OPERANDS: "try: create or move the operands on the device",
    Cause.NO_DEVICE_WORK: "inferred: the operator launched no GPU work; check its inputs' devices",
    Cause.ITEM: "try: keep the value on the device",
    Cause.DATA_DEPENDENT_SHAPE: "try: a fixed-size formulation (masks, nonzero_static) instead of data-dependent shapes",
    Cause.BOOLEAN_INDEX: "try: torch.where or masked_fill instead of boolean indexing",
    Cause.SYNC_CALL: "try: avoid explicit synchronisation in the step",
    Cause.EXPLICIT_COPY: "try: keep the data on one side of the boundary",
    Cause.STRIDED_DESTINATION: "try: write into contiguous tensors",
    Cause.NEW_KEY: "try: pad or bucket shapes to a few fixed sizes",
    Cause.BROADCAST_VIEW_INPUT: "try: materialise broadcast views (.contiguous()) outside the step",
    Cause.PROMPT_OVER_SEQUENCE: "try: max_sequence_length >= {length} (or a shorter prompt)",
    Cause.GENERATION_OVER_CACHE: "try: max_cache_length >= {length} (or fewer new tokens)",
}


def cause_hint(cause: Cause, **fields: object) -> str:
    """The fix note for a cause, e.g. ``cause_hint(Cause.UNALIGNED, multiple_of=64)``."""
    return _CAUSE_HINTS[cause].format(**fields)


def is_floating(dtype: str) -> bool:
    """A floating-point dtype name (``float16``, ``bfloat16``, ``float8_e4m3fn``, ``complex64``...)."""
    return dtype.startswith(("float", "bfloat", "complex"))


def dtype_hint(device_dtype: str, dtypes: Iterable[str]) -> str:
    """The fix note for a dtype the device lacks, applicable to the operands it is about (`dtypes`: the
    operands' dtypes the device does not compute in, or a cast's two ends).

    "compute in D" only where a floating operand is in another dtype than D; a mask, flag or index the device
    has no kernel for (bool, integers) is not fixed by computing in D.
    """
    seen = [d for d in dtypes if d != device_dtype]
    if any(is_floating(d) for d in seen):
        return cause_hint(Cause.DTYPE_NOT_SUPPORTED, dtype=device_dtype)
    other = "/".join(sorted(set(seen))) or "this"
    return f"try: 0/1 values in {device_dtype} instead of {other} tensors, or this work outside the step"


# ---- operator sets ------------------------------------------------------------------------------


def packet(op: str) -> str:
    """The operator without its overload: ``aten::add.Tensor`` -> ``aten::add``."""
    return op.split(".", 1)[0]


@dataclasses.dataclass(frozen=True)
class OpSet:
    """A named set of operator packets; ``op in s`` accepts overload names too."""

    name: str
    description: str
    ops: frozenset[str]

    def __contains__(self, op: object) -> bool:
        return isinstance(op, str) and (op in self.ops or packet(op) in self.ops)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.ops))

    def __len__(self) -> int:
        return len(self.ops)

    def __or__(self, other: OpSet) -> frozenset[str]:
        return self.ops | other.ops


def _ops(*names: str) -> frozenset[str]:
    return frozenset(f"aten::{n}" for n in names)


SCALAR_READ_OPS = OpSet("scalar-read", "read one element back to the host (.item(), bool(t), .tolist() per element)",
                        _ops("_local_scalar_dense", "item"))
DATA_DEPENDENT_OPS = OpSet("data-dependent", "output size depends on the data: the host waits for the device to size it",
                           _ops("nonzero", "masked_select", "unique", "_unique", "_unique2", "unique_dim",
                                "unique_consecutive", "unique_dim_consecutive", "argwhere"))
BOOL_INDEX_OPS = OpSet("bool-index", "indexing operators that sync when an index operand is a boolean mask",
                       _ops("index", "index_put", "index_put_", "_index_put_impl_"))
SYNC_OPS = OpSet("sync", "operators that make the host wait for the device (whatever their operands)",
                 SCALAR_READ_OPS.ops | DATA_DEPENDENT_OPS.ops)
COPY_OPS = OpSet("copy", "operators that copy data, possibly across devices or dtypes",
                 _ops("_to_copy", "copy_", "_copy_from", "_copy_from_and_resize", "to"))
CLONE_OPS = OpSet("clone", "copies within one device and dtype (clone, .contiguous()): bytes move, no arithmetic",
                  _ops("clone"))
FACTORY_OPS = OpSet("factory", "operators that create tensors rather than compute on inputs: never fallbacks",
                    _ops("empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "zeros", "zeros_like",
                         "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "arange",
                         "scalar_tensor", "lift_fresh", "lift_fresh_copy"))
VIEW_OPS = OpSet("view", "operators that only reinterpret their input's storage (no data moves)",
                 _ops("view", "reshape", "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand",
                      "slice", "select", "unsqueeze", "squeeze", "detach", "detach_", "alias", "contiguous",
                      "split", "split_with_sizes", "chunk", "unbind", "narrow", "flatten", "unflatten", "numpy_T",
                      "_unsafe_view", "view_as", "expand_as", "values", "indices", "resize_", "set_"))
INDEX_ARITHMETIC_OPS = OpSet(
    "index-arithmetic",
    "integer arithmetic on positions and indices (arange, position ids, cache positions, mask cumsum)",
    _ops("arange", "add", "sub", "mul", "rsub", "neg", "cumsum", "remainder", "floor_divide", "div", "lt", "le", "gt",
         "ge", "eq", "ne", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "sum", "max", "min", "bitwise_and",
         "bitwise_or", "bitwise_not", "logical_and", "logical_or", "logical_not", "__and__", "__or__"),
)
# Ops that do no arithmetic: launching no device work is normal for them (the Kineto reader's fallback inference).
NO_WORK_OPS = OpSet("no-work", "operators that launch no device work by design (views, factories, metadata, scalar reads)",
                    VIEW_OPS.ops | SCALAR_READ_OPS.ops | _ops("empty", "empty_strided", "empty_like", "to", "_to_copy",
                                                            "is_nonzero", "result_type", "size", "stride",
                                                            "record_stream", "lift_fresh"))
MATMUL_OPS = OpSet("matmul", "matrix products: cost 2*M*N*K on the contraction engine",
                   _ops("mm", "addmm", "bmm", "baddbmm", "matmul"))

INTEGER_DTYPES = frozenset({"int8", "uint8", "int16", "int32", "int64", "bool"})


# ---- operator rules -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OpCall:
    """One operator call as every source can describe it: its name, its tensor operands' dtypes
    (inputs then outputs, in order; None where unknown), and whether an index operand is a boolean mask."""

    op: str
    input_dtypes: tuple[str | None, ...] = ()
    output_dtypes: tuple[str | None, ...] = ()
    bool_index: bool = False

    @property
    def packet(self) -> str:
        return packet(self.op)


@dataclasses.dataclass(frozen=True)
class OpRule:
    """A declared operator rule: a name, what it detects, the signal and cause it gives, and `match`."""

    name: str
    description: str
    kind: SignalKind
    cause: Cause
    match: Callable[[OpCall], bool]

    @property
    def hint(self) -> str:
        return cause_hint(self.cause)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=_Named)


class RuleSet(Generic[R]):
    """An ordered registry of rules that rejects two rules of one name."""

    def __init__(self, rules: Iterable[R] = ()) -> None:
        self._rules: dict[str, R] = {}
        for rule in rules:
            self.register(rule)

    def register(self, rule: R) -> R:
        if rule.name in self._rules:
            raise ValueError(f"rule {rule.name!r} is registered twice")
        self._rules[rule.name] = rule
        return rule

    def __iter__(self) -> Iterator[R]:
        return iter(self._rules.values())

    def __len__(self) -> int:
        return len(self._rules)

    def __getitem__(self, name: str) -> R:
        return self._rules[name]


SYNC_RULES: RuleSet[OpRule] = RuleSet([
    OpRule("item", "reads one element back to the host (.item(), bool(t), a Python scalar)",
           SignalKind.SYNC, Cause.ITEM, lambda c: c.op in SCALAR_READ_OPS),
    OpRule("data-dependent-shape", "the output's size depends on the data (nonzero, masked_select, unique)",
           SignalKind.SYNC, Cause.DATA_DEPENDENT_SHAPE, lambda c: c.op in DATA_DEPENDENT_OPS),
    OpRule("boolean-index", "indexing with a boolean mask (x[mask]): the result's size depends on the mask",
           SignalKind.SYNC, Cause.BOOLEAN_INDEX, lambda c: c.bool_index and c.op in BOOL_INDEX_OPS),
])


def sync_cause(call: OpCall) -> OpRule | None:
    """The sync rule an operator call matches (None: not a sync). Applies to calls with device operands."""
    return next((rule for rule in SYNC_RULES if rule.match(call)), None)


T = TypeVar("T")

# Copy operators' ends: (source, destination) as ("in", i) / ("out", i) among the call's tensor operands.
# aten::copy_(self, src) writes src into self; aten::_copy_from(self, dst) writes self into dst.
_COPY_ENDS: dict[str, tuple[tuple[str, int], tuple[str, int]]] = {
    "aten::copy_": (("in", 1), ("in", 0)),
    "aten::_copy_from": (("in", 0), ("in", 1)),
    "aten::_copy_from_and_resize": (("in", 0), ("in", 1)),
    "aten::_to_copy": (("in", 0), ("out", 0)),
    "aten::to": (("in", 0), ("out", 0)),
}
if set(_COPY_ENDS) != COPY_OPS.ops:
    raise ValueError("catalogue: every copy operator needs its (source, destination) declared")


def copy_ends(op: str, inputs: Sequence[T], outputs: Sequence[T]) -> tuple[T, T] | None:
    """(source, destination) of a copy operator among its tensor inputs and outputs (None: not a copy,
    or an operand is missing)."""
    ends = _COPY_ENDS.get(packet(op))
    if ends is None:
        return None
    picked = []
    for side, i in ends:
        seq = inputs if side == "in" else outputs
        if i >= len(seq):
            return None
        picked.append(seq[i])
    return picked[0], picked[1]


def never_falls_back(op: str) -> bool:
    """Factories, views, copies and scalar reads do no arithmetic: they run wherever their data lives,
    never a cpu_fallback."""
    return op in FACTORY_OPS or op in VIEW_OPS or op in COPY_OPS or op in SCALAR_READ_OPS


def dtype_agnostic(op: str) -> bool:
    """Operators that do no arithmetic (copies, clones, views, factories): a device's compute dtypes do not apply."""
    return never_falls_back(op) or op in CLONE_OPS


def is_index_arithmetic(call: OpCall) -> bool:
    """Integer arithmetic on positions or indices: every known operand dtype is an integer type."""
    dtypes = [d for d in (*call.input_dtypes, *call.output_dtypes) if d is not None]
    return call.op in INDEX_ARITHMETIC_OPS and bool(dtypes) and all(d in INTEGER_DTYPES for d in dtypes)


def dtype_fallback_cause(call: OpCall) -> Cause:
    """Why a call whose dtypes the device lacks falls back: index arithmetic is not a float16 question."""
    return Cause.INDEX_DTYPE if is_index_arithmetic(call) else Cause.DTYPE_NOT_SUPPORTED


@dataclasses.dataclass(frozen=True)
class LoggedCauseRule:
    """A declared rule that reads a backend's logged fallback reason: any of `words` (lower case) means `cause`."""

    name: str
    description: str
    cause: Cause
    words: tuple[str, ...]

    def match(self, text: str) -> bool:
        low = text.lower()
        return any(w in low for w in self.words)

    @property
    def hint(self) -> str:
        return cause_hint(self.cause)


LOGGED_CAUSE_RULES: RuleSet[LoggedCauseRule] = RuleSet([
    LoggedCauseRule("unaligned", "an alignment requirement", Cause.UNALIGNED, ("align", "multiple of")),
    LoggedCauseRule("dtype", "a dtype the device does not compute in", Cause.DTYPE_NOT_SUPPORTED,
                    ("dtype", "float32", "float64", "int64", "bfloat16", "double", "complex")),
    LoggedCauseRule("no-kernel", "no device kernel for the operator", Cause.NO_KERNEL,
                    ("not implemented", "no kernel", "unsupported op")),
    LoggedCauseRule("view", "a view or stride layout the runtime cannot take", Cause.VIEW, ("view", "stride")),
    LoggedCauseRule("shape", "a shape condition", Cause.SHAPE_CONDITION, ("shape", "length", "size", "rank", "dim")),
])


def logged_cause(text: str | None) -> Cause | None:
    """The cause of a fallback from the reason a backend logged (first matching rule; OTHER when none)."""
    if not text:
        return None
    return next((rule.cause for rule in LOGGED_CAUSE_RULES if rule.match(text)), Cause.OTHER)


# ---- where a target's cost figures come from --------------------------------------------------------


class SourceKind(enum.Enum):
    """The source of one cost figure of a target (its [sources] table; recorded in predicted runs as text
    "<kind>" or "<kind>: <document or device>")."""

    DATASHEET = "datasheet"
    MEASURED = "measured"
    ASSUMED = "assumed"

    @classmethod
    def of_text(cls, text: str) -> SourceKind | None:
        """The kind a recorded source text names ("measured: RBLN-CA12" -> MEASURED); None when none."""
        head = str(text).split(":", 1)[0].strip()
        return next((k for k in cls if k.value == head), None)


# ---- what each source provides ------------------------------------------------------------------


class Provider(enum.Enum):
    """Where a run's signals come from (finer than schema.Source: converted traces differ by format)."""

    MEASURED = "measured"
    PREDICTED = "predicted"
    KINETO = "kineto"
    NPU_KINETO = "npu-kineto"
    TORCH_TRACE = "torch-trace"

    @property
    def source(self) -> Source:
        return {Provider.MEASURED: Source.MEASURED, Provider.PREDICTED: Source.PREDICTED}.get(self, Source.CONVERTED)


_COMPILE_KINDS = frozenset({SignalKind.COMPILE_GRAPH, SignalKind.COMPILE_GRAPH_BREAK, SignalKind.COMPILE_RECOMPILE})
_TRANSFERS = frozenset({SignalKind.TRANSFER_D2H, SignalKind.TRANSFER_H2D, SignalKind.TRANSFER_D2D,
                        SignalKind.TRANSFER_UNKNOWN})
PROVIDES: Mapping[Provider, frozenset[SignalKind]] = {
    Provider.MEASURED: _COMPILE_KINDS | _TRANSFERS | {SignalKind.CPU_FALLBACK, SignalKind.SYNC, SignalKind.COPY_DTYPE,
                                                      SignalKind.COPY_NONCONTIGUOUS},
    Provider.PREDICTED: _COMPILE_KINDS | _TRANSFERS | {SignalKind.CPU_FALLBACK, SignalKind.SYNC, SignalKind.RECOMPILE,
                                                       SignalKind.WARM_MISS, SignalKind.BOUNCE_DTYPE,
                                                       SignalKind.BOUNCE_STRIDED, SignalKind.STATIC_OVER_LENGTH,
                                                       SignalKind.STATIC_PADDING},
    # cpu_fallback only when inferred (an operator that launched no device work)
    Provider.KINETO: _TRANSFERS | {SignalKind.SYNC, SignalKind.CPU_FALLBACK},
    Provider.NPU_KINETO: _TRANSFERS | {SignalKind.SYNC, SignalKind.CPU_FALLBACK},
    Provider.TORCH_TRACE: _COMPILE_KINDS,
}


# ---- the verdict --------------------------------------------------------------------------------


class Status(enum.Enum):
    """A region's or a run's status at a glance, best first."""

    CLEAN = "clean"
    COMPILES = "compiles"  # nothing but compiles (expected when cold)
    NOT_CLEAN = "not-clean"
    ERROR = "error"  # the region raised


@dataclasses.dataclass(frozen=True)
class RegionFigures:
    """What a verdict reads: per-kind counts and bytes (a region with its nested regions), phase, error."""

    counts: Mapping[SignalKind, int]
    bytes_by_kind: Mapping[SignalKind, int]
    phase: Phase = Phase.NONE
    error: str | None = None

    def count(self, kind: SignalKind) -> int:
        return int(self.counts.get(kind, 0))

    def bytes(self, kind: SignalKind) -> int:
        return int(self.bytes_by_kind.get(kind, 0))


@dataclasses.dataclass(frozen=True)
class VerdictRule:
    """A declared reason a region is not clean: `match` returns the reason's text, or None."""

    name: str
    description: str
    match: Callable[[RegionFigures], str | None]


def _signal_rule(spec: SignalSpec) -> VerdictRule:
    def match(f: RegionFigures) -> str | None:
        n = f.count(spec.kind)
        if not n or (spec.warm_only and f.phase is not Phase.WARM):
            return None
        size = f.bytes(spec.kind)
        extra = f", {format_bytes(size)}" if size else ""
        return f"{spec.kind.short}: {n}x ({spec.unclean}{extra})"

    return VerdictRule(spec.kind.short, f"{spec.description} ({'warm regions only' if spec.warm_only else 'any region'})",
                       match)


VERDICT_RULES: RuleSet[VerdictRule] = RuleSet(
    [_signal_rule(spec) for spec in SIGNALS.values() if spec.unclean is not None]
    + [VerdictRule("error", "the region raised an exception", lambda f: f"error: {f.error}" if f.error else None)]
)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The one verdict of a region: clean or not, why, and its status."""

    clean: bool
    reasons: tuple[str, ...]
    status: Status

    def to_json(self) -> dict[str, object]:
        return {"clean": self.clean, "status": self.status.value, "reasons": list(self.reasons)}


def verdict(figures: RegionFigures) -> Verdict:
    """Walk VERDICT_RULES over a region's figures."""
    reasons = tuple(r for rule in VERDICT_RULES if (r := rule.match(figures)) is not None)
    if figures.error:
        status = Status.ERROR
    elif reasons:
        status = Status.NOT_CLEAN
    elif any(figures.count(s.kind) for s in SIGNALS.values() if s.compiles):
        status = Status.COMPILES
    else:
        status = Status.CLEAN
    return Verdict(not reasons, reasons, status)


_STATUS_ORDER = list(Status)


def worst_status(statuses: Iterable[Status]) -> Status:
    """The worst of several statuses (a run's status from its top-level regions'); CLEAN when none."""
    return max(statuses, key=_STATUS_ORDER.index, default=Status.CLEAN)


def format_bytes(n: float) -> str:
    """Human-readable bytes in decimal units (1 MB = 10**6 bytes)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def format_signed_bytes(n: float | None) -> str:
    """A change in bytes with its sign (`+26.1 GB`, `−17.0 KB`, `0 B`); "-" where there is none (None, NaN)."""
    if n is None or n != n:
        return "-"
    return ("+" if n > 0 else "−") + format_bytes(abs(int(n))) if n else "0 B"

"""The portscope trace schema: enums for every kind, and one Arrow schema per table.

This module is the contract described in FORMAT.md. Every kind column is a
dictionary-encoded string whose values must belong to the matching enum.
"""

from __future__ import annotations

import enum

import pyarrow as pa

FORMAT_NAME = "portscope-trace"
FORMAT_VERSION = 1


class SignalKind(enum.Enum):
    """What the backend had to do; the rows of a region's report."""

    CPU_FALLBACK = "dispatch/cpu_fallback"
    RECOMPILE = "dispatch/recompile"
    WARM_MISS = "dispatch/warm_miss"
    BOUNCE_DTYPE = "host_bounce/dtype_cast"
    BOUNCE_STRIDED = "host_bounce/strided_write"
    BOUNCE_OTHER = "host_bounce/other"
    TRANSFER_D2H = "transfer/d2h"
    TRANSFER_H2D = "transfer/h2d"
    TRANSFER_D2D = "transfer/d2d"
    TRANSFER_UNKNOWN = "transfer/unknown"  # a copy whose direction the trace does not say
    SYNC = "sync"
    COPY_DTYPE = "copy/dtype_cast"
    COPY_NONCONTIGUOUS = "copy/noncontiguous"
    COMPILE_GRAPH = "compile/graph"
    COMPILE_GRAPH_BREAK = "compile/graph_break"
    COMPILE_RECOMPILE = "compile/recompile"
    STATIC_OVER_LENGTH = "static/over_length"  # a prompt or generation longer than the compiled static shapes
    STATIC_PADDING = "static/padding"  # count: token positions a static-shape program computed as padding

    @property
    def short(self) -> str:
        """The name used on the command line (``cpu_fallback``, ``d2h``...)."""
        return _SHORT[self]

    @property
    def is_bounce(self) -> bool:
        return self.value.startswith("host_bounce/")

    @property
    def is_transfer(self) -> bool:
        return self.value.startswith("transfer/")


_SHORT = {
    SignalKind.CPU_FALLBACK: "cpu_fallback",
    SignalKind.RECOMPILE: "recompile",
    SignalKind.WARM_MISS: "warm_miss",
    SignalKind.BOUNCE_DTYPE: "bounce_dtype",
    SignalKind.BOUNCE_STRIDED: "bounce_strided",
    SignalKind.BOUNCE_OTHER: "bounce_other",
    SignalKind.TRANSFER_D2H: "d2h",
    SignalKind.TRANSFER_H2D: "h2d",
    SignalKind.TRANSFER_D2D: "d2d",
    SignalKind.TRANSFER_UNKNOWN: "copy_unknown",
    SignalKind.SYNC: "sync",
    SignalKind.COPY_DTYPE: "copy_dtype",
    SignalKind.COPY_NONCONTIGUOUS: "copy_noncontiguous",
    SignalKind.COMPILE_GRAPH: "graph",
    SignalKind.COMPILE_GRAPH_BREAK: "graph_break",
    SignalKind.COMPILE_RECOMPILE: "compile_recompile",
    SignalKind.STATIC_OVER_LENGTH: "over_length",
    SignalKind.STATIC_PADDING: "padding",
}


class Direction(enum.Enum):
    """Direction of a physical copy across (or within) a device boundary."""

    H2D = "h2d"
    D2H = "d2h"
    D2D = "d2d"
    UNKNOWN = "unknown"  # a copy the trace records without its direction

    @property
    def signal(self) -> SignalKind:
        return {
            Direction.H2D: SignalKind.TRANSFER_H2D,
            Direction.D2H: SignalKind.TRANSFER_D2H,
            Direction.D2D: SignalKind.TRANSFER_D2D,
            Direction.UNKNOWN: SignalKind.TRANSFER_UNKNOWN,
        }[self]


class Placement(enum.Enum):
    """Where an operator ran."""

    DEVICE = "device"  # on the accelerator the region works on
    HOST = "host"  # on the host, and that is where the work is (CPU-only run)
    FALLBACK = "fallback"  # on the host although the region works on an accelerator
    GRAPH = "graph"  # one call of a compiled graph (its inside is one program)
    COMPILER = "compiler"  # run by the compiler while it traced or compiled (fake tensors, its passes): not the program's work


class Source(enum.Enum):
    """How a run's figures were obtained."""

    MEASURED = "measured"
    PREDICTED = "predicted"
    CONVERTED = "converted"


class Mode(enum.Enum):
    EAGER = "eager"
    COMPILED = "compiled"
    UNKNOWN = "unknown"


class Phase(enum.Enum):
    COLD = "cold"
    WARM = "warm"
    NONE = "none"


class CompileKind(enum.Enum):
    GRAPH = "graph"
    GRAPH_BREAK = "graph_break"
    RECOMPILE = "recompile"
    PROGRAM = "program"  # a device program compiled by an eager backend (predicted or measured)


class EngineKind(enum.Enum):
    HOST = "host"
    DISPATCH = "dispatch"
    COMPILER = "compiler"
    STREAM = "stream"
    DMA_H2D = "dma_h2d"
    DMA_D2H = "dma_d2h"
    DMA_D2D = "dma_d2d"
    MATRIX = "matrix"
    VECTOR = "vector"
    COLLECTIVE = "collective"
    OTHER = "other"


class SliceKind(enum.Enum):
    """Colour class of an engine slice."""

    COMPUTE = "compute"
    FALLBACK = "fallback"
    TRANSFER = "transfer"
    COMPILE = "compile"
    DISPATCH = "dispatch"
    SYNC = "sync"
    COMMUNICATION = "communication"  # a collective's or a peer transfer's kernel: mostly waiting on other devices
    ANNOTATION = "annotation"  # last: a kind a viewer does not know is drawn as this


class TimeUnit(enum.Enum):
    NS = "ns"
    CYCLES = "cycles"


_DICT = pa.dictionary(pa.int32(), pa.string())


def _schema(table: str, fields: list[pa.Field]) -> pa.Schema:
    return pa.schema(
        fields,
        metadata={
            b"portscope.format": FORMAT_NAME.encode(),
            b"portscope.version": str(FORMAT_VERSION).encode(),
            b"portscope.table": table.encode(),
        },
    )


REGIONS = _schema(
    "regions",
    [
        pa.field("region_id", pa.int32(), nullable=False),
        pa.field("parent_id", pa.int32()),
        pa.field("name", pa.string(), nullable=False),
        pa.field("start_ns", pa.int64(), nullable=False),
        pa.field("dur_ns", pa.int64(), nullable=False),
        pa.field("mode", _DICT, nullable=False),
        pa.field("phase", _DICT, nullable=False),
        pa.field("device", pa.string()),
        pa.field("peak_memory_bytes", pa.int64()),
        pa.field("error", pa.string()),
        pa.field("tags", pa.string()),  # JSON object of str -> str
    ],
)

OPS = _schema(
    "ops",
    [
        pa.field("op_id", pa.int64(), nullable=False),
        pa.field("region_id", pa.int32(), nullable=False),
        pa.field("name", _DICT, nullable=False),
        pa.field("start_ns", pa.int64(), nullable=False),
        pa.field("dur_ns", pa.int64(), nullable=False),
        pa.field("placement", _DICT, nullable=False),
        pa.field("device", _DICT),
        pa.field("input_shapes", _DICT),
        pa.field("input_strides", _DICT),
        pa.field("input_dtypes", _DICT),
        pa.field("output_shapes", _DICT),
        pa.field("output_dtypes", _DICT),
        pa.field("bytes_in", pa.int64(), nullable=False),
        pa.field("bytes_out", pa.int64(), nullable=False),
        pa.field("flops", pa.int64()),
        pa.field("module", _DICT),
        pa.field("call_site", _DICT),
        pa.field("stack_id", pa.int32()),
        pa.field("graph_id", pa.int32()),
        pa.field("thread", pa.int32()),
    ],
)

SIGNALS = _schema(
    "signals",
    [
        pa.field("region_id", pa.int32(), nullable=False),
        pa.field("op_id", pa.int64()),
        pa.field("kind", _DICT, nullable=False),
        pa.field("reason", _DICT),
        pa.field("op_name", _DICT),
        pa.field("count", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("call_site", _DICT),
        pa.field("stack_id", pa.int32()),
        pa.field("module", _DICT),
        pa.field("note", _DICT),
        pa.field("time_ns", pa.int64()),
    ],
)

TRANSFERS = _schema(
    "transfers",
    [
        pa.field("region_id", pa.int32(), nullable=False),
        pa.field("op_id", pa.int64()),
        pa.field("direction", _DICT, nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("src_device", _DICT),
        pa.field("dst_device", _DICT),
        pa.field("start_ns", pa.int64()),
        pa.field("dur_ns", pa.int64()),
        pa.field("cause", _DICT),  # e.g. "explicit", "fallback-input", "bounce"
        pa.field("call_site", _DICT),
        pa.field("stack_id", pa.int32()),
    ],
)

COMPILES = _schema(
    "compiles",
    [
        pa.field("region_id", pa.int32(), nullable=False),
        pa.field("kind", _DICT, nullable=False),
        pa.field("compile_id", pa.string()),
        pa.field("graph_id", pa.int32()),
        pa.field("key", pa.string()),  # program key / frame name
        pa.field("frame", pa.string()),  # source location of the frame
        pa.field("op_count", pa.int64()),
        pa.field("compile_ns", pa.int64()),
        pa.field("cache_hit", pa.bool_()),
        pa.field("reason", pa.string()),
        pa.field("call_site", _DICT),
        pa.field("time_ns", pa.int64()),
    ],
)

ENGINE_SLICES = _schema(
    "engine_slices",
    [
        pa.field("region_id", pa.int32()),
        pa.field("engine", _DICT, nullable=False),
        pa.field("engine_kind", _DICT, nullable=False),
        pa.field("kind", _DICT, nullable=False),
        pa.field("name", _DICT, nullable=False),
        pa.field("start", pa.int64(), nullable=False),  # in the run's time_unit
        pa.field("dur", pa.int64(), nullable=False),
        pa.field("op_id", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("correlation", pa.int64()),
        pa.field("module", _DICT),
        pa.field("waited_on", _DICT),  # what the engine idled on before this slice
    ],
)

FRAMES = _schema(
    "frames",
    [
        pa.field("frame_id", pa.int32(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
        pa.field("line", pa.int32(), nullable=False),
        pa.field("function", pa.string(), nullable=False),
    ],
)

# Optional `frames` column (nullable, absent in older traces): the source text of the frame's line,
# stored at record time so viewers show it without the source at hand.
FRAME_SOURCE = "source"

# Engine kinds whose slices are device work (kernels, copies, memsets, a prediction's compute units).
DEVICE_ENGINES = frozenset({EngineKind.STREAM, EngineKind.DMA_H2D, EngineKind.DMA_D2H, EngineKind.DMA_D2D, EngineKind.MATRIX,
                            EngineKind.VECTOR, EngineKind.COLLECTIVE})  # fmt: skip

# A memory lane of engine_slices (one per device of a run that recorded allocator events): engine
# "memory <device>", engine_kind other, kind annotation; slices named MEMORY_ALLOCATED hold the allocator's total
# allocated bytes from their start to the next event, slices named MEMORY_RESERVED its total reserved bytes.
MEMORY_ENGINE_PREFIX = "memory "
MEMORY_ALLOCATED = "allocated"
MEMORY_RESERVED = "reserved"


def memory_engine(device: str) -> str:
    """The memory lane of a device: ``cuda:0`` -> ``memory cuda:0``."""
    return f"{MEMORY_ENGINE_PREFIX}{device}"


def memory_device(engine: str | None) -> str | None:
    """The device whose memory lane this is (``memory cuda:0`` -> ``cuda:0``); None for any other lane."""
    if engine is None or not engine.startswith(MEMORY_ENGINE_PREFIX):
        return None
    return engine[len(MEMORY_ENGINE_PREFIX) :]

STACKS = _schema(
    "stacks",
    [
        pa.field("stack_id", pa.int32(), nullable=False),
        pa.field("frame_ids", pa.list_(pa.int32()), nullable=False),  # innermost first
    ],
)

NUMERICS = _schema(
    "numerics",
    [
        pa.field("comparison", _DICT, nullable=False),  # e.g. "fp16-vs-fp32-reference"
        pa.field("metric", _DICT, nullable=False),
        pa.field("value", pa.float64()),
        pa.field("text", pa.string()),
    ],
)

PLAN = _schema(
    "plan",
    [  # `portscope plan`: one row per (compiled sequence length, batch) of a static-shape target
        pa.field("max_sequence_length", pa.int64(), nullable=False),
        pa.field("max_cache_length", pa.int64(), nullable=False),
        pa.field("batch_size", pa.int32(), nullable=False),
        pa.field("weight_bytes", pa.int64(), nullable=False),
        pa.field("kv_cache_bytes", pa.int64(), nullable=False),
        pa.field("device_memory_bytes", pa.int64(), nullable=False),  # weights + KV cache + activations (the rest once weights and KV cache are taken)
        pa.field("memory_bytes", pa.int64()),  # the target's device memory (null: unknown)
        pa.field("fits", pa.bool_()),  # null when the target's memory is unknown
        pa.field("programs", pa.int32(), nullable=False),
        pa.field("prompts", pa.int64(), nullable=False),  # prompts in the length distribution (0: none given)
        pa.field("prompts_over_sequence", pa.int64(), nullable=False),
        pa.field("prompts_over_cache", pa.int64(), nullable=False),
        pa.field("padding_waste", pa.float64()),  # share of prefill token positions computed as padding
        pa.field("prefill_ns", pa.int64()),
        pa.field("decode_ns_per_token", pa.int64()),
        pa.field("h2d_bytes_per_token", pa.int64(), nullable=False),
        pa.field("d2h_bytes_per_token", pa.int64(), nullable=False),
        pa.field("cost_source", _DICT),  # where the time figures come from: datasheet, measured, assumed
    ],
)

RUNTIME_CALLS = _schema(
    "runtime_calls",
    [  # host calls into the device runtime/driver (cudaLaunchKernel...) of a converted profiler trace
        pa.field("region_id", pa.int32(), nullable=False),  # the innermost region open at its start
        pa.field("op_id", pa.int64()),  # the operator it ran inside (null: outside any)
        pa.field("name", _DICT, nullable=False),
        pa.field("start_ns", pa.int64(), nullable=False),
        pa.field("dur_ns", pa.int64(), nullable=False),
        pa.field("correlation", pa.int64()),  # = engine_slices.correlation of the device work it launched
    ],
)

COMMS = _schema(
    "comms",
    [  # a communication operator's own arguments where the profiler wrote them (PyTorch's record_param_comms)
        pa.field("op_id", pa.int64(), nullable=False),
        pa.field("process_group", _DICT),  # the process group's name ("0", "1"...), as the profiler writes it
        pa.field("process_group_description", _DICT),  # "default_pg", "undefined"...
        pa.field("seq", pa.int64()),  # the call's sequence number in its process group
        pa.field("collective", _DICT),  # "allreduce", "broadcast", "allgather"...
        pa.field("group_size", pa.int64()),
    ],
)

TABLES: dict[str, pa.Schema] = {
    "regions": REGIONS,
    "ops": OPS,
    "signals": SIGNALS,
    "transfers": TRANSFERS,
    "compiles": COMPILES,
    "engine_slices": ENGINE_SLICES,
    "frames": FRAMES,
    "stacks": STACKS,
    "numerics": NUMERICS,
    "plan": PLAN,
    "runtime_calls": RUNTIME_CALLS,
    "comms": COMMS,
}

# Tables added within version 1: files written before them lack the member and read as empty tables.
ADDED_TABLES: frozenset[str] = frozenset({"plan", "runtime_calls", "comms"})

# Columns whose values must belong to an enum.
ENUM_COLUMNS: dict[tuple[str, str], type[enum.Enum]] = {
    ("regions", "mode"): Mode,
    ("regions", "phase"): Phase,
    ("ops", "placement"): Placement,
    ("signals", "kind"): SignalKind,
    ("transfers", "direction"): Direction,
    ("compiles", "kind"): CompileKind,
    ("engine_slices", "engine_kind"): EngineKind,
    ("engine_slices", "kind"): SliceKind,
}

# (table, column) -> (table, id column) that it must point into.
REFERENCES: dict[tuple[str, str], tuple[str, str]] = {
    ("regions", "parent_id"): ("regions", "region_id"),
    ("ops", "region_id"): ("regions", "region_id"),
    ("ops", "stack_id"): ("stacks", "stack_id"),
    ("signals", "region_id"): ("regions", "region_id"),
    ("signals", "op_id"): ("ops", "op_id"),
    ("signals", "stack_id"): ("stacks", "stack_id"),
    ("transfers", "region_id"): ("regions", "region_id"),
    ("transfers", "op_id"): ("ops", "op_id"),
    ("transfers", "stack_id"): ("stacks", "stack_id"),
    ("compiles", "region_id"): ("regions", "region_id"),
    ("engine_slices", "region_id"): ("regions", "region_id"),
    ("engine_slices", "op_id"): ("ops", "op_id"),
    ("runtime_calls", "region_id"): ("regions", "region_id"),
    ("runtime_calls", "op_id"): ("ops", "op_id"),
    ("comms", "op_id"): ("ops", "op_id"),
}

# Columns that must never be negative.
NON_NEGATIVE: list[tuple[str, str]] = [
    ("regions", "dur_ns"),
    ("ops", "dur_ns"),
    ("ops", "bytes_in"),
    ("ops", "bytes_out"),
    ("signals", "count"),
    ("signals", "bytes"),
    ("transfers", "bytes"),
    ("transfers", "dur_ns"),
    ("compiles", "compile_ns"),
    ("engine_slices", "dur"),
    ("plan", "weight_bytes"),
    ("plan", "kv_cache_bytes"),
    ("plan", "device_memory_bytes"),
    ("plan", "prompts"),
    ("plan", "prefill_ns"),
    ("plan", "decode_ns_per_token"),
    ("plan", "h2d_bytes_per_token"),
    ("plan", "d2h_bytes_per_token"),
    ("runtime_calls", "dur_ns"),
    ("comms", "group_size"),
]

"""The collected events of one Kineto trace and the decoding of a cpu_op's tensor arguments.

A leaf module: the Kineto reader (kineto.py), its collector (kineto_stream.py) and the NPU hooks (npu_kineto.py)
import it, and it imports none of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..events import Comm
from ._kineto_ops import OpColumns
from .kineto_rows import DEVICE_FIELDS, PYTHON_FIELDS, RUNTIME_FIELDS, RowColumns

FORMAT = "kineto"

# C++ scalar type names in "Input type" -> torch dtype names.
DTYPES = {
    "float": "float32",
    "double": "float64",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "long int": "int64",
    "long": "int64",
    "int": "int32",
    "short int": "int16",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "bool": "bool",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "c10::complex<c10::Half>": "complex32",
    "c10::Float8_e4m3fn": "float8_e4m3fn",
    "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz",
    "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
    "unsigned int": "uint32",
    "unsigned long": "uint64",
}
ITEMSIZE = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "complex32": 4, "float8_e4m3fn": 1,
    "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "uint32": 4, "uint64": 8,
}  # fmt: skip


@dataclasses.dataclass
class KinetoEvents:
    """Compact per-category tuples of one Kineto trace (times in microseconds as read)."""

    metadata: dict[str, Any]
    # (ts, dur, name, pid, tid, None (reserved), shapes, strides, dtypes, bytes_in), kept as columns
    ops: OpColumns = dataclasses.field(default_factory=OpColumns)
    # (ts, dur, name, pid, tid)
    annotations: list[tuple] = dataclasses.field(default_factory=list)
    # (ts, dur, name, pid, tid), kept as columns
    python: RowColumns | list[tuple] = dataclasses.field(default_factory=lambda: RowColumns(PYTHON_FIELDS))
    # (ts, dur, name, pid, tid, correlation, ext_id, size, copy kind), kept as columns
    runtime: RowColumns = dataclasses.field(default_factory=lambda: RowColumns(RUNTIME_FIELDS))
    # (ts, pid, tid, bytes, total allocated, total reserved, device type, device id): [memory] instants
    memory: list[tuple] = dataclasses.field(default_factory=list)
    # (ts, dur, cat, name, device, stream, correlation, bytes), kept as columns likewise
    device: RowColumns = dataclasses.field(default_factory=lambda: RowColumns(DEVICE_FIELDS))
    t_min: float = float("inf")
    t_max: float = float("-inf")
    events: int = 0
    categories: dict[str, int] = dataclasses.field(default_factory=dict)
    unpaired: int = 0  # "B" events never ended and "E" events that end nothing: not read


def comm_args(args: dict) -> Comm | None:
    """What a communication operator's args say of its collective (a `Comm`), None where they say nothing: the
    process group's name (a string; a number as its text), its description, the call's sequence number in its group
    (``Seq``), the collective's name and the group's size."""
    group, seq, name = args.get("Process Group Name"), args.get("Seq"), args.get("Collective name")
    if group is None and seq is None and name is None:
        return None
    description, size = args.get("Process Group Description"), args.get("Group size")
    return Comm(process_group=_text(group), description=_text(description), seq=_count(seq), collective=_text(name),
                group_size=_count(size))


def _text(value: Any) -> str | None:
    return value if type(value) is str else str(value) if type(value) is int else None


def _count(value: Any) -> int | None:
    """A non-negative int64 from an int or a digit string; None for anything else."""
    if type(value) is str and value.isdigit():
        value = int(value)
    return value if type(value) is int and 0 <= value < 2**63 else None


def tensor_args(args: dict) -> tuple[str | None, str | None, str | None, int]:
    """(shapes, strides, dtypes, bytes_in) in the trace format's notation from a cpu_op's args."""
    dims = args.get("Input Dims")
    if type(dims) is not list:
        shapes = args.get("input_shapes")  # a portscope export
        if type(shapes) is str:
            strides = args.get("input_strides")
            dtypes = args.get("input_dtypes")
            return shapes, strides if type(strides) is str else None, dtypes if type(dtypes) is str else None, 0
        return None, None, None, 0
    types = args.get("Input type")
    if type(types) is not list:
        types = []
    strides_in = args.get("Input Strides")
    if type(strides_in) is not list:
        strides_in = None
    shapes, dtypes, strides = [], [], []
    nbytes = 0
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        dtype = DTYPES.get(t, "") if type(t) is str else ""
        is_tensor = dtype != "" and type(d) is list and all(type(x) is int for x in d)
        if is_tensor:
            shapes.append("x".join(map(str, d)) if d else "()")
            dtypes.append(dtype)
            numel = 1
            for x in d:
                numel *= x
            nbytes += numel * ITEMSIZE.get(dtype, 0)
        else:
            shapes.append("")
            dtypes.append("")
        if strides_in is not None:
            s = strides_in[i] if i < len(strides_in) else None
            ok = is_tensor and type(s) is list and all(type(x) is int for x in s)
            strides.append(("x".join(map(str, s)) if s else "()") if ok else "")
    nbytes = min(max(nbytes, 0), 2**63 - 1)  # negative or absurd dims in a broken file
    return ";".join(shapes), (";".join(strides) if strides_in is not None else None), ";".join(dtypes), nbytes

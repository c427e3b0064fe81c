"""A compiled graph's inside: the ATen operators of its AOT graph, read from the text torch logs while it compiles.

While a graph compiles, AOTAutograd logs its inference (or forward) graph to the
structured-trace logger as an `aot_inference_graph` (`aot_forward_graph`) record
whose payload is `GraphModule.print_readable(include_stride=True, include_device=True)`:

    def forward(self, arg0_1: "f16[64, 128][128, 1]cpu", ...):
        mm: "f16[64, 64][64, 1]cpu" = torch.ops.aten.mm.default(view_1, permute);  view_1 = permute = None

It is logged on a fresh compile and on an AOTAutograd cache hit alike, for any backend
built on AOTAutograd (inductor, aot_eager), so the recorded run keeps running the
backend's own code. This module parses that text (pure Python, no torch): one
`AotNode` per operator that does work, with its operand and result metadata and the
work nodes it reads. Views (`VIEW_OPS`) and tuple indexing do no work: a node that
reads one reads the view's producer. Shapes may be symbolic (`s0`, `2*s0`): `bind`
resolves them from the tensors the graph was called with.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import operator
import re
from collections.abc import Sequence

from portscope.ingest.catalog import VIEW_OPS

from .events import TensorInfo

# torch's dtype abbreviations in graph annotations (torch/fx/graph.py: dtype_abbrs) -> (dtype name, bytes)
_DTYPES: dict[str, tuple[str, int]] = {
    "bf16": ("bfloat16", 2), "f64": ("float64", 8), "f32": ("float32", 4), "f16": ("float16", 2),
    "f8e4m3fn": ("float8_e4m3fn", 1), "f8e5m2": ("float8_e5m2", 1), "f8e4m3fnuz": ("float8_e4m3fnuz", 1),
    "f8e5m2fnuz": ("float8_e5m2fnuz", 1), "f8e8m0fnu": ("float8_e8m0fnu", 1), "c32": ("complex32", 4),
    "c64": ("complex64", 8), "c128": ("complex128", 16), "i8": ("int8", 1), "i16": ("int16", 2), "i32": ("int32", 4),
    "i64": ("int64", 8), "b8": ("bool", 1), "u8": ("uint8", 1), "u16": ("uint16", 2), "u32": ("uint32", 4),
    "u64": ("uint64", 8),
}  # fmt: skip
_ANNOTATION = re.compile(r"^(?P<dtype>[a-z0-9]+)\[(?P<shape>[^\]]*)\](?:\[(?P<stride>[^\]]*)\])?(?P<device>[a-z0-9:]*)$")
_ASSIGN = re.compile(r'^(?P<var>[A-Za-z_]\w*)(?:: "(?P<ann>[^"]*)")? = (?P<rhs>.+)$')
_CALL = re.compile(r"^torch\.ops\.(?P<ns>\w+)\.(?P<op>\w+)(?:\.(?P<overload>\w+))?\((?P<args>.*)\)$")
_ITEM = re.compile(r"^(?P<var>[A-Za-z_]\w*)\[(?P<index>\d+)\]$")
_PARAM = re.compile(r'(?P<var>[A-Za-z_]\w*): "(?P<ann>[^"]*)"')
_KEYWORD = re.compile(r"\b[A-Za-z_]\w*\s*=\s*")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
GRAPH_RECORDS = frozenset({"aot_inference_graph", "aot_forward_graph"})  # structured-trace record kinds

Dim = int | str  # a size, or a symbolic expression of sizes ("s0", "2*s0")


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A tensor as the graph text annotates it: dtype, shape and strides (None: not printed), maybe symbolic."""

    dtype: str
    itemsize: int
    shape: tuple[Dim, ...]
    stride: tuple[Dim, ...] | None
    device: str


@dataclasses.dataclass
class AotNode:
    """One operator of the graph that does work. name: as dispatch names it (`aten::mm`, `aten::add.Tensor`,
    `prims::convert_element_type`); reads: indices of the work nodes whose results it reads (in order)."""

    name: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    reads: tuple[int, ...]


@dataclasses.dataclass
class AotGraph:
    """The operators of one compiled graph. placeholders: the graph's tensor inputs in call order."""

    placeholders: list[TensorSpec]
    nodes: list[AotNode]
    _bound: dict[tuple, list[BoundNode]] = dataclasses.field(default_factory=dict, repr=False)

    def bind(self, call_inputs: Sequence[TensorInfo | None]) -> list[BoundNode]:
        """The nodes with concrete shapes, symbols resolved from the tensors the graph was called with (cached per
        input shapes). A dimension no input determines counts as 1."""
        tensors = [t for t in call_inputs if t is not None]
        key = tuple(t.shape for t in tensors)
        got = self._bound.get(key)
        if got is None:
            sizes = _symbols(self.placeholders, tensors)
            got = self._bound[key] = [
                BoundNode(n.name, [_info(s, sizes) for s in n.inputs], [_info(s, sizes) for s in n.outputs], n.reads)
                for n in self.nodes
            ]
        return got


@dataclasses.dataclass(frozen=True)
class BoundNode:
    """A node with concrete tensor metadata, ready to cost."""

    name: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    reads: tuple[int, ...]


def parse_aot_graph(text: str) -> AotGraph:
    """The work nodes of a `print_readable` graph text. Lines it does not understand are skipped."""
    placeholders: list[TensorSpec] = []
    known: dict[str, tuple[TensorSpec | None, int | None]] = {}  # var -> (its tensor, the work node that made it)
    start = text.find("def forward(")
    end = text.find("):\n", start) if start >= 0 else -1
    head, body = (text[start:end], text[end + 3:]) if end >= 0 else ("", text)
    for m in _PARAM.finditer(head):
        spec = _spec(m["ann"])
        if spec is not None:
            placeholders.append(spec)
            known[m["var"]] = (spec, None)
    nodes: list[AotNode] = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "return", ")")):
            continue
        line = line.split(";  ", 1)[0]
        m = _ASSIGN.match(line)
        if m is None:
            continue
        var, rhs = m["var"], m["rhs"]
        spec = _spec(m["ann"]) if m["ann"] else None
        item = _ITEM.match(rhs)
        if item is not None:  # one result of a tuple-valued node
            _, producer = known.get(item["var"], (None, None))
            if producer is not None and spec is not None:
                outs = nodes[producer].outputs
                index = int(item["index"])
                outs.extend([spec] * (index + 1 - len(outs)))
                outs[index] = spec
            known[var] = (spec, producer)
            continue
        call = _CALL.match(rhs)
        if call is None:
            continue
        overload = call["overload"]
        name = f"{call['ns']}::{call['op']}" + (f".{overload}" if overload and overload != "default" else "")
        operands = [v for v in _NAME.findall(_QUOTED.sub("", _KEYWORD.sub("", call["args"]))) if v in known]
        if name in VIEW_OPS and operands:  # metadata only: readers depend on what the view reads
            known[var] = (spec, known[operands[0]][1])
            continue
        inputs = [s for v in operands if (s := known[v][0]) is not None]
        reads = tuple(dict.fromkeys(p for v in operands if (p := known[v][1]) is not None))
        nodes.append(AotNode(name, inputs, [spec] if spec is not None else [], reads))
        known[var] = (spec, len(nodes) - 1)
    return AotGraph(placeholders, nodes)


def _spec(annotation: str) -> TensorSpec | None:
    m = _ANNOTATION.match(annotation.strip())
    if m is None or m["dtype"] not in _DTYPES:
        return None  # a symbolic integer (`Sym(s0)`), or an annotation this torch prints differently
    dtype, itemsize = _DTYPES[m["dtype"]]
    stride = _dims(m["stride"]) if m["stride"] is not None else None
    return TensorSpec(dtype, itemsize, _dims(m["shape"]), stride, m["device"])


def _dims(text: str) -> tuple[Dim, ...]:
    return tuple(int(d) if d.isdigit() else d for d in (x.strip() for x in text.split(",")) if d)


def _symbols(placeholders: list[TensorSpec], tensors: list[TensorInfo]) -> dict[str, int]:
    """Sizes of the symbols that are whole dimensions of the graph's inputs (when inputs and call line up)."""
    sizes: dict[str, int] = {}
    if len(placeholders) != len(tensors):
        return sizes
    for spec, t in zip(placeholders, tensors, strict=True):
        if len(spec.shape) == len(t.shape):
            for d, n in zip(spec.shape, t.shape, strict=True):
                if isinstance(d, str) and d.isidentifier():
                    sizes[d] = n
    return sizes


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod}  # fmt: skip


def _size(d: Dim, sizes: dict[str, int]) -> int:
    """A dimension's size: an integer, a bound symbol or arithmetic on them; 1 when unknown."""
    if isinstance(d, int):
        return d
    try:
        return max(int(_eval(ast.parse(d, mode="eval").body, sizes)), 0)
    except (SyntaxError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return 1


def _eval(node: ast.AST, sizes: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return sizes[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, sizes), _eval(node.right, sizes))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, sizes)
    raise ValueError(ast.dump(node))


def _info(spec: TensorSpec, sizes: dict[str, int]) -> TensorInfo:
    shape = tuple(_size(d, sizes) for d in spec.shape)
    if spec.stride is not None and len(spec.stride) == len(shape):
        stride = tuple(_size(d, sizes) for d in spec.stride)
    else:  # not printed: contiguous
        stride = tuple(math.prod(shape[k + 1:]) for k in range(len(shape)))
    return TensorInfo(shape, stride, spec.dtype, spec.device, spec.itemsize)


__all__ = ["GRAPH_RECORDS", "AotGraph", "AotNode", "BoundNode", "TensorSpec", "parse_aot_graph"]

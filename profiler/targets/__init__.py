"""Target files: declarative TOML descriptions of accelerators you don't have.

The rule language is documented in README.md next to this file.
"""

from __future__ import annotations

import dataclasses
import enum
import fnmatch
import functools
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from portscope.ingest.errors import TargetError
from portscope.ingest.op_categories import OpCategory
from portscope.ingest.schema import EngineKind

from .cost_sources import ASSUMED, CostSource, parse_sources
from .static_shapes import KEYS as _STATIC_KEYS
from .static_shapes import StaticShapes, parse_static_shapes


class CopyWhere(enum.Enum):
    DEVICE = "device"
    HOST = "host"


@dataclasses.dataclass(frozen=True)
class AlignmentRule:
    """An operator reading a slice whose innermost extent is not a multiple of N falls back."""

    multiple_of: int
    ops: tuple[str, ...] = ("*",)
    exempt: tuple[str, ...] = ()
    applies_to: str = "slice"  # "slice": only views narrower than their rows; "any": every input

    def violated_by(self, op: str, shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
        if not shape or not matches(op, self.ops) or matches(op, self.exempt):
            return False
        inner = shape[-1]
        if self.applies_to == "slice":
            is_slice = len(shape) >= 2 and stride[-1] == 1 and shape[-2] > 1 and stride[-2] != inner
            if not is_slice:
                return False
        return inner % self.multiple_of != 0


@dataclasses.dataclass(frozen=True)
class ShapeCondition:
    """An operator runs on the device only if operand `operand`'s dimension `dim` is a multiple of N."""

    ops: tuple[str, ...]
    operand: int
    dim: int
    multiple_of: int
    why: str

    def violated_by(self, op: str, shapes: list[tuple[int, ...] | None]) -> bool:
        if not matches(op, self.ops) or self.operand >= len(shapes):
            return False
        shape = shapes[self.operand]
        if shape is None or len(shape) < abs(self.dim) + (0 if self.dim < 0 else 1):
            return False
        return shape[self.dim] % self.multiple_of != 0


@dataclasses.dataclass(frozen=True)
class KindFigures:
    """An engine's figures for the operators of one kind (`op_categories.OpCategory` value): they replace the
    engine's own for those operators ([engines.NAME.kinds.KIND]; a figure the table leaves out is the engine's)."""

    latency_ns: float
    flops_per_ns: float
    bytes_per_ns: float


@dataclasses.dataclass(frozen=True)
class Engine:
    """One engine of the device and its cost figures (used by schedules)."""

    name: str
    kind: EngineKind
    flops_per_ns: float = 0.0
    bytes_per_ns: float = 0.0
    latency_ns: float = 0.0
    ops: tuple[str, ...] = ()
    kinds: tuple[tuple[str, KindFigures], ...] = ()  # operator kind -> its own figures (a calibrated target)

    def figures(self, kind: str | None = None) -> KindFigures:
        """(latency_ns, flops_per_ns, bytes_per_ns) for an operator of `kind`: the kind's own, else the engine's."""
        for name, figures in self.kinds:
            if name == kind:
                return figures
        return KindFigures(self.latency_ns, self.flops_per_ns, self.bytes_per_ns)


@dataclasses.dataclass(frozen=True)
class Target:
    """What a device computes, what falls back and why, and what it costs."""

    name: str
    path: str
    description: str
    device: str
    dtypes: frozenset[str]
    index_dtypes: frozenset[str]
    index_ops: tuple[str, ...]
    no_kernel: tuple[str, ...]
    alignment: tuple[AlignmentRule, ...]
    shape_conditions: tuple[ShapeCondition, ...]
    dtype_change: CopyWhere
    strided_write: CopyWhere
    programs: bool  # whether the device compiles a program per new key (eager NPUs) or has fixed kernels
    cache_key: tuple[str, ...]
    broadcast_views_miss: bool
    dispatch_ns: float
    compile_ns: float
    host_flops_per_ns: float
    engines: tuple[Engine, ...]
    static_shapes: StaticShapes | None = None  # an LLM compiled ahead of time for fixed shapes
    cost_sources: tuple[tuple[str, CostSource], ...] = ()  # figure path -> source; unnamed figures are assumed
    graph_fallbacks: bool = False  # operators inside a compiled graph fall back as in eager mode ([compiled])
    sync_ns: float = 0.0  # what a host wait for the device (a synchronize, a blocking d2h read) costs beyond the copy

    def engine(self, kind: EngineKind) -> Engine | None:
        return next((e for e in self.engines if e.kind is kind), None)

    def source_of(self, figure: str) -> CostSource:
        """Where a cost figure ("cost.dispatch_ns", "engines.matrix.flops_per_ns") comes from."""
        return dict(self.cost_sources).get(figure, ASSUMED)


def matches(op: str, patterns: tuple[str, ...]) -> bool:
    """Whether an operator name (aten::add.Tensor) matches any pattern (fnmatch; `aten::add` matches overloads)."""
    packet = op.split(".", 1)[0]
    return any(fnmatch.fnmatchcase(op, p) or fnmatch.fnmatchcase(packet, p) for p in patterns)


# ---- loading and validation ---------------------------------------------------------------

_STR, _INT, _NUM, _BOOL, _STRS = "string", "integer", "number", "boolean", "list of strings"
_SECTIONS: dict[str, dict[str, str]] = {
    "target": {"name": _STR, "description": _STR, "device": _STR},
    "compute": {"dtypes": _STRS, "index_dtypes": _STRS, "index_ops": _STRS},
    "kernels": {"missing": _STRS},
    "copies": {"dtype_change": _STR, "strided_write": _STR},
    "cache": {"programs": _BOOL, "key": _STRS, "broadcast_views_miss": _BOOL},
    "cost": {"dispatch_ns": _NUM, "compile_ns": _NUM, "host_flops_per_ns": _NUM, "sync_ns": _NUM},
    "compiled": {"fallbacks": _BOOL},
    "static_shapes": _STATIC_KEYS,
}
_LISTS: dict[str, dict[str, str]] = {
    "alignment": {"multiple_of": _INT, "ops": _STRS, "exempt": _STRS, "applies_to": _STR},
    "shape_condition": {"ops": _STRS, "operand": _INT, "dim": _INT, "multiple_of": _INT, "why": _STR},
}
_ENGINE_KEYS = {"kind": _STR, "flops_per_ns": _NUM, "bytes_per_ns": _NUM, "latency_ns": _NUM, "ops": _STRS}
_KIND_KEYS = {"flops_per_ns": _NUM, "bytes_per_ns": _NUM, "latency_ns": _NUM}
_OP_KINDS = tuple(c.value for c in OpCategory)
_REQUIRED = {("target", "name"), ("target", "device"), ("compute", "dtypes")}
_DTYPES = {
    "float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool",
    "float8_e4m3fn", "float8_e5m2", "complex64",
}
_KEY_PARTS = {"op", "shapes", "strides", "dtypes"}


def _type_ok(value: Any, kind: str) -> bool:
    if kind == _STR:
        return isinstance(value, str)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == _BOOL:
        return isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_keys(where: str, table: Any, spec: dict[str, str], problems: list[str]) -> dict[str, Any]:
    if not isinstance(table, dict):
        problems.append(f"[{where}] must be a table")
        return {}
    for key, value in table.items():
        if key not in spec:
            problems.append(f"unknown key {where}.{key} (allowed: {', '.join(sorted(spec))})")
        elif not _type_ok(value, spec[key]):
            problems.append(f"{where}.{key} must be a {spec[key]}, got {type(value).__name__} {value!r}")
    return {k: v for k, v in table.items() if k in spec and _type_ok(v, spec[k])}


def parse_target(raw: dict[str, Any], path: str) -> Target:
    """Validate a parsed TOML document; raise one TargetError listing every problem."""
    problems: list[str] = []
    known = set(_SECTIONS) | set(_LISTS) | {"engines", "sources"}
    for key in raw:
        if key not in known:
            problems.append(f"unknown key {key!r} (allowed sections: {', '.join(sorted(known))})")
    sec = {name: _check_keys(name, raw.get(name, {}), spec, problems) for name, spec in _SECTIONS.items()}
    for section, key in sorted(_REQUIRED):
        if key not in sec[section]:
            problems.append(f"missing required key {section}.{key}")
    for key in ("dtypes", "index_dtypes"):
        for d in sec["compute"].get(key, []):
            if d not in _DTYPES:
                problems.append(f"compute.{key}: unknown dtype {d!r} (known: {', '.join(sorted(_DTYPES))})")
    copies = {}
    for key in ("dtype_change", "strided_write"):
        value = sec["copies"].get(key, "device")
        try:
            copies[key] = CopyWhere(value)
        except ValueError:
            problems.append(f"copies.{key} must be \"device\" or \"host\", got {value!r}")
            copies[key] = CopyWhere.DEVICE
    cache_key = tuple(sec["cache"].get("key", ["op", "shapes", "strides", "dtypes"]))
    for part in cache_key:
        if part not in _KEY_PARTS:
            problems.append(f"cache.key: unknown part {part!r} (allowed: {', '.join(sorted(_KEY_PARTS))})")
    alignment, conditions = [], []
    for i, entry in enumerate(_list_of_tables(raw, "alignment", problems)):
        e = _check_keys(f"alignment[{i}]", entry, _LISTS["alignment"], problems)
        if "multiple_of" not in e or e.get("multiple_of", 0) <= 0:
            problems.append(f"alignment[{i}].multiple_of must be a positive integer")
            continue
        if e.get("applies_to", "slice") not in ("slice", "any"):
            problems.append(f"alignment[{i}].applies_to must be \"slice\" or \"any\"")
            continue
        alignment.append(AlignmentRule(e["multiple_of"], tuple(e.get("ops", ["*"])), tuple(e.get("exempt", [])),
                                       e.get("applies_to", "slice")))
    for i, entry in enumerate(_list_of_tables(raw, "shape_condition", problems)):
        e = _check_keys(f"shape_condition[{i}]", entry, _LISTS["shape_condition"], problems)
        missing = [k for k in ("ops", "operand", "dim", "multiple_of") if k not in e]
        if missing:
            problems.append(f"shape_condition[{i}] is missing {', '.join(missing)}")
            continue
        if e["multiple_of"] <= 0:
            problems.append(f"shape_condition[{i}].multiple_of must be positive")
            continue
        why = e.get("why", f"dimension {e['dim']} of operand {e['operand']} not a multiple of {e['multiple_of']}")
        conditions.append(ShapeCondition(tuple(e["ops"]), e["operand"], e["dim"], e["multiple_of"], why))
    engines = _engines(raw.get("engines", {}), problems)
    static_shapes = parse_static_shapes(sec["static_shapes"], problems) if "static_shapes" in raw else None
    cost_sources = parse_sources(raw.get("sources"), {e.name: [k for k, _ in e.kinds] for e in engines}, problems)
    if problems:
        raise TargetError(path, problems)
    t, c, cost = sec["target"], sec["compute"], sec["cost"]
    return Target(
        name=t["name"],
        path=path,
        description=t.get("description", ""),
        device=t["device"],
        dtypes=frozenset(c["dtypes"]),
        index_dtypes=frozenset(c.get("index_dtypes", [])),
        index_ops=tuple(c.get("index_ops", [])),
        no_kernel=tuple(sec["kernels"].get("missing", [])),
        alignment=tuple(alignment),
        shape_conditions=tuple(conditions),
        dtype_change=copies["dtype_change"],
        strided_write=copies["strided_write"],
        programs=sec["cache"].get("programs", True),
        cache_key=cache_key,
        broadcast_views_miss=sec["cache"].get("broadcast_views_miss", False),
        dispatch_ns=float(cost.get("dispatch_ns", 0.0)),
        compile_ns=float(cost.get("compile_ns", 0.0)),
        host_flops_per_ns=float(cost.get("host_flops_per_ns", 10.0)),
        engines=engines,
        static_shapes=static_shapes,
        cost_sources=cost_sources,
        graph_fallbacks=sec["compiled"].get("fallbacks", False),
        sync_ns=float(cost.get("sync_ns", 0.0)),
    )


def _list_of_tables(raw: dict[str, Any], key: str, problems: list[str]) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        problems.append(f"{key} must be an array of tables ([[{key}]])")
        return []
    return value


def _engines(raw: Any, problems: list[str]) -> tuple[Engine, ...]:
    if not isinstance(raw, dict):
        problems.append("[engines] must be a table of engine tables")
        return ()
    out = []
    for name, entry in raw.items():
        kinds_raw = entry.get("kinds", {}) if isinstance(entry, dict) else {}
        if isinstance(entry, dict):
            entry = {k: v for k, v in entry.items() if k != "kinds"}
        e = _check_keys(f"engines.{name}", entry, _ENGINE_KEYS, problems)
        try:
            kind = EngineKind(e.get("kind", ""))
        except ValueError:
            problems.append(f"engines.{name}.kind must be one of {', '.join(k.value for k in EngineKind)}")
            continue
        engine = Engine(name, kind, float(e.get("flops_per_ns", 0)), float(e.get("bytes_per_ns", 0)),
                        float(e.get("latency_ns", 0)), tuple(e.get("ops", [])))
        out.append(dataclasses.replace(engine, kinds=_kinds(name, kinds_raw, engine, problems)))
    return tuple(out)


def _kinds(engine_name: str, raw: Any, engine: Engine, problems: list[str]) -> tuple[tuple[str, KindFigures], ...]:
    """[engines.NAME.kinds.KIND] tables: per operator kind, figures replacing the engine's (missing: the engine's)."""
    if not isinstance(raw, dict):
        problems.append(f"engines.{engine_name}.kinds must be a table of operator kinds ({', '.join(_OP_KINDS)})")
        return ()
    out = []
    for kind, table in raw.items():
        if kind not in _OP_KINDS:
            problems.append(f"engines.{engine_name}.kinds: unknown operator kind {kind!r} (known: {', '.join(_OP_KINDS)})")
            continue
        e = _check_keys(f"engines.{engine_name}.kinds.{kind}", table, _KIND_KEYS, problems)
        out.append((kind, KindFigures(float(e.get("latency_ns", engine.latency_ns)),
                                      float(e.get("flops_per_ns", engine.flops_per_ns)),
                                      float(e.get("bytes_per_ns", engine.bytes_per_ns)))))
    return tuple(out)


def builtin_targets() -> list[str]:
    """Names of the targets shipped with portscope."""
    folder = resources.files(__name__)
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def load_target(name_or_path: str | Path | Target) -> Target:
    """A target by built-in name (`fp16-npu`) or by path to a TOML file."""
    if isinstance(name_or_path, Target):
        return name_or_path
    text_name = str(name_or_path)
    if text_name in _builtin_names():
        return _builtin(text_name)
    path = Path(text_name)
    if not path.exists():
        raise TargetError(text_name, f"no such target file, and not a built-in target ({', '.join(builtin_targets())})")
    try:
        stat = path.stat()
        return _from_file(str(path.resolve()), stat.st_mtime_ns, stat.st_size, str(path))
    except OSError as exc:
        raise TargetError(path, f"cannot read: {exc}") from None


@functools.cache
def _builtin_names() -> frozenset[str]:
    return frozenset(builtin_targets())


@functools.cache
def _builtin(name: str) -> Target:
    resource = resources.files(__name__) / f"{name}.toml"
    return _load(resource.read_text(encoding="utf-8"), f"{name} ({resource})")


@functools.lru_cache(maxsize=32)
def _from_file(resolved: str, mtime_ns: int, size: int, shown: str) -> Target:
    """A target file, parsed once per (path, modification time, size)."""
    try:
        text = Path(resolved).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetError(shown, f"cannot read: {exc}") from None
    return _load(text, shown)


def _load(text: str, path: str) -> Target:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(path, f"not valid TOML: {exc}") from None
    return parse_target(raw, path)

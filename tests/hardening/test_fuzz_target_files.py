"""Fuzz target files: every TOML text loads or raises TargetError, nothing else; a document the schema refuses
raises one TargetError that names each wrong key, value and table (the schema written out by hand below)."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from portscope.ingest.errors import TargetError

from ._fuzzing import FUZZ, check, mutated
from .fuzz_targets import seed

SEED = seed("target")
SEED_DOC = tomllib.loads(SEED.decode())
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**66), 2**66) | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def test_the_seed_loads() -> None:
    assert check("target", SEED) == "ok"


@FUZZ
@given(mutated(SEED))
def test_mutated_target_files(data: bytes) -> None:
    check("target", data)


# The schema of a target file's tables, written out by hand (profiler/targets/README.md): (table, key) -> the type
# parse_target names when a value is not of it. Every table of the seed is here.
KEY_TYPES = {
    ("target", "name"): "string", ("target", "description"): "string", ("target", "device"): "string",
    ("compute", "dtypes"): "list of strings", ("compute", "index_dtypes"): "list of strings",
    ("compute", "index_ops"): "list of strings", ("kernels", "missing"): "list of strings",
    ("copies", "dtype_change"): "string", ("copies", "strided_write"): "string",
    ("cache", "programs"): "boolean", ("cache", "key"): "list of strings", ("cache", "broadcast_views_miss"): "boolean",
    ("cost", "dispatch_ns"): "number", ("cost", "compile_ns"): "number", ("cost", "host_flops_per_ns"): "number",
    ("alignment[0]", "multiple_of"): "integer", ("alignment[0]", "applies_to"): "string",
    ("alignment[0]", "ops"): "list of strings", ("shape_condition[0]", "operand"): "integer",
    ("shape_condition[0]", "why"): "string", ("engines.matrix", "flops_per_ns"): "number",
    ("engines.vector", "latency_ns"): "number", ("engines.matrix", "ops"): "list of strings",
}
TEXT = st.text(max_size=10)
WRONG = {  # values of every other type
    "string": st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.lists(TEXT, max_size=2),
    "list of strings": st.booleans() | st.integers() | TEXT | st.lists(st.integers(), min_size=1, max_size=2),
    "boolean": st.integers() | TEXT | st.floats(allow_nan=False) | st.lists(TEXT, max_size=2),
    "number": st.booleans() | TEXT | st.lists(st.integers(), max_size=2) | st.dictionaries(TEXT, st.integers(), max_size=1),
    "integer": st.booleans() | TEXT | st.floats(allow_nan=False) | st.lists(st.integers(), max_size=2),
}  # fmt: skip


def _copy() -> dict:
    return {k: ({n: (dict(e) if isinstance(e, dict) else e) for n, e in v.items()} if isinstance(v, dict)
                else [dict(e) for e in v]) for k, v in SEED_DOC.items()}  # fmt: skip


def _table(doc: dict, where: str) -> dict:
    """The table a KEY_TYPES location names: "cost", "alignment[0]", "engines.matrix"."""
    if where.endswith("[0]"):
        return doc[where[:-3]][0]
    section, _, engine = where.partition(".")
    return doc[section][engine] if engine else doc[section]


def _problems(doc: dict) -> list[str]:
    from portscope.profiler.targets import parse_target

    with pytest.raises(TargetError) as info:
        parse_target(doc, "fuzzed.toml")
    return info.value.problems


@FUZZ
@given(st.data())
def test_a_value_of_the_wrong_type_is_named_with_its_key(data: st.DataObject) -> None:
    """One or more known keys of a real target given values of another type: each is named with its table, its key
    and the type it must have, in one TargetError."""
    doc, wanted = _copy(), []
    for where, key in data.draw(st.lists(st.sampled_from(sorted(KEY_TYPES)), min_size=1, max_size=4, unique=True)):
        kind = KEY_TYPES[(where, key)]
        _table(doc, where)[key] = data.draw(WRONG[kind])
        wanted.append(f"{where}.{key} must be a {kind}, got ")
    problems = _problems(doc)
    assert all(any(p.startswith(w) for p in problems) for w in wanted), (wanted, problems)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(sorted({w for w, _ in KEY_TYPES})), st.text(max_size=8), VALUES),
                min_size=1, max_size=4))
def test_an_unknown_key_is_named_with_its_table(edits: list[tuple[str, str, object]]) -> None:
    """Keys the schema does not have (every name here starts with "x-", which none of its keys does), of any value:
    each is named as unknown, with its table, in one TargetError."""
    doc, wanted = _copy(), []
    for where, key, value in edits:
        _table(doc, where)["x-" + key] = value
        wanted.append(f"unknown key {where}.x-{key} (allowed: ")
    problems = _problems(doc)
    assert all(w in "\n".join(problems) for w in wanted), (wanted, problems)


@pytest.mark.parametrize(("section", "value", "problem"), [
    ("cost", 3, "[cost] must be a table"),
    ("alignment", {"multiple_of": 64}, "alignment must be an array of tables ([[alignment]])"),
    ("engines", ["matrix"], "[engines] must be a table of engine tables"),
    ("colour", {"red": 1}, "unknown key 'colour' (allowed sections: "),
])  # fmt: skip
def test_a_table_of_the_wrong_shape_is_named(section: str, value: object, problem: str) -> None:
    doc = _copy()
    doc[section] = value
    assert any(p.startswith(problem) for p in _problems(doc))

"""Fuzz target files: every TOML text or parsed document loads or raises TargetError, nothing else."""

from __future__ import annotations

import tomllib

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


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(sorted(SEED_DOC)), st.text(max_size=12), VALUES), max_size=4))
def test_mistyped_values_in_a_real_target(edits: list[tuple[str, str, object]]) -> None:
    """Documents TOML can hold but the schema refuses: parse_target must list them as TargetError."""
    from portscope.profiler.targets import parse_target

    doc = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for k, v in SEED_DOC.items()}
    for section, key, value in edits:
        table = doc[section]
        if isinstance(table, dict):
            table[key or "name"] = value
        elif isinstance(table, list) and table and isinstance(table[0], dict):
            table[0] = {**table[0], key or "ops": value}
        else:
            doc[section] = value
    try:
        parse_target(doc, "fuzzed.toml")
    except TargetError:
        pass

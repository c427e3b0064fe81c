"""Fuzz the portscope trace reader: every mutated trace loads or raises TraceFormatError, in bounded time."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ._fuzzing import FUZZ, check, mutated
from .fuzz_targets import seed

SEED = seed("portscope")
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


MEMBERS = _members(SEED)


def _rezip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, payload in members.items():
            zf.writestr(name, payload)
    return out.getvalue()


def test_the_seed_loads() -> None:
    assert check("portscope", SEED) == "ok"


@FUZZ
@given(mutated(SEED))
def test_mutated_bytes_load_or_raise_trace_format_error(data: bytes) -> None:
    check("portscope", data)


@FUZZ
@given(st.sampled_from(sorted(n for n in MEMBERS if n.endswith(".arrow"))), st.data())
def test_a_mutated_arrow_member_is_refused_or_loads(member: str, draw: st.DataObject) -> None:
    """Mutations inside one Arrow IPC member (behind a valid ZIP directory): the Arrow reader's turn."""
    members = dict(MEMBERS)
    members[member] = draw.draw(mutated(MEMBERS[member], max_edits=4))
    check("portscope", _rezip(members))


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["format", "version", "run_info", "tables", "source", "devices", "model", "time_unit"]), JSON_VALUES), max_size=4))
def test_a_mutated_manifest_is_refused_or_loads(edits: list[tuple[str, object]]) -> None:
    manifest = json.loads(MEMBERS["manifest.json"])
    for key, value in edits:
        if key in ("source", "devices", "model", "time_unit") and isinstance(manifest.get("run_info"), dict):
            manifest["run_info"][key] = value
        else:
            manifest[key] = value
    members = dict(MEMBERS, **{"manifest.json": json.dumps(manifest).encode()})
    check("portscope", _rezip(members))


@pytest.mark.parametrize("cut", [0, 1, 4, 22, 100, len(SEED) // 2, len(SEED) - 22, len(SEED) - 1])
def test_every_truncation_is_a_trace_format_error(cut: int) -> None:
    assert check("portscope", SEED[:cut]) == "error"

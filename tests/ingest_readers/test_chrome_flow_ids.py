"""Flow ids that are not int64 (chrome_events.other_key): hashed, not numbered, and paired without a table of every id.

Expected keys are written by hand from the documented key formula.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from portscope.ingest.readers import chrome_events
from portscope.ingest.readers.chrome_events import collect, other_key


def _blake(text: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 2


def test_other_flow_ids_are_hashed_not_numbered() -> None:
    assert other_key("x1") == -(2**62) + _blake(b"sx1")
    assert other_key(2**64) == -(2**62) + _blake(b"i18446744073709551616")
    assert other_key(1.0) == other_key(True) == -(2**62) + _blake(b"i1")  # equal in Python: one key
    assert other_key(1.5) == -(2**62) + _blake(b"f1.5")
    assert other_key("1") != other_key(1.0)  # a string never shares a key with a number
    assert -(2**62) <= other_key("any") < 0


def test_string_flow_ids_pair_without_a_table_of_every_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chrome_events, "_RECENT_IDS", 2)  # the recent ids are forgotten after 2
    events = [{"ph": "s", "name": "f", "cat": "c", "id": fid, "pid": 1, "tid": 1, "ts": n} for n, fid in enumerate("abc")]
    events += [{"ph": "f", "name": "f", "cat": "c", "id": "a", "pid": 1, "tid": 2, "ts": 9, "bp": "e"},
               {"ph": "t", "name": "f", "cat": "c", "id2": {"global": "b"}, "pid": 1, "tid": 2, "ts": 10},
               {"ph": "f", "name": "f", "cat": "c", "id2": {"local": "c"}, "pid": 1, "tid": 2, "ts": 11},
               {"ph": "f", "name": "f", "cat": "c", "id2": {"local": "c"}, "pid": 2, "tid": 2, "ts": 12},
               {"ph": "X", "name": "x", "cat": "c", "pid": 1, "tid": 1, "ts": 0, "dur": 20}]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    ev = collect(path)
    keys = ev.flows.read("key", 0, len(ev.flows)).tolist()
    a, b, c = (-(2**62) + _blake(b"s" + x) for x in (b"a", b"b", b"c"))
    local_c = [-(2**62) + _blake(f"sid2.local {pid} 'c'".encode()) for pid in (1, 2)]
    assert keys == [a, b, c, a, b, *local_c]  # id2.global is the id; id2.local an id of its process only
    assert len(ev.flows.recent_ids) <= 2

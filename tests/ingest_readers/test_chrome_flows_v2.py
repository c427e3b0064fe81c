"""Flow events v2 (Chrome's JSON: a slice names its flow with ``"bind_id"`` and ``"flow_out"`` / ``"flow_in"``):
read as flows between the slices that carry them. Inputs and expected rows written by hand."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from portscope.ingest.readers.chrome_generic import read_chrome

# a string flow id's correlation: 2^62 plus the top 62 bits of the little-endian 64-bit BLAKE2b of "s" + its UTF-8
HEX1 = 2**62 + (int.from_bytes(hashlib.blake2b(b"s0x1", digest_size=8).digest(), "little") >> 2)

EVENTS = [
    {"ph": "X", "name": "Send", "cat": "c", "pid": 1, "tid": 10, "ts": 100, "dur": 50, "bind_id": "0x1", "flow_out": True},
    {"ph": "X", "name": "Inner", "cat": "c", "pid": 1, "tid": 10, "ts": 110, "dur": 5},
    {"ph": "X", "name": "Relay", "cat": "c", "pid": 2, "tid": 20, "ts": 200, "dur": 10, "bind_id": "0x1", "flow_in": True,
     "flow_out": True},
    {"ph": "X", "name": "Recv", "cat": "c", "pid": 1, "tid": 11, "ts": 300, "dur": 5, "bind_id": "0x1", "flow_in": True},
    {"ph": "X", "name": "Lone", "cat": "c", "pid": 1, "tid": 11, "ts": 400, "dur": 1, "bind_id": "0x2"},  # no flag
    {"ph": "X", "name": "Odd", "cat": "c", "pid": 1, "tid": 11, "ts": 410, "dur": 1, "bind_id": [1], "flow_in": True},
    {"ph": "B", "name": "Open", "cat": "c", "pid": 2, "tid": 20, "ts": 500, "bind_id": 7, "flow_out": True},
    {"ph": "E", "pid": 2, "tid": 20, "ts": 510},
    {"ph": "X", "name": "Task", "cat": "c", "pid": 1, "tid": 10, "ts": 600, "dur": 20, "bind_id": 7, "flow_in": True},
    {"ph": "X", "name": "Child", "cat": "c", "pid": 1, "tid": 10, "ts": 600, "dur": 5},  # starts with Task
]


def test_bound_flows_link_the_slices_that_name_them(tmp_path: Path) -> None:
    path = tmp_path / "chrome_v2.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    trace = read_chrome(path)
    rows = [(r["name"], r["start"], r["correlation"]) for r in trace["engine_slices"].to_pylist()]
    assert sorted(rows, key=lambda r: (r[1], r[0])) == [  # t0 = 100 us
        ("Send", 0, HEX1),  # out
        ("Inner", 10_000, None),
        ("Relay", 100_000, HEX1),  # in and out: the flow passes through
        ("Recv", 200_000, HEX1),  # in
        ("Lone", 300_000, None),  # a bind_id without flow_in / flow_out is no flow
        ("Odd", 310_000, None),  # a bind_id that is not a number or string is ignored, the slice kept
        ("Open", 400_000, 7),  # a 'B' slice carries it too
        ("Child", 500_000, None),
        ("Task", 500_000, 7),  # the flow is Task's, not Child's that starts with it
    ]

"""A tiny Kineto trace with [memory] events whose memory figures are worked out by hand in
tests/ingest/test_memory.py; the viewer's browser test shows it too."""

from __future__ import annotations

from kineto_pair import event as ev


def mem(ts: float, nbytes: int, total: int, reserved: int, device: int = 0) -> dict:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Bytes": nbytes, "Total Allocated": total, "Total Reserved": reserved, "Device Type": 1, "Device Id": device,
                     "Addr": 1000 + int(ts)}}  # fmt: skip


# A step of 100 µs: 1000 B were allocated before it (the first event's total minus its bytes). model.py:10's
# aten::empty allocates 500 B (1500), model.py:20's aten::mm 2000 B (3500, the peak), then frees the 500 (3000);
# after the step, a 4000 B allocation (7000) counts in the run but not in the step.
EVENTS = [
    ev("user_annotation", "ProfilerStep#1", 0, 100),
    ev("python_function", "model.py(10): forward", 5, 10), ev("python_function", "model.py(20): forward", 30, 40),
    ev("cpu_op", "aten::empty", 6, 5), mem(7, 500, 1500, 2048),
    ev("cpu_op", "aten::mm", 31, 20), mem(35, 2000, 3500, 4096),
    mem(60, -500, 3000, 4096),
    ev("cpu_op", "aten::empty", 150, 5), mem(151, 4000, 7000, 8192),
]

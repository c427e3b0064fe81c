"""Hypothesis helpers shared by the fuzz tests: settings, byte mutations, saving failing inputs."""

from __future__ import annotations

import hashlib
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from .fuzz_targets import REGRESSIONS, feed

# A short budget in CI; PORTSCOPE_FUZZ_EXAMPLES=5000 for a longer local run. CI's examples are the same each run
# (derandomized: a landing fails on a change, never on luck); PORTSCOPE_FUZZ_RANDOM=1 draws new ones.
EXAMPLES = int(os.environ.get("PORTSCOPE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not os.environ.get("PORTSCOPE_FUZZ_RANDOM"),
    deadline=None,  # fuzz_targets.time_bound enforces the per-input bound instead
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def check(reader: str, data: bytes) -> str:
    """feed(), saving an input that fails to tests/fuzz_regressions/<reader>/ when PORTSCOPE_FUZZ_SAVE=1."""
    try:
        return feed(reader, data)
    except BaseException:
        if os.environ.get("PORTSCOPE_FUZZ_SAVE"):
            folder = REGRESSIONS / reader
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"hyp-{hashlib.sha1(data).hexdigest()[:12]}").write_bytes(data)
        raise


@st.composite
def mutated(draw: st.DrawFn, original: bytes, *, max_edits: int = 8) -> bytes:
    """`original` with a few bytes overwritten, a span deleted or duplicated, and maybe cut short."""
    data = bytearray(original)
    for _ in range(draw(st.integers(0, max_edits))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["set", "flip", "delete", "duplicate", "insert"]))
        if op == "set":
            data[at] = draw(st.integers(0, 255))
        elif op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "duplicate":
            span = data[at : at + draw(st.integers(1, 64))]
            data[at:at] = span
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
    if draw(st.booleans()) and data:
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)

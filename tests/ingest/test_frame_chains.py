"""Distinct call chains of Python frames (`frame_chains`), on a call forest written by hand."""

from __future__ import annotations

import numpy as np
import pytest

from portscope.ingest import frame_chains as frame_chains_module
from portscope.ingest.frame_chains import frame_chains

# frames by position: (name code, caller position); names a=0 b=1 c=2 d=3
FRAMES = [
    (0, -1),  # 0: a
    (1, 0),  # 1: a > b
    (2, 1),  # 2: a > b > c
    (0, -1),  # 3: a again (another call of the same code)
    (1, 3),  # 4: a > b, the same chain as 1
    (2, 4),  # 5: a > b > c, the same chain as 2
    (3, 4),  # 6: a > b > d
    (2, 0),  # 7: a > c: c again, called from elsewhere
]


@pytest.mark.parametrize("chunk", [1, 2, 1 << 18])  # a level's frames worked on one, two or all at a time
def test_frames_share_a_chain_where_their_names_and_callers_chains_do(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frame_chains_module, "CHUNK", chunk)
    chains = frame_chains(np.array([c for _, c in FRAMES]), np.array([n for n, _ in FRAMES]), 4)
    of = chains.of_frame.tolist()
    assert of[0] == of[3] and of[1] == of[4] and of[2] == of[5]
    assert len(set(of)) == 5  # a; a>b; a>b>c; a>b>d; a>c
    assert [chains.codes(c) for c in of] == [[0], [1, 0], [2, 1, 0], [0], [1, 0], [2, 1, 0], [3, 1, 0], [2, 0]]
    assert chains.codes(-1) == []


def test_no_frames() -> None:
    chains = frame_chains(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 1)
    assert len(chains.of_frame) == len(chains.parent) == 0

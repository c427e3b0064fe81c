"""Distinct call chains of Python frames: a with_stack trace records every call of every frame as its own event (a
generation loop: millions), but the chains of code they form repeat. Each frame is given the id of its chain (its
name and its caller's chain), a level of the call tree at a time, so a call site is worked out once per distinct
chain, not once per frame."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Chains(NamedTuple):
    """Per frame (in the order given): its chain id; per chain id: the chain of its caller (-1: none) and its innermost
    frame's name code."""

    of_frame: np.ndarray
    parent: np.ndarray
    code: np.ndarray

    def codes(self, chain: int) -> list[int]:
        """The name codes of a chain, innermost first."""
        out = []
        while chain >= 0:
            out.append(int(self.code[chain]))
            chain = int(self.parent[chain])
        return out


def frame_chains(caller: np.ndarray, code: np.ndarray) -> Chains:
    """The chains of frames given, per frame, the position of its caller among them (-1: none; the callers form a
    forest) and its name code (>= 0). Two frames share a chain id when their names and their callers' chains are equal,
    all the way out. Vectorized a level of the call tree at a time (a chain's depth is its number of levels)."""
    n = len(caller)
    small = np.int32 if n < 2**31 else np.int64  # positions and chain ids: 4 bytes a frame where they fit
    caller = np.asarray(caller, dtype=small)
    of_frame = np.full(n, -1, dtype=small)
    parents: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    span = int(code.max()) + 1 if n else 1
    by_caller = np.argsort(caller, kind="stable").astype(small)  # frames by caller: each level's callees by search
    callers = caller[by_caller]
    level = np.flatnonzero(caller < 0)
    next_id = 0
    while len(level):
        up = caller[level]
        parent_chain = np.where(up >= 0, of_frame[np.maximum(up, 0)], -1).astype(np.int64)
        key = (parent_chain + 1) * span + np.asarray(code[level], dtype=np.int64)
        distinct, inverse = np.unique(key, return_inverse=True)
        of_frame[level] = next_id + inverse.reshape(-1)
        parents.append(distinct // span - 1)
        codes.append(distinct % span)
        next_id += len(distinct)
        lo = np.searchsorted(callers, level, "left")
        count = np.searchsorted(callers, level, "right") - lo
        total = int(count.sum())
        if not total:
            break
        start = np.repeat(lo - np.cumsum(count) + count, count)  # each callee's place among the sorted frames
        level = np.sort(by_caller[start + np.arange(total)]).astype(np.int64)
    empty = np.zeros(0, dtype=np.int64)
    return Chains(of_frame, np.concatenate(parents or [empty]), np.concatenate(codes or [empty]))


__all__ = ["Chains", "frame_chains"]

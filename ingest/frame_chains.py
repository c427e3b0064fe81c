"""Distinct call chains of Python frames: a with_stack trace records every call of every frame as its own event (a
generation loop: millions), but the chains of code they form repeat. Each frame is given the id of its chain (its
name and its caller's chain), a level of the call tree at a time, so a call site is worked out once per distinct
chain, not once per frame."""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np

from .events import rows_where


class Codes(Protocol):
    """The frames' name codes, read where asked (`code[frames]`): an array, or a view that gathers them then."""

    def __getitem__(self, frames: np.ndarray) -> np.ndarray: ...


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


CHUNK = 1 << 18  # frames of a level worked on at a time: what a level's keys and callees hold is bounded


def frame_chains(caller: np.ndarray, code: Codes, span: int) -> Chains:
    """The chains of frames given, per frame, the position of its caller among them (-1: none; the callers form a
    forest) and its name code (0 <= code < span). Two frames share a chain id when their names and their callers'
    chains are equal, all the way out. Vectorized a level of the call tree at a time (a chain's depth is its number
    of levels), `CHUNK` frames of a level at a time; the codes are read where needed. Held at once: ~20 bytes a
    frame (the order by caller as the sort gives it, 8 bytes, is not copied to 4), and a chunk's work."""
    n = len(caller)
    small = np.int32 if n < 2**31 else np.int64  # positions and chain ids: 4 bytes a frame where they fit
    caller = np.asarray(caller, dtype=small)
    of_frame = np.full(n, -1, dtype=small)
    parents: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    by_caller = np.argsort(caller, kind="stable")  # frames by caller: each level's callees by search
    callers = caller[by_caller]

    def keys(frames: np.ndarray) -> np.ndarray:  # (the caller's chain + 1) * span + the frame's own code
        up = caller[frames]
        parent_chain = np.where(up >= 0, of_frame[np.maximum(up, 0)], -1).astype(np.int64)
        return (parent_chain + 1) * span + np.asarray(code[frames], dtype=np.int64)

    def callees(frames: np.ndarray) -> np.ndarray:  # the frames these frames called
        lo = np.searchsorted(callers, frames, "left")
        count = np.searchsorted(callers, frames, "right") - lo
        start = np.repeat(lo - np.cumsum(count) + count, count)  # each callee's place among the sorted frames
        return by_caller[start + np.arange(len(start))].astype(small)

    level = rows_where(caller < 0).astype(small)
    next_id = 0
    while len(level):
        chunks = [level[lo : lo + CHUNK] for lo in range(0, len(level), CHUNK)]
        distinct = np.unique(np.concatenate([np.unique(keys(c)) for c in chunks]))
        for c in chunks:  # ids in order of the level's distinct keys, however it is cut
            of_frame[c] = next_id + np.searchsorted(distinct, keys(c))
        parents.append(distinct // span - 1)
        codes.append(distinct % span)
        next_id += len(distinct)
        level = np.concatenate([callees(c) for c in chunks])
        level.sort()
    empty = np.zeros(0, dtype=np.int64)
    return Chains(of_frame, np.concatenate(parents or [empty]), np.concatenate(codes or [empty]))


__all__ = ["Chains", "Codes", "frame_chains"]

"""Flows of one slice: the other slices of its operator (launch -> kernels, dispatch -> compute -> copies),
and the slice whose end released it when it says what it waited on.

A pure query on a timeline's slices table; returns (source row, target row, label) edges.
"The slice that released it" follows the critical-path rule of ingest/schedule_summary.py:
the latest-ending slice, on an engine of a kind that can release that cause, ending no
later than the slice starts.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columns import memory_slices
from .schedule_summary import RELEASED_BY
from .viewport import dictionary_codes

MAX_FLOWS = 50


@dataclasses.dataclass(frozen=True)
class Flow:
    """An arrow from the end of slice `source` to the start of slice `target` (rows of the slices table)."""

    source: int
    target: int
    label: str


def slice_flows(slices: pa.Table, row: int) -> list[Flow]:
    """Flows into and out of slice `row`: its operator's slices in time order (a chain), and what released it."""
    out: list[Flow] = []
    start = slices.column("start").to_numpy()
    end = start + slices.column("dur").to_numpy()
    op_id = slices.column("op_id")[row].as_py() if "op_id" in slices.column_names else None
    memory = memory_slices(slices.column("engine"))  # levels of memory, not work: never in a flow
    if memory[row]:
        return out
    if op_id is not None:
        same = np.flatnonzero(pc.fill_null(pc.equal(slices.column("op_id"), op_id), False).to_numpy(zero_copy_only=False)
                              & ~memory)
        if len(same) > 1:
            same = same[np.lexsort((same, start[same]))]
            k = int(np.flatnonzero(same == row)[0])  # the chain around the slice: MAX_FLOWS edges at most
            lo = max(0, min(k - MAX_FLOWS // 2, len(same) - 1 - MAX_FLOWS))
            chain = same[lo:lo + MAX_FLOWS + 1]
            out += [Flow(int(a), int(b), "same operator") for a, b in zip(chain[:-1], chain[1:], strict=True)]
    waited = slices.column("waited_on")[row].as_py() if "waited_on" in slices.column_names else None
    kinds = RELEASED_BY.get(str(waited)) if waited else None
    if kinds:
        codes, names = dictionary_codes(slices.column("engine_kind"))  # one test per engine kind, not per slice
        candidate = np.isin(codes, [i for i, name in enumerate(names) if name in kinds])
        candidate &= end <= start[row]
        candidate[row] = False
        if candidate.any():
            rows = np.flatnonzero(candidate)
            source = int(rows[np.argmax(end[rows])])
            if all(f.source != source or f.target != row for f in out):
                out.append(Flow(source, row, f"waited on {waited}"))
    return out

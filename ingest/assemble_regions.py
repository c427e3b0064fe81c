"""The regions table and the operators' call sites of an assembled run (`assemble.Assembly` inherits `RegionTables`).

Regions: the root (none where the file is a list of regions), then one per annotation, nested as the linker found
them (`link.Links`), with what the file says of each (`events.RegionFacts`), else the mode the rules give
(`rules_compile.compiled_regions`) and the peak the memory events give (`rules_memory.memory_peaks`). Call sites: from
the Python frames open at each operator's start, by distinct chain of code (`frame_chains`), their stacks interned.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from .arrow_values import array
from .callsites import relative_frames, site_of_frames
from .columns import table_of
from .events import KIND_CODES, NONE, EventKind, RegionFacts, rows_where
from .frame_chains import frame_chains
from .rules_compile import compiled_regions
from .rules_memory import memory_peaks
from .schema import Mode
from .spill import DiskColumn

_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")


class RegionTables:
    """The regions table and the call sites of the operators; reads the assembly's events (`a`, `links`, `texts`,
    `facts`...) and sets `region_codes` (`regions`) and `site_texts`, `site_stacks`, `op_site` (`call_sites`)."""

    def regions(self) -> pa.Table:
        """The regions table (the root, then one per annotation; no root where the file is a list of regions: the
        annotations alone); sets `region_codes` (the region id from each of `Links.region_times`; an event outside
        every annotation of a run without a root: the first region)."""
        a, links = self.a, self.links
        anns = links.annotations
        rooted = self.t.root_name is not None or not len(anns)
        first = int(rooted)
        by_row = np.argsort(anns, kind="stable")
        sorted_rows = anns[by_row]

        def region_id(rows: np.ndarray) -> np.ndarray:  # of annotation rows (-1, outside all: 0, the root or the first)
            if not len(anns):
                return np.zeros(len(rows), dtype=np.int32)
            at = np.minimum(np.searchsorted(sorted_rows, rows), len(anns) - 1)
            return np.where(rows >= 0, first + by_row[at], 0).astype(np.int32)

        self.region_codes = region_id(links.region_rows)  # per change of the innermost annotation (`Links.region_change`)
        facts = [self.facts[c] if c != NONE else RegionFacts() for c in np.asarray(a["region_facts"][anns]).tolist()]
        starts = [0] * first + a["start_ns"][anns].tolist()
        spans = [max(self.links.end_ns, self.t.end_ns)] * first + a["dur_ns"][anns].tolist()
        peaks = memory_peaks(self.linked, [(s, s + d) for s, d in zip(starts, spans, strict=True)],
                             device_only=self.t.root_device != "cpu")  # fmt: skip
        facts = [RegionFacts(mode=self.t.root_mode)] * first + facts
        ran, compiled = compiled_regions(self.linked)  # a region the file gives no mode: compiled where it ran compiled code
        modes = [f.mode if f.mode is not Mode.UNKNOWN or not c else Mode.COMPILED
                 for f, c in zip(facts, [ran] * first + compiled.tolist(), strict=True)]  # fmt: skip
        peaks = [f.peak_memory_bytes if f.peak_memory_bytes is not None else p for f, p in zip(facts, peaks, strict=True)]
        around = links.annotation_parent
        parent = [None] * first + [p if r >= 0 or rooted else None
                                   for r, p in zip(around.tolist(), region_id(around).tolist(), strict=True)]
        names = [self.t.root_name or "run"] * first + [self.texts[c] or "" for c in a["name"][anns].tolist()]
        n = len(names)
        return table_of("regions", {
            "region_id": np.arange(n, dtype=np.int32), "parent_id": array(parent, pa.int32()), "name": names,
            "start_ns": starts, "dur_ns": [d if f.timed else 0 for d, f in zip(spans, facts, strict=True)],
            "mode": [m.value for m in modes], "phase": [f.phase.value for f in facts],
            "device": [self.t.root_device] * n, "peak_memory_bytes": array(peaks, pa.int64()),
            "tags": [f.tags for f in facts]})  # fmt: skip

    def call_sites(self) -> None:
        """Per operator row, its call site (an index into `site_texts`, the last entry: none) from the Python frames
        open at its start; stacks interned."""
        if self.links.frame.strides == (0,):  # no Python frames: no call site
            self.site_texts, self.site_stacks = [None], np.full(1, -1, dtype=np.int64)
            self.op_site = np.broadcast_to(np.int32(0), (len(self.a["kind"]),))
            return
        python = rows_where(self.a["kind"] == KIND_CODES[EventKind.PYTHON])
        up = np.asarray(self.links.frame_parent[python])
        for lo in range(0, len(up), self.slice_rows):  # the caller's place among them, in place (no 8-byte search whole)
            part = up[lo : lo + self.slice_rows]
            part[:] = np.where(part >= 0, np.searchsorted(python, part), -1)
        chains = frame_chains(up, _ValuesAt(self.a["name"], python), len(self.texts))
        del up
        frames = np.asarray(self.links.frame[self.op_rows])  # each operator's innermost frame (-1: none)
        chain = np.empty(len(frames), dtype=chains.of_frame.dtype)
        for lo in range(0, len(frames), self.slice_rows):  # each operator's chain (-1: none), a slice at a time
            f = frames[lo : lo + self.slice_rows]
            at = np.minimum(np.searchsorted(python, f), len(python) - 1)
            chain[lo : lo + self.slice_rows] = np.where(f >= 0, chains.of_frame[at], -1)
        del python
        chains = chains._replace(of_frame=chains.of_frame[:0])  # what is left to read: the chains' codes
        used = np.flatnonzero(np.bincount(chain + 1, minlength=len(chains.parent) + 1)) - 1  # -1 first: no frame
        index = np.zeros(len(chains.parent) + 1, dtype=np.int32)
        index[used + 1] = np.arange(len(used), dtype=np.int32)
        index = index[chain + 1]  # each operator's place among the chains used
        first = np.full(len(used), np.iinfo(frames.dtype).max, dtype=frames.dtype)
        np.minimum.at(first, index, frames)  # the chains in order of their first innermost frame (file order)
        del frames, chain
        order = np.argsort(first, kind="stable")
        place = np.empty(len(used), dtype=np.int64)
        place[order] = np.arange(len(used))
        sites: list[str | None] = []
        stack_ids: list[int] = []
        parsed: dict[int, tuple[str, int, str] | None] = {}
        for c in used[order].tolist():
            frame_chain = []
            for code in chains.codes(c):
                if code not in parsed:
                    m = _FRAME.match(self.texts[code] or "")
                    parsed[code] = (m.group(1), int(m.group(2)), m.group(3)) if m else None
                if parsed[code] is not None:
                    frame_chain.append(parsed[code])
            sites.append(site_of_frames(frame_chain) if frame_chain else None)
            stack_ids.append(self.stacks.intern(relative_frames(frame_chain)) if frame_chain else -1)
        self.site_texts = [*sites, None]
        self.site_stacks = np.asarray([*stack_ids, -1], dtype=np.int64)
        if len(used) <= 1:  # no frames, or one chain for all: no per-row column
            self.op_site = np.broadcast_to(np.int32(0 if len(used) else len(sites)), (len(self.a["kind"]),))
            return
        self.op_site = np.full(len(self.a["kind"]), len(sites), dtype=np.int32)  # event row -> site index
        self.op_site[self.op_rows] = place[index]


class _ValuesAt:
    """A column's values at some rows, gathered where asked (`[at]`: at rows[at]) rather than whole."""

    def __init__(self, values: np.ndarray | DiskColumn, rows: np.ndarray) -> None:
        self.values, self.rows = values, rows

    def __getitem__(self, at: np.ndarray) -> np.ndarray:
        return np.asarray(self.values[self.rows[at]])



__all__ = ["RegionTables"]

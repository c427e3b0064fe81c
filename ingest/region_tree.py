"""The nesting of a trace's regions: ids by name, a region's subtree, depths, the top level.

A leaf of ingest: summaries (summary.py) and the by-line tables (lines.py) both walk the tree.
A region's figures include its nested regions', so run totals sum the top level only.
"""

from __future__ import annotations

from .trace import Trace

__all__ = ["descendants", "region_depths", "region_ids", "top_level_ids"]


def region_ids(trace: Trace, name: str | None = None) -> list[int]:
    """Ids of regions named `name` (all regions when None), in file order."""
    regions = trace["regions"]
    ids = regions.column("region_id").to_pylist()
    if name is None:
        return ids
    names = regions.column("name").to_pylist()
    return [i for i, n in zip(ids, names, strict=True) if n == name]


def descendants(trace: Trace, region_id: int) -> list[int]:
    """The region and every region nested inside it."""
    regions = trace["regions"]
    parents = dict(zip(regions.column("region_id").to_pylist(), regions.column("parent_id").to_pylist(), strict=True))
    children: dict[int, list[int]] = {}
    for rid, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(rid)
    out, todo = [], [region_id]
    while todo:
        rid = todo.pop()
        out.append(rid)
        todo.extend(children.get(rid, []))
    return out


def region_depths(trace: Trace) -> dict[int, int]:
    """Nesting depth of every region (0: top level; a region's figures include its nested regions',
    so run totals sum depth-0 regions only)."""
    regions = trace["regions"]
    parents = dict(zip(regions.column("region_id").to_pylist(), regions.column("parent_id").to_pylist(), strict=True))
    depths: dict[int, int] = {}
    for rid in parents:
        chain, cur = [], rid
        while cur is not None and cur not in depths and cur not in chain:
            chain.append(cur)
            cur = parents.get(cur)
        base = depths.get(cur, -1) if cur is not None else -1
        for offset, r in enumerate(reversed(chain)):
            depths[r] = base + 1 + offset
    return depths


def top_level_ids(trace: Trace) -> list[int]:
    """Ids of the regions nested in no other region, in file order: what run totals sum."""
    regions = trace["regions"]
    return [r for r, p in zip(regions.column("region_id").to_pylist(), regions.column("parent_id").to_pylist(),
                              strict=True) if p is None]

"""The linker's nesting by time (`link_nesting.enclosing`) on a few hand-placed spans, sorted in memory or by DuckDB."""

from __future__ import annotations

import numpy as np
import pytest

from portscope.ingest import link_nesting

# row: (group, start, dur, rank, container, query)
EVENTS = [
    (0, 0, 100, 0, True, True),  # 0 A
    (0, 10, 40, 0, True, True),  # 1 B, inside A
    (0, 20, 10, 0, True, True),  # 2 C: inside 9 (B's twin, ranked after it: the innermost of the two)
    (0, 60, 10, 0, True, True),  # 3 D: B and 9 ended at 50, inside A
    (0, 100, 10, 0, True, True),  # 4 E starts as A ends: in none
    (1, 5, 195, 0, True, True),  # 5 F, another group: A does not hold it
    (1, 5, 15, 0, True, True),  # 6 G starts with F, shorter: inside F
    (1, 15, 1, 0, False, True),  # 7 H, asked only: inside G
    (0, 25, 0, 0, False, True),  # 8 an instant inside C
    (0, 10, 40, 1, True, True),  # 9 B's twin of a later rank: inside B
    (0, 65, 1, 0, False, False),  # 10 neither asked nor a container: -1
]
EXPECTED = [-1, 0, 9, 0, -1, -1, 5, 6, 2, 1, -1]


@pytest.mark.parametrize(("sort_rows", "chunk_rows"), [(1 << 30, 1 << 20), (1 << 30, 2), (0, 1 << 20), (0, 2), (0, 1)],
                         ids=["numpy", "numpy-chunks-of-2", "duckdb", "duckdb-chunks-of-2", "duckdb-chunks-of-1"])
def test_each_row_gets_its_innermost_open_container(sort_rows: int, chunk_rows: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_nesting, "SORT_ROWS", sort_rows)
    monkeypatch.setattr(link_nesting, "CHUNK_ROWS", chunk_rows)
    group, start, dur, rank, container, query = (np.array(c) for c in zip(*EVENTS, strict=True))
    found = link_nesting.enclosing(group, start.astype(np.int64), dur.astype(np.int64), rank.astype(np.int8), container, query)
    assert found.tolist() == EXPECTED

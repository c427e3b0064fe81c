"""grouped_signals: signal rows summed per distinct value tuple, in first-seen order (figures by hand)."""

from __future__ import annotations

import pyarrow as pa

from portscope.ingest.summary import grouped_signals


def _dict(values: list[str | None]) -> pa.Array:
    return pa.array(values, pa.string()).dictionary_encode()


def test_groups_sum_counts_bytes_and_rows_in_first_seen_order() -> None:
    # two chunks with different dictionaries, a null operator, and a plain (not dictionary) string column
    first = pa.table({"kind": _dict(["sync", "transfer/d2h", "sync"]), "op_name": _dict(["aten::item", "aten::_to_copy", "aten::item"]),
                      "site": pa.array(["a.py:1", "b.py:2", "a.py:1"]), "count": [1, 2, 3], "bytes": [0, 64, 0]})
    second = pa.table({"kind": _dict(["transfer/d2h", "sync", "sync"]), "op_name": _dict(["aten::_to_copy", None, "aten::item"]),
                       "site": pa.array(["b.py:2", "a.py:1", "a.py:9"]), "count": [4, 5, 6], "bytes": [128, 0, 0]})
    table = pa.Table.from_batches([*first.to_batches(), *second.to_batches()])
    assert table.column("kind").num_chunks == 2
    (kinds, ops, sites), counts, nbytes, rows = grouped_signals(table, ["kind", "op_name", "site"])
    assert list(zip(kinds, ops, sites, counts, nbytes, rows, strict=True)) == [
        ("sync", "aten::item", "a.py:1", 1 + 3, 0, 2),
        ("transfer/d2h", "aten::_to_copy", "b.py:2", 2 + 4, 64 + 128, 2),
        ("sync", None, "a.py:1", 5, 0, 1),
        ("sync", "aten::item", "a.py:9", 6, 0, 1),
    ]


def test_an_empty_table_has_no_groups() -> None:
    table = pa.table({"kind": _dict([]), "count": pa.array([], pa.int64()), "bytes": pa.array([], pa.int64())})
    assert grouped_signals(table, ["kind"]) == ([[]], [], [], [])

"""Big tables of a reader given as slices, made as they are written (`Trace.slices`), or gathered whole (`finish`).

What is left of the Chrome readers' bounded-memory tables: the readers of Chrome JSON now translate into events
and `assemble` writes their tables; the torch_npu ``kernel_details.csv`` reader still makes its own, SLICE_ROWS
rows a record batch.
"""

from __future__ import annotations

import pyarrow as pa

from ..schema import REFERENCES
from ..trace import TableSlices, Trace

SLICE_ROWS = 1 << 20  # rows per record batch made (tests make it tiny)


def finish(trace: Trace, tables: dict[str, TableSlices], *, sliced: bool) -> Trace:
    """The trace with its big tables as slices (written one slice at a time), or gathered whole (one chunk each)."""
    for name, rows in tables.items():
        if trace.tables.get(name) is not None and trace.tables[name].num_rows:
            raise RuntimeError(f"table {name!r} has rows already: the slices would replace them")
        if sliced:
            trace.tables.pop(name, None)
            trace.slices[name] = rows
        else:
            table = pa.Table.from_batches(list(rows.batches()), schema=rows.table_schema(name))
            trace.tables[name] = table.combine_chunks()
    if sliced:  # a whole table whose rows point into a sliced one is given as slices too: checked once that one is written
        for (source, _), (target, _) in REFERENCES.items():
            if target in trace.slices and source not in trace.slices and trace.tables[source].num_rows:
                table = trace.tables.pop(source)
                trace.slices[source] = TableSlices(table.num_rows, lambda table=table: iter(table.to_batches()))
    return trace


__all__ = ["SLICE_ROWS", "finish"]

"""What a big assembly keeps in temporary files while it writes: per-event columns parked (`ParkedColumns`, read back
a slice at a time), a column moved to a file (`to_file`), a table made slice by slice into an Arrow file
(`in_file`), and the distinct values of a column read a slice at a time (`distinct`)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from .spill import DiskColumn, release_memory
from .trace import TableSlices


class ParkedColumns:
    """The per-event columns of the assembly (`assemble.Assembly` inherits it), some moved to files (`park`) once
    what reads them whole is done: `column` reads them at rows, wherever they are."""

    a: dict[str, np.ndarray]  # the per-event columns (None where parked)
    parked: dict[str, DiskColumn]  # the parked ones, by name
    slice_rows: int  # rows read or written at a time (assemble.SLICE_ROWS when the assembly began)

    def park(self, columns: tuple[str, ...]) -> None:
        """Move these per-event columns to temporary files (a trace of more than `slice_rows` events): the sliced
        tables read them back a slice at a time (`column`), so what is resident while they are written is a slice."""
        if len(self.a["kind"]) <= self.slice_rows:
            return
        for c in columns:
            values = self.a[c]
            if not isinstance(values, np.ndarray) or values.strides == (0,):  # a constant, or kept sparse: small
                continue
            self.parked[c] = to_file(values, self.slice_rows)
            self.a[c] = None  # type: ignore[assignment]
        release_memory()

    def column(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Values of a per-event column at sorted event rows (read from its file where parked)."""
        disk = self.parked.get(name)
        if disk is None:
            return self.a[name][rows]
        if not len(rows):
            return np.zeros(0, dtype=disk.dtype)
        if len(rows) > 1 and (rows[1:] < rows[:-1]).any():  # not in order: gathered a window at a time
            return disk.take(rows)
        lo = int(rows[0])
        return disk.read(lo, int(rows[-1]) + 1)[rows - lo]


def in_file(tables: Iterator[pa.Table]) -> TableSlices:
    """A table made slice by slice into a temporary Arrow file (every slice sharing its dictionaries), read back a
    slice a batch as it is written."""
    file = tempfile.TemporaryFile(prefix="portscope-table-")  # noqa: SIM115 (lives as long as the slices)
    writer, rows, table_schema = None, 0, None
    for table in tables:
        if writer is None:
            table_schema = table.schema
            writer = pa.ipc.new_file(pa.PythonFile(file, mode="w"), table_schema)
        for batch in table.to_batches():
            writer.write_batch(batch)
        rows += table.num_rows
        del table
        release_memory()
    assert writer is not None and table_schema is not None, "a table of no slice"
    writer.close()

    def batches() -> Iterator[pa.RecordBatch]:
        file.seek(0)
        reader = pa.ipc.open_file(pa.PythonFile(file, mode="r"))
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)

    return TableSlices(rows, batches, table_schema)


def to_file(values: np.ndarray, step: int) -> DiskColumn:
    """A column moved to a temporary file, `step` values at a time."""
    disk = DiskColumn(values.dtype.char, hold=1 << 16)
    for lo in range(0, len(values), step):
        disk.extend(values[lo : lo + step])
    disk.flush()
    return disk


def distinct(column: np.ndarray | DiskColumn, rows: np.ndarray, step: int) -> np.ndarray:
    """The distinct values of a column at these rows, read `step` rows at a time."""
    found = [np.unique(column[rows[lo : lo + step]]) for lo in range(0, len(rows), step)]
    return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)



__all__ = ["ParkedColumns", "distinct", "in_file", "to_file"]

"""What the Kineto collector keeps for NPU lanes (``npu_kineto``), in the same streaming pass as the events.

* process and thread metadata (names, sort indices, ``process_labels``): a few per process and thread;
* the ``launch_id`` arg of each runtime call and device slice that has one, and which runtime calls are driver
  calls (``privateuse1_driver``): per-row columns on disk (`DiskColumn`), made only once some row has one (a GPU
  trace keeps none), NONE_INT for a row without;
* ``ac2g`` flow starts and ends (only once a slice held a word of an NPU device row, see `Collector.npu_hint`;
  a flow seen before is counted, and the flows are read again when the trace proves to have NPU lanes): thread,
  time, id and whether it binds to the enclosing slice (Chrome's rule: a start does, an end with ``"bp": "e"``) as
  columns on disk. An id that is an int64 is kept as it is; another (a string, a float...) is keyed by
  a hash of its text (`chrome_events.other_key`, as the Chrome readers key such ids: nothing held per distinct id;
  ``OTHER`` in the id's kind column).

Threads (pid, tid) are coded into `values` (a few distinct ones).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..spill import DiskColumn
from .chrome_events import other_key
from .kineto_rows import NONE_INT

INT, OTHER = 0, 1  # the kinds of a flow id: an int64 kept as it is, another value keyed by other_key
START, END = 0, 1


def _hashable(value: Any) -> bool:
    return value is None or type(value) in (int, str, float, bool)


def launch_of(args: dict) -> int | None:
    """The ``launch_id`` of an event's args (an int64 >= 0), else None."""
    launch = args.get("launch_id")
    return launch if type(launch) is int and 0 <= launch < 2**63 else None


class RowLaunches:
    """A per-row int64 column made only once some row has a value: rows before it (and rows never set) read NONE_INT.
    Values wait in a list and go to the column a batch at a time (the collector sets one per event)."""

    _BATCH = 1 << 14

    def __init__(self) -> None:
        self.column: DiskColumn | None = None
        self._rows: list[int] = []
        self._values: list[int] = []

    def set(self, row: int, value: int) -> None:
        """Give row `row` (past every row set before) its value."""
        self._rows.append(row)
        self._values.append(value)
        if len(self._rows) >= self._BATCH:
            self.flush()

    def set_many(self, rows: list[int], values: list[int]) -> None:
        """Give rows `rows` (ascending, past every row set before) their values."""
        self._rows += rows
        self._values += values
        if len(self._rows) >= self._BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the waiting values (and NONE_INT for the rows between them) to the column."""
        if not self._rows:
            return
        column = self.column
        if column is None:
            column = self.column = DiskColumn("q")
        first = len(column)
        rows = np.array(self._rows, dtype=np.int64)
        part = np.full(int(rows[-1]) + 1 - first, NONE_INT, dtype=np.int64)
        part[rows - first] = self._values
        column.extend(part)
        self._rows, self._values = [], []

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Rows lo..hi-1 (NONE_INT where unset)."""
        self.flush()
        out = np.full(max(0, hi - lo), NONE_INT, dtype=np.int64)
        if self.column is not None and lo < len(self.column):
            got = self.column.read(lo, hi)
            out[: len(got)] = got
        return out

    def any(self) -> bool:
        return self.column is not None or bool(self._rows)

    def close(self) -> None:
        self._rows, self._values = [], []
        if self.column is not None:
            self.column.close()
            self.column = None


class NpuCollect:
    """Metadata, launch ids and ``ac2g`` flows of one Kineto trace, kept as the collector meets them."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}  # pid -> process_name
        self.sort_index: dict[Any, int] = {}
        self.gpu_labels: dict[Any, str] = {}  # pid -> process_labels
        self.threads: dict[tuple[Any, Any], str] = {}  # (pid, tid) -> thread_name
        self.runtime_launch = RowLaunches()
        self.runtime_driver = RowLaunches()  # 1 for a privateuse1_driver call
        self.device_launch = RowLaunches()
        self.values: list[Any] = []  # distinct thread values (pid, tid) of the flows
        self._codes: dict[tuple[type, Any], int] = {}
        self.flows = 0
        self.skipped = 0  # flows met before collecting them
        self.collecting = False
        self._new_flows()

    def _new_flows(self) -> None:
        self.flow_side, self.flow_pid, self.flow_tid = DiskColumn("b"), DiskColumn("i"), DiskColumn("i")
        self.flow_ts, self.flow_kind, self.flow_id = DiskColumn("d"), DiskColumn("b"), DiskColumn("q")
        self.flow_enclosing = DiskColumn("b")
        self._flow_columns = (self.flow_side, self.flow_pid, self.flow_tid, self.flow_ts, self.flow_kind, self.flow_id,
                              self.flow_enclosing)  # fmt: skip
        self._pending: list[tuple] = []

    def code(self, value: Any) -> int:
        """The code of a thread value (pid or tid) among the flows' and lookups' values."""
        key = (type(value), value)
        found = self._codes.get(key)
        if found is None:
            found = self._codes[key] = len(self.values)
            self.values.append(value)
        return found

    def metadata(self, name: Any, pid: Any, tid: Any, args: Any) -> None:
        """A ``ph: M`` event."""
        if type(args) is not dict or not (_hashable(pid) and _hashable(tid)):
            return
        value = args.get("name")
        if name == "process_name" and type(value) is str:
            self.names[pid] = value
        elif name == "thread_name" and type(value) is str:
            self.threads[(pid, tid)] = value
        elif name == "process_sort_index" and type(args.get("sort_index")) is int:
            self.sort_index[pid] = args["sort_index"]
        elif name == "process_labels" and type(args.get("labels")) is str:
            self.gpu_labels[pid] = args["labels"]

    def flow(self, ph: str, pid: Any, tid: Any, ts: Any, flow_id: Any, bp: Any = None) -> None:
        """An ``ac2g`` flow start (``s``) or end (``f``, binding point `bp`); one without a usable id, thread or time
        is not kept."""
        if not self.collecting:
            self.skipped += 1
            return
        if flow_id is None or not _hashable(flow_id) or not (_hashable(pid) and _hashable(tid)) or type(ts) not in (int, float):
            return
        if type(flow_id) is int and NONE_INT + 1 < flow_id < 2**63:
            kind, value = INT, flow_id
        else:
            kind, value = OTHER, other_key(flow_id)
        self._pending.append((START if ph == "s" else END, self.code(pid), self.code(tid), float(ts), kind, value,
                              ph == "s" or bp == "e"))  # fmt: skip
        self.flows += 1
        if len(self._pending) >= RowLaunches._BATCH:
            self._flush_flows()

    def _flush_flows(self) -> None:
        if self._pending:
            for column, values in zip(self._flow_columns, zip(*self._pending, strict=True), strict=True):
                column.extend(np.array(values, dtype=column.dtype))
            self._pending = []

    def restart_flows(self) -> None:
        """Forget the flows kept so far (before reading them all again)."""
        for column in self._flow_columns:
            column.close()
        self._new_flows()
        self.flows, self.skipped, self.collecting = 0, 0, True

    def flow_columns(self) -> tuple[DiskColumn, ...]:
        """(side, pid code, tid code, ts, id kind, id, enclosing) of every flow kept, as columns."""
        self._flush_flows()
        return self._flow_columns

    def close(self) -> None:
        self._pending = []
        for column in self._flow_columns:
            column.close()
        for launches in (self.runtime_launch, self.runtime_driver, self.device_launch):
            launches.close()


__all__ = ["END", "INT", "OTHER", "START", "NpuCollect", "RowLaunches", "launch_of"]

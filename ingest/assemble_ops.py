"""The tables of host events of an assembled run (`assemble.Assembly` inherits `OperatorTables`): operators (one row
an operator, its placement, made a batch at a time as written), runtime calls and communication arguments."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from . import schema
from .assemble_files import distinct
from .batches import batch_rows
from .columns import Coder, nullable, table_of
from .engine_lanes import used_codes
from .events import KIND_CODES, NONE, EventKind, SparseColumn, rows_where
from .rules_compile import compiler_ops
from .rules_fallbacks import inferred_fallback_ops, launched_ops
from .schema import Placement
from .trace import TableSlices

_PLACES = [Placement.HOST.value, Placement.DEVICE.value, Placement.FALLBACK.value, Placement.COMPILER.value]  # by code


class OperatorTables:
    """The operators, runtime_calls and comms tables; reads the assembly's events (`a`, `links`, `op_rows`, `texts`,
    the call sites...)."""

    def placements(self) -> np.ndarray:
        """Per operator, a code into `_PLACES`: 0 host, 1 device (it or an operator inside it launched device work),
        2 inferred fallback, 3 compiler (it ran in the compiler's time: whatever it launched is the compiler's)."""
        placement = np.zeros(len(self.op_rows), dtype=np.int8)
        if self.devices:
            placement[launched_ops(self.linked)[self.op_rows]] = 1
            if self.t.infer_fallback:
                placement[self.op_id(inferred_fallback_ops(self.linked))] = 2
        placement[self.op_id(compiler_ops(self.linked))] = 3
        return placement

    def ops(self, placement: np.ndarray) -> TableSlices:
        a, rows = self.a, self.op_rows
        name, name_index = self._used_texts("name", rows)
        args_used = used_codes(a["args"].__getitem__, rows, len(self.arguments))
        shapes, strides, dtypes = (Coder([args[k] for args in self.arguments], args_used) for k in range(3))
        bytes_in = np.array([args[3] for args in self.arguments], dtype=np.int64)
        place = Coder(_PLACES, np.bincount(placement, minlength=len(_PLACES)) > 0)
        devices = ["cpu", self.t.root_device, "cpu", "cpu"]  # by placement code (the compiler's operators: the host's)
        used = distinct(a["device"], rows, self.slice_rows)
        used = used[used >= 0]
        # a code into `devices`: by placement, or the operator's own device
        where_on = placement.astype(np.int8 if len(used) < 120 else np.int32)
        if len(used):  # operators of their own device: a slice at a time
            devices += [self.device_name(int(d)) for d in used.tolist()]
            for lo in range(0, len(rows), self.slice_rows):
                own = np.asarray(a["device"][rows[lo : lo + self.slice_rows]])
                mine = np.flatnonzero(own >= 0)
                where_on[lo + mine] = len(_PLACES) + np.searchsorted(used, own[mine])
        device = Coder(devices, np.bincount(where_on, minlength=len(devices)) > 0)
        outputs = {}  # outputs' texts: a few among many names, coded by the used ones only
        for c in ("output_shapes", "output_dtypes"):
            outputs[c] = self._used_texts(c, rows)
        sites = Coder(self.site_texts, used_codes(self.op_site.__getitem__, rows, len(self.site_texts)))
        tid = [t[1] if type(t[1]) is int and -(2**31) <= t[1] < 2**31 else None for t in self.threads]
        tids = np.array([v if v is not None else 0 for v in tid] or [0], dtype=np.int64)
        tid_null = np.array([v is None for v in tid] or [True], dtype=bool)

        step = batch_rows()  # a batch as written: passed on whole (four slices of a quarter each were copied into one)

        def batches() -> Iterator[pa.RecordBatch]:
            for lo in range(0, len(rows), step):
                part = rows[lo : lo + step]
                args, thread, site = self.column("args", part), self.column("thread", part), self.op_site[part]
                start = self.column("start_ns", part)
                stack = self.site_stacks[site]
                where = placement[lo : lo + step]
                yield from table_of("ops", {
                    "op_id": np.arange(lo, lo + len(part), dtype=np.int64), "region_id": self.region_of(part, start),
                    "name": name(name_index[self.column("name", part)]), "start_ns": start, "dur_ns": self.column("dur_ns", part),
                    "placement": place(where), "device": device(where_on[lo : lo + step]), "input_shapes": shapes(args),
                    "input_strides": strides(args), "input_dtypes": dtypes(args), "bytes_in": bytes_in[args],
                    **{c: coder(index[self.column(c, part)]) for c, (coder, index) in outputs.items()},
                    "bytes_out": np.zeros(len(part), dtype=np.int64), "call_site": sites(site),
                    "stack_id": nullable(stack, stack < 0), "thread": nullable(tids[thread], tid_null[thread]),
                }).to_batches()  # fmt: skip

        return TableSlices(len(rows), batches)

    def _used_texts(self, column: str, rows: np.ndarray) -> tuple[Coder, np.ndarray]:
        """(a coder of the texts some of these rows use in a text column, each text code's index among them): a few
        among many texts (kernel names) coded without going through them all."""
        used = np.flatnonzero(used_codes(self.a[column].__getitem__, rows, len(self.texts)))
        index = np.zeros(len(self.texts), dtype=np.int32)
        index[used] = np.arange(len(used), dtype=np.int32)
        return Coder([self.texts[t] for t in used.tolist()], np.ones(len(used), dtype=bool)), index

    def runtime_calls(self, sliced: bool = False) -> pa.Table | TableSlices:
        """The runtime_calls table; sliced with more than `slice_rows` calls, made a slice at a time as it is
        written (each slice's columns read back from where they are then: memory or a parked column's file)."""
        rows = rows_where(self.a["kind"] == KIND_CODES[EventKind.RUNTIME])
        name, name_index = self._used_texts("name", rows)

        def table(part: np.ndarray) -> pa.Table:
            op, corr = self._op_of(part), self.column("correlation", part)
            start = self.column("start_ns", part)
            return table_of("runtime_calls", {
                "region_id": self.region_of(part, start), "op_id": nullable(op, op < 0),
                "name": name(name_index[self.column("name", part)]), "start_ns": start,
                "dur_ns": self.column("dur_ns", part), "correlation": nullable(corr, corr == NONE)})  # fmt: skip

        if not sliced or len(rows) <= self.slice_rows:
            return table(rows)
        return TableSlices(len(rows), lambda: (batch for lo in range(0, len(rows), self.slice_rows)
                                               for batch in table(rows[lo : lo + self.slice_rows]).to_batches()))  # fmt: skip

    def comms(self) -> pa.Table:
        """A row per operator with communication arguments (`events.Comm`), in operator order."""
        column = self.a["comm"]
        if not self.comm_values or not isinstance(column, SparseColumn):  # none (a spilled reader writes none)
            return table_of("comms", {c: [] for c in schema.COMMS.names})
        keep = np.asarray(self.a["kind"][column.rows]) == KIND_CODES[EventKind.OP]
        rows, codes = column.rows[keep], column.values[keep].tolist()
        comms = [self.comm_values[c] for c in codes]
        return table_of("comms", {
            "op_id": self.op_id(rows), "process_group": [c.process_group for c in comms],
            "process_group_description": [c.description for c in comms], "seq": [c.seq for c in comms],
            "collective": [c.collective for c in comms], "group_size": [c.group_size for c in comms]})  # fmt: skip



__all__ = ["OperatorTables"]

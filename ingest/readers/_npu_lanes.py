"""The device tables of a Kineto trace with NPU lanes, made slice by slice (the sliced path of ``npu_kineto``).

`npu_slices` is ``_kineto_gpu.gpu_slices`` with `NpuDeviceWork` for the device slices (after `link_launches` set
their correlations): a slice on an NPU process goes to its lane (`NpuLayout.lane`: ``NPU <id> <thread name>``, its
engine and slice kind from the category), a copy's ends are ``npu:<id>``, and every driver slice on an NPU lane is
a sync signal after the copy signals, as `npu_kineto.finish` adds them to a whole signals table.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..catalog import Cause, cause_hint
from ..schema import Direction, EngineKind, SignalKind, SliceKind
from ..trace import TableSlices
from . import _kineto_sweep as sweep
from ._kineto_gpu import gpu_slices
from ._kineto_link import _DMA, _table
from ._kineto_slices import ns_times
from ._kineto_sweep import DEV_CAT, DEV_DEVICE, DEV_DUR, DEV_NAME, DEV_TS, take
from ._kineto_tables import DeviceWork, Table, text
from .npu_kineto import DeviceLane, NpuLayout


def npu_slices(*args: Any, layout: NpuLayout, **options: Any) -> dict[str, TableSlices] | None:
    """``gpu_slices`` (same arguments) with the device slices on NPU lanes."""
    return gpu_slices(*args, **options, work=functools.partial(NpuDeviceWork, layout=layout))


class NpuDeviceWork(DeviceWork):
    """Device lanes, transfers and signals where some device slices sit on NPU lanes."""

    def __init__(self, *args: Any, layout: NpuLayout, **options: Any) -> None:
        super().__init__(*args, **options)
        self.layout = layout
        self._npu: dict[int, bool] = {}
        self.driver = np.array([v == "privateuse1_driver" for v in self.values] or [False], dtype=bool)
        self.syncs = sum(int(self._syncs(part).sum()) for _, part in self.link.ev.device.chunks(sweep.CHUNK_ROWS))
        self.signal_rows = self.copies + self.syncs

    def _on_npu(self, dev: np.ndarray) -> np.ndarray:
        """Per row: its device code names an NPU process (or an NPU id)."""
        distinct, inverse = np.unique(dev, return_inverse=True)
        for code in distinct.tolist():
            if code not in self._npu:
                self._npu[code] = self._lane("kernel", code, None) is not None
        return np.array([self._npu[c] for c in distinct.tolist()], dtype=bool)[inverse.reshape(-1)] if len(dev) else np.zeros(0, bool)

    def _lane(self, cat: str, dev_code: int, stream: Any, name: str = "") -> DeviceLane | None:
        return self.layout.lane(cat, name, self.values[dev_code], stream) if dev_code >= 0 else None

    def _syncs(self, part: list[np.ndarray]) -> np.ndarray:
        """Which slices of a chunk are driver slices on an NPU lane (sync signals)."""
        return self.driver[part[DEV_CAT]] & self._on_npu(part[DEV_DEVICE])

    def engines(self, copy, cat, name, dev, stream) -> tuple[pa.Array, pa.Array, pa.Array]:  # noqa: ANN001
        npu = self._on_npu(dev)
        if not npu.any():
            return super().engines(copy, cat, name, dev, stream)
        values, directions = self.values, list(Direction)
        cats, cat_i = np.unique(cat, return_inverse=True)
        devs, dev_i = np.unique(dev, return_inverse=True)
        streams, stream_i = np.unique(stream, return_inverse=True)
        direction = np.zeros(len(cat), dtype=np.int64)  # 0: not a copy, else 1 + its index in Direction
        named: dict[int, int] = {}  # a direction code -> a copy's name code that has it
        if copy.any():
            names, name_i = np.unique(name[copy], return_inverse=True)
            codes = []
            for n in names.tolist():
                codes.append(directions.index(self.direction(n)) + 1)
                named.setdefault(codes[-1], n)
            direction[copy] = np.array(codes, dtype=np.int64)[name_i.reshape(-1)]
        key = ((cat_i.reshape(-1) * (len(directions) + 1) + direction) * len(devs) + dev_i.reshape(-1)) * len(streams)
        key += stream_i.reshape(-1)
        found: dict[int, tuple[str, str, str]] = {}

        def words(k: int) -> tuple[str, str, str]:
            if k not in found:
                rest, s = divmod(k, len(streams))
                rest, d = divmod(rest, len(devs))
                c, to = divmod(rest, len(directions) + 1)
                c, d, s = int(cats[c]), int(devs[d]), int(streams[s])
                lane = self._lane(values[c], d, values[s], values[named[to]] if to else "")
                if lane is not None:
                    found[k] = (lane.engine, lane.engine_kind.value, lane.slice_kind.value)
                elif to:
                    found[k] = (f"{self.prefix(values[d])}DMA {directions[to - 1].value}", _DMA[directions[to - 1]].value,
                                SliceKind.TRANSFER.value)  # fmt: skip
                else:
                    found[k] = (f"{self.prefix(values[d])}stream {values[s]}", EngineKind.STREAM.value, SliceKind.COMPUTE.value)
            return found[k]

        return tuple(text(key, lambda k, i=i: words(k)[i]) for i in range(3))  # type: ignore[return-value]

    def device_name(self, dev_code: int) -> str:
        lane = self._lane("gpu_memcpy", dev_code, None)
        return lane.device if lane is not None else super().device_name(dev_code)

    def batches(self, table: str) -> Iterator[pa.RecordBatch]:
        yield from super().batches(table)
        if table == Table.SIGNALS and self.syncs:
            yield from self._sync_batches()

    def _sync_batches(self) -> Iterator[pa.RecordBatch]:
        """One sync signal per driver slice on an NPU lane, charged to its launching operator."""
        link, values, op_names = self.link, self.values, self.link.ev.ops.names
        note = cause_hint(Cause.SYNC_CALL)
        for lo, part in link.ev.device.chunks(sweep.CHUNK_ROWS):
            rows = np.flatnonzero(self._syncs(part))
            if not len(rows):
                continue
            start, _ = ns_times(part[DEV_TS][rows], part[DEV_DUR][rows], link.t0)
            _, oi, region = self.launched_by(lo, len(part[0]), rows, start)
            name = part[DEV_NAME][rows].astype(np.int64)
            key = np.where(oi >= 0, -(take(link.op_name, np.maximum(oi, 0)).astype(np.int64) + 1), name)
            zeros = np.zeros(len(rows), dtype=np.int64)
            yield _table("signals", {
                "region_id": region, "op_id": pa.array(oi, mask=oi < 0), "kind": text(zeros, lambda k: SignalKind.SYNC.value),
                "reason": text(zeros, lambda k: Cause.SYNC_CALL.value),
                "op_name": text(key, lambda k: op_names[-k - 1] if k < 0 else values[k]), "count": zeros + 1, "bytes": zeros,
                "note": text(name, lambda k: f"{values[k]}: {note}"), "time_ns": start}).to_batches()[0]  # fmt: skip


__all__ = ["NpuDeviceWork", "npu_slices"]

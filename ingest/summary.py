"""Region summaries: the tables behind the report, the CLI gate and the viewer.

Every function here takes a Trace and returns plain tables (pandas DataFrames)
or small dataclasses; nothing here prints or draws.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .schema import Direction, Phase, SignalKind
from .trace import Trace

DEFAULT_NOTES: dict[SignalKind, str] = {
    SignalKind.CPU_FALLBACK: "try: an op and dtype the device supports",
    SignalKind.RECOMPILE: "try: pad or bucket shapes to a few fixed sizes",
    SignalKind.WARM_MISS: "try: make inputs contiguous (no broadcast views) or graph mode",
    SignalKind.BOUNCE_DTYPE: "try: keep the computation in the device dtype",
    SignalKind.BOUNCE_STRIDED: "try: write into contiguous tensors",
    SignalKind.BOUNCE_OTHER: "try: keep the data on the device",
    SignalKind.TRANSFER_D2H: "try: keep results on the device until the end",
    SignalKind.TRANSFER_H2D: "try: create tensors on the device",
    SignalKind.TRANSFER_D2D: "try: avoid copies between devices",
    SignalKind.SYNC: "try: avoid .item()/.tolist() and data-dependent shapes in the step",
    SignalKind.COPY_DTYPE: "try: cast once, outside the step",
    SignalKind.COPY_NONCONTIGUOUS: "try: .contiguous() once, outside the step",
    SignalKind.COMPILE_GRAPH: "compiled graphs (one-time cost when cold)",
    SignalKind.COMPILE_GRAPH_BREAK: "try: remove the breaking call from the compiled function",
    SignalKind.COMPILE_RECOMPILE: "try: fixed shapes (pad) or mark the dimension dynamic",
}

# Signal kinds that make a region not clean; RECOMPILE only in a warm region.
_UNCLEAN = {
    SignalKind.CPU_FALLBACK: "ran on CPU",
    SignalKind.WARM_MISS: "missed the warm cache",
    SignalKind.BOUNCE_DTYPE: "copied through the host",
    SignalKind.BOUNCE_STRIDED: "copied through the host",
    SignalKind.BOUNCE_OTHER: "copied through the host",
    SignalKind.TRANSFER_D2H: "device-to-host copies",
    SignalKind.SYNC: "host waited for the device",
    SignalKind.COMPILE_GRAPH_BREAK: "graph breaks",
    SignalKind.COMPILE_RECOMPILE: "recompiled",
}


@dataclasses.dataclass
class RegionSummary:
    """One region's figures (including its nested regions)."""

    region_id: int
    name: str
    wall_ns: int
    peak_memory_bytes: int | None
    mode: str
    phase: str
    device: str | None
    error: str | None
    tags: dict[str, str]
    op_count: int
    signals: pd.DataFrame  # signal, count, bytes, note (one row per kind present, enum order)
    operators: pd.DataFrame  # signal, operator, count, bytes, reasons, call_sites
    transfer_bytes: dict[Direction, int]
    transfer_counts: dict[Direction, int]

    def count(self, kind: SignalKind) -> int:
        rows = self.signals[self.signals["signal"] == kind.value]
        return int(rows["count"].sum()) if len(rows) else 0

    def bytes(self, kind: SignalKind) -> int:
        rows = self.signals[self.signals["signal"] == kind.value]
        return int(rows["bytes"].sum()) if len(rows) else 0

    def verdict(self) -> dict[str, object]:
        """{"clean": bool, "reasons": [...]}: what keeps the region from running entirely on the device."""
        reasons = []
        for kind, what in _UNCLEAN.items():
            n = self.count(kind)
            if n:
                extra = f", {format_bytes(self.bytes(kind))}" if self.bytes(kind) else ""
                reasons.append(f"{kind.short}: {n}x ({what}{extra})")
        if self.phase == Phase.WARM.value and self.count(SignalKind.RECOMPILE):
            reasons.append(f"recompile: {self.count(SignalKind.RECOMPILE)}x (compiled in a warm region)")
        if self.error:
            reasons.append(f"error: {self.error}")
        return {"clean": not reasons, "reasons": reasons}


def regions_frame(trace: Trace) -> pd.DataFrame:
    """The regions table as a DataFrame (region_id, parent_id, name, mode, phase, start_ns, dur_ns...)."""
    regions = trace["regions"]  # to_pylist: dictionary-encoded columns become plain strings, not categoricals
    return pd.DataFrame({name: regions.column(name).to_pylist() for name in regions.column_names},
                        columns=regions.column_names)


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


def _rows_in(table: pa.Table, ids: list[int]) -> pa.Table:
    return table.filter(pc.is_in(table.column("region_id"), value_set=pa.array(ids, pa.int32())))


def _to_pandas(table: pa.Table, columns: list[str]) -> pd.DataFrame:
    sub = table.select(columns)
    decoded = []
    for col in sub.columns:
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string()) if col.num_chunks else pa.chunked_array([], pa.string())
        decoded.append(col)
    return pa.Table.from_arrays(decoded, names=columns).to_pandas()


def summarize(trace: Trace, region_id: int) -> RegionSummary:
    """The summary of one region and its nested regions."""
    regions = trace["regions"]
    index = regions.column("region_id").to_pylist().index(region_id)
    row = {name: regions.column(name)[index].as_py() for name in regions.column_names}
    ids = descendants(trace, region_id)
    signals = _to_pandas(
        _rows_in(trace["signals"], ids), ["kind", "reason", "op_name", "count", "bytes", "call_site", "note"]
    )
    order = {k.value: i for i, k in enumerate(SignalKind)}
    if len(signals):
        signals["note"] = signals["note"].where(signals["note"].notna(), None)
        by_kind = (
            signals.groupby("kind", sort=False)
            .agg(count=("count", "sum"), bytes=("bytes", "sum"), note=("note", _most_common))
            .reset_index()
            .rename(columns={"kind": "signal"})
        )
        by_kind["note"] = [
            n if isinstance(n, str) and n else DEFAULT_NOTES[SignalKind(k)] for k, n in zip(by_kind["signal"], by_kind["note"], strict=True)
        ]
        by_kind = by_kind.sort_values("signal", key=lambda s: s.map(order)).reset_index(drop=True)
        operators = _operator_table(signals, order)
    else:
        by_kind = pd.DataFrame({"signal": [], "count": [], "bytes": [], "note": []})
        operators = pd.DataFrame({"signal": [], "operator": [], "count": [], "bytes": [], "reasons": [], "call_sites": []})
    transfers = _rows_in(trace["transfers"], ids)
    tbytes = {d: 0 for d in Direction}
    tcounts = {d: 0 for d in Direction}
    if transfers.num_rows:
        frame = _to_pandas(transfers, ["direction", "bytes"])
        for direction, group in frame.groupby("direction"):
            tbytes[Direction(direction)] = int(group["bytes"].sum())
            tcounts[Direction(direction)] = len(group)
    ops = trace["ops"]
    op_count = int(pc.sum(pc.is_in(ops.column("region_id"), value_set=pa.array(ids, pa.int32()))).as_py() or 0) if ops.num_rows else 0
    tags = json.loads(row["tags"]) if row.get("tags") else {}
    return RegionSummary(
        region_id=region_id,
        name=row["name"],
        wall_ns=row["dur_ns"],
        peak_memory_bytes=row["peak_memory_bytes"],
        mode=row["mode"],
        phase=row["phase"],
        device=row["device"],
        error=row["error"],
        tags=tags if isinstance(tags, dict) else {},
        op_count=op_count,
        signals=by_kind,
        operators=operators,
        transfer_bytes=tbytes,
        transfer_counts=tcounts,
    )


def _most_common(values: pd.Series) -> str | None:
    values = values.dropna()
    return values.value_counts().index[0] if len(values) else None


def _operator_table(signals: pd.DataFrame, order: dict[str, int]) -> pd.DataFrame:
    """Per (signal, operator): count, bytes, and the why / call-site breakdowns (most frequent first)."""
    signals = signals.assign(
        op_name=signals["op_name"].fillna("(unknown)"),
        reason=signals["reason"].fillna(""),
        call_site=signals["call_site"].fillna(""),
    )
    keys = ["kind", "op_name"]
    table = signals.groupby(keys, sort=False).agg(count=("count", "sum"), bytes=("bytes", "sum")).reset_index()
    breakdowns = {}
    for column in ("reason", "call_site"):
        sub = signals[signals[column] != ""]
        sums = sub.groupby([*keys, column], sort=False)["count"].sum().sort_values(ascending=False, kind="stable")
        found: dict[tuple[str, str], dict[str, int]] = {}
        for (kind, op, value), n in sums.items():
            found.setdefault((kind, op), {})[value] = int(n)
        breakdowns[column] = found
    pairs = list(zip(table["kind"], table["op_name"], strict=True))
    table["reasons"] = [breakdowns["reason"].get(p, {}) for p in pairs]
    table["call_sites"] = [breakdowns["call_site"].get(p, {}) for p in pairs]
    table = table.rename(columns={"kind": "signal", "op_name": "operator"})
    table["count"] = table["count"].astype(int)
    table["bytes"] = table["bytes"].astype(int)
    table["_order"] = table["signal"].map(order)
    table = table.sort_values(["_order", "count"], ascending=[True, False], kind="stable")
    return table.drop(columns="_order").reset_index(drop=True)[["signal", "operator", "count", "bytes", "reasons", "call_sites"]]


def format_bytes(n: float) -> str:
    """Human-readable bytes in decimal units (1 MB = 10**6 bytes)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"

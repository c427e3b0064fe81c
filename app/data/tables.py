"""Tables behind the region page: breakdowns, operator details, stacks, op pages, numerics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from portscope.ingest.callsites import site_line
from portscope.ingest.lines import stack_lines
from portscope.ingest.summary import descendants
from portscope.ingest.trace import Trace

BREAKDOWN_BY = {"operator": "op_name", "module": "module", "source line": "call_site"}
OPS_COLUMNS = [
    "op_id",
    "name",
    "placement",
    "start_ns",
    "dur_ns",
    "input_shapes",
    "input_dtypes",
    "bytes_in",
    "bytes_out",
    "module",
    "call_site",
]


def _decoded(table: pa.Table, columns: list[str]) -> pd.DataFrame:
    arrays = []
    for name in columns:
        col = table.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        arrays.append(col)
    return pa.Table.from_arrays(arrays, names=columns).to_pandas()


def _in_region(table: pa.Table, trace: Trace, region_id: int) -> pa.Table:
    ids = pa.array(descendants(trace, region_id), pa.int32())
    return table.filter(pc.is_in(table.column("region_id"), value_set=ids))


def breakdown(
    trace: Trace, region_id: int, *, by: str, signal: str | None = None, top: int = 20
) -> pd.DataFrame:
    """Where the signals of a region come from: columns key, count, bytes; top rows by count.

    by: "operator", "module" or "source line" (a call site without its caller, by file name); signal: one
    signal kind, or every kind.
    """
    column = BREAKDOWN_BY[by]
    signals = _in_region(trace["signals"], trace, region_id)
    if signal:
        signals = signals.filter(pc.equal(signals.column("kind").cast(pa.string()), signal))
    if not signals.num_rows:
        return pd.DataFrame({"key": [], "count": [], "bytes": []})
    frame = _decoded(signals, [column, "count", "bytes"]).rename(columns={column: "key"})
    frame["key"] = frame["key"].fillna("(unknown)")
    if column == "call_site":
        frame["key"] = frame["key"].map(lambda site: site_line(site).rsplit("/", 1)[-1])
    grouped = (
        frame.groupby("key", sort=False).agg(count=("count", "sum"), bytes=("bytes", "sum")).reset_index()
    )
    return grouped.sort_values(["count", "bytes"], ascending=False).head(top).reset_index(drop=True)


def operator_detail(trace: Trace, region_id: int, signal: str, operator: str) -> dict[str, Any]:
    """An operator's signals in a region: counts, bytes, why-breakdown, call sites, modules, one stack."""
    signals = _in_region(trace["signals"], trace, region_id)
    frame = _decoded(
        signals, ["kind", "op_name", "reason", "count", "bytes", "call_site", "module", "stack_id"]
    )
    frame = frame[(frame["kind"] == signal) & (frame["op_name"].fillna("(unknown)") == operator)]

    def counts(column: str) -> dict[str, int]:
        sub = frame.dropna(subset=[column])
        if not len(sub):
            return {}
        grouped = sub.groupby(column)["count"].sum().sort_values(ascending=False)
        return {str(k): int(v) for k, v in grouped.items()}

    stacks = frame["stack_id"].dropna()
    return {
        "signal": signal,
        "operator": operator,
        "count": int(frame["count"].sum()),
        "bytes": int(frame["bytes"].sum()),
        "reasons": counts("reason"),
        "call_sites": counts("call_site"),
        "modules": counts("module"),
        "stack": stack_lines(trace, int(stacks.iloc[0])) if len(stacks) else [],
    }


def region_ops_page(
    trace: Trace,
    region_id: int,
    start: int,
    end: int,
    sort: list[dict[str, str]] | None = None,
    *,
    remember: Callable[[str, Callable[[], Any]], Any] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Rows start:end of a region's ops (optionally sorted), and the total row count.

    Only the requested page is decoded, so a page of a million-op region costs
    one filter, (optionally) one sort and one slice. `remember(key, make)` (the
    server's cache) keeps a sort order, so paging through a sorted table sorts once.
    """
    ops = trace["ops"]
    if ops.num_rows:
        ops = _in_region(ops, trace, region_id)
    total = ops.num_rows
    if sort:
        keys = [
            (s["colId"], "descending" if s.get("sort") == "desc" else "ascending")
            for s in sort
            if s.get("colId") in OPS_COLUMNS
        ]
        if keys:
            rows = _page_by_partition(ops, keys, start, end)
            if rows is None:  # several keys, or not integers: one full sort, remembered by the server
                def make_order() -> np.ndarray:
                    return pc.sort_indices(ops.select([k for k, _ in keys]), sort_keys=keys).to_numpy()

                key = f"ops-order:{region_id}:{keys}"
                order = remember(key, make_order) if remember is not None else make_order()
                rows = order[start:max(end, start)]
            ops = ops.take(pa.array(rows))
            start, end = 0, ops.num_rows
    page = ops.slice(start, max(end - start, 0))
    frame = _decoded(page, OPS_COLUMNS)
    return frame.replace({np.nan: None}).to_dict("records"), total


def _page_by_partition(ops: pa.Table, keys: list[tuple[str, str]], start: int, end: int) -> np.ndarray | None:
    """Rows start:end of a sort by one integer column without sorting everything (O(n) per page).

    Ties are broken by row number, as in a stable sort, so pages never overlap or skip rows.
    """
    if len(keys) != 1:
        return None
    column = ops.column(keys[0][0])
    if not pa.types.is_integer(column.type) or column.null_count:
        return None
    n = len(column)
    lo, hi = min(start, n), min(max(end, start), n)
    if lo >= hi:
        return np.zeros(0, np.int64)
    values = column.to_numpy().astype(np.int64)
    if keys[0][1] == "descending":
        values = -values
    span = int(values.max()) - int(values.min()) + 1
    if span * n >= 2**62:
        return None
    composite = (values - values.min()) * n + np.arange(n, dtype=np.int64)  # unique: the value, then the row
    part = np.argpartition(composite, [lo, hi - 1])[lo:hi]
    return part[np.argsort(composite[part])]


def slice_detail(trace: Trace, row: int) -> dict[str, Any]:
    """One engine slice and, when it has one, its operator (name, module, shapes, bytes, call site)."""
    slices, _ = timeline_slices(trace)
    out = {name: slices.column(name)[row].as_py() for name in slices.column_names}
    op_id = out.get("op_id")
    if op_id is not None:
        ops = trace["ops"]
        hit = ops.filter(pc.equal(ops.column("op_id"), op_id))
        if hit.num_rows:
            op = {name: hit.column(name)[0].as_py() for name in hit.column_names}
            out["op"] = op
            out["stack"] = stack_lines(trace, op["stack_id"]) if op.get("stack_id") is not None else []
    return out


def numerics_frame(trace: Trace) -> pd.DataFrame:
    """Validation results: comparison, metric, value, text."""
    table = trace["numerics"]
    if not table.num_rows:
        return pd.DataFrame({"comparison": [], "metric": [], "value": [], "text": []})
    return _decoded(table, ["comparison", "metric", "value", "text"])


def region_bands(trace: Trace) -> list[tuple[float, float, str]]:
    """Top-level regions as (start, end, label) in the unit of engine_slices.

    Measured runs: the regions' own times. Cycle-unit and predicted runs: the extent of
    the slices of each region and the regions nested in it (a static schedule has no
    wall-clock times; a predicted schedule runs on its own time axis).
    """
    regions = trace["regions"]
    labels, parents = {}, {}
    for rid, parent, name, phase, mode in zip(
        *(regions.column(c).to_pylist() for c in ("region_id", "parent_id", "name", "phase", "mode")),
        strict=True,
    ):
        parents[rid] = parent
        if parent is None:
            bits = [b for b in (phase, mode) if b not in ("none", "unknown")]
            labels[rid] = name + (f" [{', '.join(bits)}]" if bits else "")
    if (trace.run_info.time_unit.value == "ns" and not trace.predicted) or not trace["engine_slices"].num_rows:
        starts = regions.column("start_ns").to_pylist()
        durs = regions.column("dur_ns").to_pylist()
        rids = regions.column("region_id").to_pylist()
        return [
            (float(s), float(s + d), labels[r])
            for r, s, d in zip(rids, starts, durs, strict=True)
            if r in labels
        ]
    roots = {}
    for rid in parents:  # every region -> its top-level region
        root = rid
        while parents.get(root) is not None:
            root = parents[root]
        roots[rid] = root
    spans: dict[int, tuple[int, int]] = {}
    for rid, (s, e) in _region_extents(trace).items():
        root = roots.get(rid, rid)
        a, b = spans.get(root, (s, e))
        spans[root] = (min(a, s), max(b, e))
    return [(float(spans[r][0]), float(spans[r][1]), labels[r]) for r in labels if r in spans]


_PLACEMENT_LANES = {  # placement -> (lane, engine kind, slice kind)
    "fallback": ("host (fallback)", "host", "fallback"),
    "host": ("host", "host", "compute"),
    "device": ("dispatch", "dispatch", "dispatch"),
    "graph": ("graph calls", "dispatch", "compute"),
}


def timeline_slices(trace: Trace) -> tuple[pa.Table, bool]:
    """The slices a timeline draws, and whether they were derived.

    A run with engine slices draws those. A run without (eager recordings, most
    predictions) draws its ops by placement, its timed transfers on DMA lanes and
    its compiles on a compiler lane, all in ns.
    """
    if trace["engine_slices"].num_rows:
        return trace["engine_slices"], False
    from portscope.ingest.builder import TableBuilder

    b = TableBuilder("engine_slices")
    ops = trace["ops"]
    if ops.num_rows:
        frame = _decoded(
            ops, ["op_id", "region_id", "name", "start_ns", "dur_ns", "placement", "module", "bytes_in"]
        )
        for placement, (lane, engine_kind, kind) in _PLACEMENT_LANES.items():
            part = frame[frame["placement"] == placement]
            if len(part):
                b.extend(
                    {
                        "region_id": part["region_id"].tolist(),
                        "engine": [lane] * len(part),
                        "engine_kind": [engine_kind] * len(part),
                        "kind": [kind] * len(part),
                        "name": part["name"].tolist(),
                        "start": part["start_ns"].tolist(),
                        "dur": part["dur_ns"].tolist(),
                        "op_id": part["op_id"].tolist(),
                        "module": part["module"].tolist(),
                    }
                )
    transfers = trace["transfers"]
    if transfers.num_rows:
        frame = _decoded(
            transfers, ["region_id", "op_id", "direction", "bytes", "start_ns", "dur_ns", "cause"]
        ).dropna(subset=["start_ns"])
        for row in frame.itertuples():
            b.append(
                region_id=row.region_id,
                engine=f"DMA {row.direction}",
                engine_kind=f"dma_{row.direction}",
                kind="transfer",
                name=f"{row.direction} {row.cause or ''}".strip(),
                start=int(row.start_ns),
                dur=int(row.dur_ns if row.dur_ns == row.dur_ns else 0),
                op_id=None if row.op_id != row.op_id else int(row.op_id),
                bytes=int(row.bytes),
            )
    compiles = trace["compiles"]
    if compiles.num_rows:
        frame = _decoded(compiles, ["region_id", "kind", "key", "compile_ns", "time_ns"]).dropna(
            subset=["time_ns"]
        )
        for row in frame.itertuples():
            b.append(
                region_id=row.region_id,
                engine="compiler",
                engine_kind="compiler",
                kind="compile",
                name=f"{row.kind} {row.key or ''}".strip(),
                start=int(row.time_ns),
                dur=int(row.compile_ns if row.compile_ns == row.compile_ns else 0),
            )
    return b.build(), True


def _region_extents(trace: Trace) -> dict[int, tuple[int, int]]:
    """First start and last end of each region's own engine slices (numpy over the columns: 10M slices in ~0.2 s)."""
    slices = trace["engine_slices"]
    ids = [r for r in trace["regions"].column("region_id").to_pylist() if r is not None]
    if not slices.num_rows or not ids:
        return {}
    size = max(ids) + 2  # the last slot takes slices without a region
    first = np.full(size, np.iinfo(np.int64).max, np.int64)
    last = np.full(size, np.iinfo(np.int64).min, np.int64)
    for batch in slices.select(["region_id", "start", "dur"]).to_batches(max_chunksize=1 << 20):  # small temporaries
        rid = pc.fill_null(batch.column(0), size - 1).to_numpy().astype(np.int64)
        rid[(rid < 0) | (rid >= size)] = size - 1
        start = batch.column(1).to_numpy()
        np.minimum.at(first, rid, start)
        np.maximum.at(last, rid, start + batch.column(2).to_numpy())
    return {r: (int(first[r]), int(last[r])) for r in ids if first[r] <= last[r]}


def predicted_spans(trace: Trace) -> dict[int, int]:
    """Predicted device time of every region of a predicted run: the span of its engine slices and its nested
    regions' (in the trace's time unit). Empty for a measured or converted run, whose time is its wall time."""
    if not trace.predicted or not trace["engine_slices"].num_rows:
        return {}
    own = _region_extents(trace)
    out = {}
    for rid in trace["regions"].column("region_id").to_pylist():
        inside = [own[r] for r in descendants(trace, rid) if r in own]
        if inside:
            out[rid] = max(e for _, e in inside) - min(s for s, _ in inside)
    return out

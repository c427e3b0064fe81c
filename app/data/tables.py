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
    return _decoded_table(table.select(columns)).to_pandas()


def _decoded_table(table: pa.Table) -> pa.Table:
    """The table with its dictionary-encoded columns as plain text."""
    arrays = [col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col for col in table.columns]
    return pa.Table.from_arrays(arrays, names=table.column_names)


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

    Only the page's rows are taken from the (memory-mapped) ops table: the region's row numbers are
    one int64 per op (none when the region holds every op), a sort by one column partitions that
    column's values around the page (O(n), no full sort; ties in row order, as a stable sort). Several
    sort keys or a column with nulls sort everything once. `remember(key, make)` keeps the row numbers
    and full sort orders between pages (the server's per-process memo: these arrays are never pickled).
    """
    ops = trace["ops"]
    memo = remember or (lambda _key, make: make())
    rows = memo(f"ops-rows:{region_id}", lambda: _region_rows(ops, trace, region_id))
    total = ops.num_rows if rows is None else len(rows)
    lo, hi = min(max(start, 0), total), min(max(end, start, 0), total)
    keys = [(s["colId"], "descending" if s.get("sort") == "desc" else "ascending") for s in sort or [] if s.get("colId") in OPS_COLUMNS]
    if keys:
        picked = page_by_partition(sort_key_values(ops, rows, keys), lo, hi)
        if picked is None:  # several keys, or nulls: one full sort, remembered

            def make_order() -> np.ndarray:
                region = _decoded_table(ops.select([k for k, _ in keys]))  # Arrow sorts no dictionary columns in a table
                return pc.sort_indices(region if rows is None else region.take(pa.array(rows)), sort_keys=keys).to_numpy()

            picked = memo(f"ops-order:{region_id}:{keys}", make_order)[lo:hi]
        page = _take(ops.select(OPS_COLUMNS), picked if rows is None else rows[picked])
    elif rows is None:
        page = ops.select(OPS_COLUMNS).slice(lo, hi - lo)
    else:
        page = _take(ops.select(OPS_COLUMNS), rows[lo:hi])
    frame = _decoded(page, OPS_COLUMNS)
    return frame.replace({np.nan: None}).to_dict("records"), total


def _region_rows(ops: pa.Table, trace: Trace, region_id: int) -> np.ndarray | None:
    """Row numbers of the ops in a region or the regions nested in it (None: every op is)."""
    if not ops.num_rows:
        return None
    ids = descendants(trace, region_id)
    bounds = pc.min_max(ops.column("region_id"))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if high - low < len(ids) and set(range(low, high + 1)) <= set(ids):  # e.g. the root region: no row numbers to keep
        return None
    inside = np.zeros(max(high, *ids) + 1, dtype=bool)
    inside[ids] = True
    return np.flatnonzero(inside[_int64(ops.column("region_id"))])


def _int64(column: pa.ChunkedArray) -> np.ndarray:
    """A column of integers as one int64 array, chunk by chunk into one allocation."""
    out = np.empty(len(column), dtype=np.int64)
    at = 0
    for chunk in column.chunks:
        out[at : at + len(chunk)] = chunk.to_numpy(zero_copy_only=False)
        at += len(chunk)
    return out


def _take(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """The given rows of a table, in order, one slice each (`Table.take` on a chunked column first joins its
    chunks: a copy of a whole column of a memory-mapped trace for a page of 100 rows)."""
    if not len(rows):
        return table.slice(0, 0)
    batches = table.to_batches()
    offsets = np.cumsum([0] + [b.num_rows for b in batches])
    chunk = np.searchsorted(offsets, rows, side="right") - 1
    return pa.Table.from_batches([batches[c].slice(r - offsets[c], 1) for c, r in zip(chunk.tolist(), rows.tolist(), strict=True)],
                                 schema=table.schema)  # fmt: skip


SortValues = tuple[list[np.ndarray], Callable[[np.ndarray], np.ndarray]]


def sort_key_values(ops: pa.Table, rows: np.ndarray | None, keys: list[tuple[str, str]]) -> SortValues | None:
    """The region's sort keys as (parts, key): key(part) gives one int64 per row whose ascending order is the sort's
    order, part by part in row order (None: several keys or nulls).

    Integers are their values (negated when descending); dictionary-encoded text is the rank of each value among
    the dictionary's sorted values, so sorting by a name needs no string comparisons. The parts of a whole run are
    zero-copy views of the mapped table's chunks: a page never copies a whole column."""
    if len(keys) != 1:
        return None
    name, direction = keys[0]
    column = ops.column(name)
    if column.null_count or not column.num_chunks:
        return None
    sign = -1 if direction == "descending" else 1
    key: Callable[[np.ndarray], np.ndarray]
    if pa.types.is_integer(column.type):
        parts = [chunk.to_numpy() for chunk in column.chunks]
        key = (lambda part: part.astype(np.int64, copy=False)) if sign > 0 else (lambda part: -part.astype(np.int64))
    elif pa.types.is_dictionary(column.type) and pa.types.is_string(column.type.value_type):
        column = column.unify_dictionaries() if column.num_chunks > 1 else column
        dictionary = column.chunk(0).dictionary
        rank = np.empty(len(dictionary), dtype=np.int64)
        rank[pc.sort_indices(dictionary).to_numpy()] = sign * np.arange(len(dictionary))
        parts = [chunk.indices.to_numpy() for chunk in column.chunks]
        key = _Ranks(rank)
    else:
        return None
    if rows is None:
        return parts, key
    return [np.concatenate([key(part) for part in parts])[rows]], _as_is


def _as_is(values: np.ndarray) -> np.ndarray:
    return values


def page_by_partition(values: SortValues | None, start: int, end: int) -> np.ndarray | None:
    """Positions start:end of a stable ascending sort of the keys, without sorting everything (O(n) per page)."""
    if values is None:
        return None
    parts, key = values
    n = sum(len(part) for part in parts)
    lo, hi = min(start, n), min(max(end, start), n)
    if lo >= hi:
        return np.zeros(0, np.int64)
    if isinstance(key, _Ranks) and n > SORT_OUTRIGHT_ROWS:
        return _select_codes(parts, key.rank, lo, hi)
    if n <= SORT_OUTRIGHT_ROWS or len(parts) == 1:
        return _select(np.concatenate([key(part) for part in parts]), lo, hi)
    return _select_parts(parts, key, lo, hi)


class _Ranks:
    """Dictionary codes -> the ranks of their values (the key of a sort by text)."""

    def __init__(self, rank: np.ndarray) -> None:
        self.rank = rank

    def __call__(self, codes: np.ndarray) -> np.ndarray:
        return self.rank[codes]


def _select_codes(parts: list[np.ndarray], rank: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """`_select` for dictionary codes: rows per code counted once, so the codes that hold ranks lo..hi-1 are known
    without a key per row; only their rows go on."""
    counts = np.zeros(len(rank), dtype=np.int64)
    for part in parts:
        counts += np.bincount(part, minlength=len(rank))
    by_rank = np.argsort(rank, kind="stable")  # codes in sort order
    at = np.cumsum(counts[by_rank])
    first, last = np.searchsorted(at, [lo, hi - 1], side="right")
    before = int(at[first - 1]) if first else 0
    if first == last:  # the page lies among the rows of one value: they are in row order, take the page's part
        return _nth_rows(parts, int(by_rank[first]), lo - before, hi - before)
    wanted = np.zeros(len(rank), dtype=bool)
    wanted[by_rank[first : last + 1]] = True
    rows, values, offset = [], [], 0
    for part in parts:
        kept = np.flatnonzero(wanted[part])
        rows.append(kept + offset)
        values.append(rank[part[kept]])
        offset += len(part)
    return np.concatenate(rows)[_select(np.concatenate(values), lo - before, hi - before)]


SORT_OUTRIGHT_ROWS = 1 << 16  # rows sorted outright; also the buckets of one counting pass


def _nth_rows(parts: list[np.ndarray], code: int, lo: int, hi: int) -> np.ndarray:
    """Rows lo:hi among the rows whose code is `code`, part by part (stops once they are found)."""
    found, seen, offset = [], 0, 0
    for part in parts:
        rows = np.flatnonzero(part == code)
        if seen + len(rows) > lo:
            found.append(rows[max(lo - seen, 0) : hi - seen] + offset)
        seen += len(rows)
        offset += len(part)
        if seen >= hi:
            break
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def _select_parts(parts: list[np.ndarray], key: Callable[[np.ndarray], np.ndarray], lo: int, hi: int) -> np.ndarray:
    """`_select`'s first pass over the parts of a column one at a time (small temporaries, no copy of the whole);
    the rows it keeps go on as one array."""
    smallest = min(int(key(part).min()) for part in parts if len(part))
    largest = max(int(key(part).max()) for part in parts if len(part))
    if smallest == largest:
        return np.arange(lo, hi, dtype=np.int64)
    if largest - smallest < 2**62:
        shift = max(0, (largest - smallest).bit_length() - 16)
        at = np.zeros(SORT_OUTRIGHT_ROWS, dtype=np.int64)
        for part in parts:
            at += np.bincount((key(part) - smallest) >> shift, minlength=SORT_OUTRIGHT_ROWS)
        np.cumsum(at, out=at)  # rows up to each bucket
        first, last = np.searchsorted(at, [lo, hi - 1], side="right")
        before = int(at[first - 1]) if first else 0
        rows, values, offset = [], [], 0
        for part in parts:
            keys = key(part)
            buckets = (keys - smallest) >> shift
            kept = np.flatnonzero((buckets >= first) & (buckets <= last))
            rows.append(kept + offset)
            values.append(keys[kept])
            offset += len(part)
        kept = np.concatenate(rows)
        if len(kept) < offset:
            return kept[_select(np.concatenate(values), lo - before, hi - before)]
    return _select(np.concatenate([key(part) for part in parts]), lo, hi)


def _select(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Positions lo:hi (lo < hi <= len) of a stable ascending sort of `values`.

    A radix select: the values fall into 2^16 buckets by their high bits; one count says which buckets hold
    ranks lo..hi-1, every row before them is smaller, and only the rows of those buckets go on (in row
    order, so ties keep it). Each pass keeps 16 fewer bits of range: a page costs a few passes, whatever
    the order of the values (a partition is slow on sorted or reversed columns such as start times).
    """
    n = len(values)
    if n <= SORT_OUTRIGHT_ROWS:
        return np.argsort(values, kind="stable")[lo:hi]
    smallest, largest = int(values.min()), int(values.max())
    if smallest == largest:
        return np.arange(lo, hi, dtype=np.int64)
    if largest - smallest < 2**62:
        buckets = values - smallest
        buckets >>= max(0, (largest - smallest).bit_length() - 16)
        at = np.cumsum(np.bincount(buckets))  # rows up to each bucket
        first, last = np.searchsorted(at, [lo, hi - 1], side="right")
        before = int(at[first - 1]) if first else 0
        kept = np.flatnonzero((buckets >= first) & (buckets <= last))
        if len(kept) < n:
            return kept[_select(values[kept], lo - before, hi - before)]
    low, high = np.partition(values, [lo, hi - 1])[[lo, hi - 1]]  # the page spans the extreme buckets
    before = int(np.count_nonzero(values < low))
    between = np.flatnonzero((values >= low) & (values <= high))
    return between[np.argsort(values[between], kind="stable")][lo - before : hi - before]


def slice_detail(trace: Trace, row: int) -> dict[str, Any]:
    """One engine slice and, when it has one, its operator (name, module, shapes, bytes, call site)."""
    slices, _ = timeline_slices(trace)
    out = {name: slices.column(name)[row].as_py() for name in slices.column_names}
    op = _row_of(trace["ops"], "op_id", out.get("op_id"))
    if op is not None:
        out["op"] = op
        out["stack"] = stack_lines(trace, op["stack_id"]) if op.get("stack_id") is not None else []
    return out


def memory_event_detail(trace: Trace, op_id: int, region_id: int) -> dict[str, Any]:
    """What names an allocator event: its operator's name and call site (op_id -1: none) and its region's name."""
    op = _row_of(trace["ops"], "op_id", op_id if op_id >= 0 else None)
    region = _row_of(trace["regions"], "region_id", region_id)
    return {"operator": op and op["name"], "call_site": op and op["call_site"], "region": region and region["name"]}


def _row_of(table: pa.Table, id_column: str, value: int | None) -> dict[str, Any] | None:
    """The first row of a table whose id column holds `value`, as a dict (None: no such row, or no value)."""
    if value is None:
        return None
    hit = table.filter(pc.equal(table.column(id_column), value))
    return {name: hit.column(name)[0].as_py() for name in hit.column_names} if hit.num_rows else None


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
    "compiler": ("compiler", "compiler", "compile"),  # run by the compiler while it compiled: its lane, not the host's
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
                        # an all-null column reads as NaN floats in pandas: none of them is a module
                        "module": [m if isinstance(m, str) else None for m in part["module"].tolist()],
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

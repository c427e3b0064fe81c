"""Diffs and tables behind the pages, on demo traces whose contents are known (app/dev_samples.py)."""

from __future__ import annotations

import math
from pathlib import Path

from portscope.app.data.runs import regions_frame, run_row
from portscope.app.data.tables import (
    breakdown,
    numerics_frame,
    operator_detail,
    region_bands,
    region_ops_page,
    slice_detail,
)
from portscope.app.dev_samples import NORM_SITE, ODD_MODULE, ROPE_SITE, demo_trace
from portscope.ingest import read_trace
from portscope.ingest.diff import diff_call_sites, diff_operators, diff_signals, pair_regions
from portscope.ingest.report import region_report_data
from portscope.ingest.summary import summarize


def reports(kind: str = "eager") -> tuple[dict, dict]:
    trace = demo_trace(kind)
    return region_report_data(summarize(trace, 0)), region_report_data(summarize(trace, 1))


def test_diff_signals_cold_vs_warm() -> None:
    cold, warm = reports()
    frame = diff_signals(cold, warm).set_index("signal")
    assert frame.loc["dispatch/cpu_fallback", ["a_count", "b_count", "delta"]].tolist() == [14, 10, -4]
    assert math.isclose(frame.loc["dispatch/cpu_fallback", "ratio"], 10 / 14)
    assert frame.loc["dispatch/recompile", ["a_count", "b_count", "delta"]].tolist() == [7, 0, -7]
    assert frame.loc["dispatch/warm_miss", "ratio"] == math.inf
    assert frame.loc["host_bounce/dtype_cast", ["a_bytes", "b_bytes", "delta_bytes"]].tolist() == [40960, 40960, 0]
    assert frame.loc["d2h volume (bytes)", ["a_count", "b_count"]].tolist() == [2048, 2048]


def test_diff_signals_agree_with_the_report_for_every_signal() -> None:
    cold, warm = reports()
    frame = diff_signals(cold, warm).set_index("signal")
    for side, report in (("a_count", cold), ("b_count", warm)):
        for s in report["signals"]:
            assert frame.loc[s["signal"], side] == s["count"]


def test_diff_operators_classifies_changes() -> None:
    cold, warm = reports()
    frame = diff_operators(cold, warm)
    change = {(r.signal, r.operator): r.change for r in frame.itertuples()}
    assert change[("dispatch/cpu_fallback", "aten::neg")] == "removed"
    assert change[("dispatch/warm_miss", "aten::mul.Tensor")] == "added"
    assert change[("dispatch/cpu_fallback", "aten::rsqrt")] == "same"
    assert frame["change"].iloc[0] == "added"  # added first, then removed...
    sites = diff_call_sites(cold, warm).set_index("call_site")
    assert sites.loc[ROPE_SITE, ["a_count", "b_count"]].tolist() == [4, 2]


def test_pair_regions_defaults() -> None:
    eager = regions_frame(demo_trace("eager"))
    compiled = regions_frame(demo_trace("compiled"))
    assert pair_regions(eager, eager, same_run=True) == (0, 1)  # cold vs warm of "generate"
    assert pair_regions(eager, compiled, same_run=False) == (0, 0)


def test_run_row_totals(tmp_path: Path) -> None:
    row = run_row(demo_trace("eager"), "abc", "demo.arrow")
    # cold + warm + narrow rmsnorm (top level): 14 + 10 + 10 fallbacks
    assert (row.fallbacks, row.bounces, row.compiles, row.d2h_bytes) == (34, 20, 7, 4096)
    assert row.status == "not-clean" and row.modes == "eager"
    compiled = run_row(demo_trace("compiled"), "def", "c.arrow")
    assert compiled.status == "not-clean" and compiled.compiles == 2  # d2h of .item() keeps it not clean
    predicted = run_row(demo_trace("predicted"), "p", "p.arrow")
    assert predicted.source == "predicted" and predicted.target == "demo-npu"


def test_breakdown_and_operator_detail() -> None:
    trace = demo_trace("eager")
    by_op = breakdown(trace, 0, by="operator", signal="dispatch/cpu_fallback").set_index("key")
    assert by_op["count"].to_dict() == {"aten::pow.Tensor_Scalar": 5, "aten::rsqrt": 5, "aten::neg": 4}
    by_module = breakdown(trace, 0, by="module").set_index("key")
    assert by_module.loc[ODD_MODULE, "count"] == 4
    assert by_module.loc["model.layers.0.input_layernorm", "bytes"] == 40960
    # by source line (file name, line, function): the norm's pow 5 + rsqrt 5 + dtype bounces 10; the user's line:
    # recompiles 7 + one d2h + one sync; rotate_half's neg 4
    by_line = breakdown(trace, 0, by="source line").set_index("key")
    assert by_line["count"].to_dict() == {"modeling_llama.py:72 (forward)": 20, "demo.py:18 (<module>)": 9,
                                          "modeling_llama.py:151 (rotate_half)": 4}
    detail = operator_detail(trace, 0, "dispatch/cpu_fallback", "aten::pow.Tensor_Scalar")
    assert detail["count"] == 5 and detail["reasons"] == {"dtype-not-supported": 5}
    assert detail["call_sites"] == {NORM_SITE: 5}
    assert detail["stack"][0].startswith("transformers/models/llama/modeling_llama.py:72")


def test_ops_pages_and_sorting() -> None:
    trace = demo_trace("eager")
    rows, total = region_ops_page(trace, 0, 0, 10)
    assert total == 40 and len(rows) == 10 and rows[0]["op_id"] == 0
    rows, _ = region_ops_page(trace, 0, 35, 50)
    assert [r["op_id"] for r in rows] == [35, 36, 37, 38, 39]
    rows, _ = region_ops_page(trace, 0, 0, 3, [{"colId": "op_id", "sort": "desc"}])
    assert [r["op_id"] for r in rows] == [39, 38, 37]


def test_bands_numerics_and_slices(demo_paths: dict[str, Path]) -> None:
    trace = read_trace(demo_paths["eager"])
    bands = region_bands(trace)
    assert [b[2] for b in bands] == ["generate [cold, eager]", "generate [warm, eager]", "rmsnorm [eager]"]
    assert bands[0][:2] == (0.0, 100_000.0)
    numerics = numerics_frame(trace).set_index("metric")
    assert numerics.loc["max_abs_diff", "value"] == 0.031
    detail = slice_detail(trace, 0)
    assert detail["engine"] == "host" and detail["op"]["name"] == "aten::mm"


def test_sorted_pages_by_partition_equal_a_stable_sort() -> None:
    """Pages of a one-column integer sort come from a partition, yet equal a full stable sort, ties included."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from portscope.app.data.tables import SORT_OUTRIGHT_ROWS, page_by_partition, sort_key_values

    rng = np.random.default_rng(0)
    small = rng.integers(0, 50, 1003)  # under 2^16 rows: sorted outright
    n = 200_003  # over 2^16 rows: the radix select
    many_ties = rng.integers(0, 50, n)
    skewed = np.where(rng.random(n) < 0.999, rng.integers(0, 1000, n), 10**15)  # most rows in the lowest bucket
    rising = np.repeat(np.arange(n // 2 + 1) * 7, 2)[:n]  # sorted, pairs of ties (descending: reversed)
    two_values = np.where(np.arange(n) % 3 == 0, 5, 10**12)  # a middle page spans both extreme buckets
    for durations in (small, many_ties, skewed, rising, two_values):
        size = len(durations)
        table = pa.Table.from_batches(pa.table({"dur_ns": pa.array(durations)}).to_batches(max_chunksize=size // 3 + 1))
        assert table.column("dur_ns").num_chunks == 3  # a mapped trace's column: parts taken one at a time
        for direction in ("ascending", "descending"):
            full = pc.sort_indices(table, sort_keys=[("dur_ns", direction)]).to_numpy()
            values = sort_key_values(table, None, [("dur_ns", direction)])
            starts = range(0, size, 100) if size < SORT_OUTRIGHT_ROWS else (0, 100, size // 3 - 50, size // 2, size - 30)
            for a in starts:
                assert (page_by_partition(values, a, a + 100) == full[a : a + 100]).all(), (size, direction, a)
    assert sort_key_values(table, None, [("dur_ns", "ascending"), ("dur_ns", "descending")]) is None
    names = pa.array([f"aten::op{i}" for i in rng.integers(0, 40, n)]).dictionary_encode()  # 40 names, many ties
    text = pa.Table.from_batches(pa.table({"name": names}).to_batches(max_chunksize=n // 3 + 1))
    for direction in ("ascending", "descending"):
        full = pc.sort_indices(pa.table({"name": names.cast(pa.string())}), sort_keys=[("name", direction)]).to_numpy()
        values = sort_key_values(text, None, [("name", direction)])
        for a in (0, 100, n // 3 - 50, n // 2, n - 30, 4950):  # 0, 100: within one name (~5,000 rows each); 4950: across two
            assert (page_by_partition(values, a, a + 100) == full[a : a + 100]).all(), (direction, a)
    one_name = pa.Table.from_batches(pa.table({"name": pa.array(["host"] * n).dictionary_encode()}).to_batches(max_chunksize=n // 3 + 1))
    assert page_by_partition(sort_key_values(one_name, None, [("name", "descending")]), n // 2, n // 2 + 5).tolist() == list(
        range(n // 2, n // 2 + 5))  # one value everywhere: rows in row order


def test_text_table_shows_missing_text_as_empty() -> None:
    import pandas as pd

    from portscope.app.components import text_table

    frame = pd.DataFrame({"metric": ["max_abs_diff", "verdict"], "value": [0.25, None], "text": [None, "defect"]})
    table = text_table(frame, [("metric", "Metric", None), ("value", "Value", None), ("text", "Text", None)])
    cells = [[td.children for td in tr.children] for tr in table.children[1].children]
    assert cells == [["max_abs_diff", "0.25", ""], ["verdict", "", "defect"]]


def test_a_change_in_bytes_reads_in_units_with_its_sign() -> None:
    """The compare page's "Δ bytes" (cuda_diff control -> test: d2d copies 1.6 GB -> 27.9 GB) and memory changes."""
    from portscope.ingest.catalog import format_signed_bytes

    assert [format_signed_bytes(v) for v in (26_095_297_936, -17_040, 1, 0, None, float("nan"))] == [
        "+26.1 GB", "−17.0 KB", "+1 B", "0 B", "-", "-"]  # fmt: skip


def test_ops_pages_of_a_nested_region_over_chunks_sorted_by_name_and_time() -> None:
    """A region's pages take only their rows from a two-chunk ops table (different dictionaries per chunk)."""
    import pyarrow as pa

    from portscope.ingest import TraceBuilder

    b = TraceBuilder()
    root = b.add_region("all")
    left, right = b.add_region("left", parent_id=root), b.add_region("right", parent_id=root)
    trace = b.build()
    halves = []
    for rows in (
        [(0, root, "b", 30), (1, left, "a", 10), (2, right, "c", 10)],
        [(3, left, "a", 20), (4, left, "c", 10), (5, right, "b", 20)],
    ):
        half = TraceBuilder()
        for op_id, region, name, dur in rows:
            half.ops.append(op_id=op_id, region_id=region, name=name, start_ns=op_id * 100, dur_ns=dur, placement="host",
                            bytes_in=0, bytes_out=0)  # fmt: skip
        halves.append(half.build()["ops"])
    trace.tables["ops"] = pa.concat_tables(halves)
    assert trace["ops"].column("name").num_chunks == 2

    def ids(region: int, start: int, end: int, sort: list | None = None, memo: dict | None = None) -> list[int]:
        remember = None if memo is None else (lambda key, make: memo[key] if key in memo else memo.setdefault(key, make()))
        rows, total = region_ops_page(trace, region, start, end, sort, remember=remember)
        return [total, *(r["op_id"] for r in rows)]

    assert ids(left, 0, 10) == [3, 1, 3, 4]  # total, then op ids
    assert ids(left, 1, 2) == [3, 3]
    assert ids(root, 4, 10) == [6, 4, 5]  # the root holds every op: a plain slice
    by_name_desc = [{"colId": "name", "sort": "desc"}]
    assert ids(left, 0, 10, by_name_desc) == [3, 4, 1, 3]  # c, then the two a's in row order
    assert ids(root, 2, 5, [{"colId": "name", "sort": "asc"}]) == [6, 0, 5, 2]  # a a | b b c | c
    assert ids(root, 0, 6, [{"colId": "dur_ns", "sort": "desc"}]) == [6, 0, 3, 5, 1, 2, 4]  # 30, 20 20, 10 10 10
    memo: dict = {}
    two_keys = [{"colId": "dur_ns", "sort": "asc"}, {"colId": "name", "sort": "desc"}]
    assert ids(right, 0, 5, two_keys, memo) == [2, 2, 5]  # right: c 10, b 20; a full sort, remembered
    assert sorted(memo) == ["ops-order:2:[('dur_ns', 'ascending'), ('name', 'descending')]", "ops-rows:2"]
    assert memo["ops-rows:2"].tolist() == [2, 5]


def test_pair_regions_in_one_run_without_modes_or_phases_pairs_siblings() -> None:
    # a converted run: its file's region (0) around "cold" (1) and "warm" (2), neither mode nor phase told apart;
    # ProfilerStep#1 (3) nested in cold. The default pair is cold against warm, not the file's region against cold.
    import pandas as pd

    regions = pd.DataFrame({"region_id": [0, 1, 2, 3], "parent_id": [None, 0, 0, 1],
                            "name": ["run.json", "cold", "warm", "ProfilerStep#1"],
                            "mode": ["compiled"] * 4, "phase": ["none"] * 4})  # fmt: skip
    assert pair_regions(regions, regions, same_run=True) == (1, 2)
    alone = regions[regions["region_id"].isin([0, 1])]  # no region has a sibling: the first two
    assert pair_regions(alone, alone, same_run=True) == (0, 1)

"""`portscope export --parquet`: the SQL views as Parquet partitioned by run, read by a distributed engine (Dask)."""

from __future__ import annotations

from pathlib import Path

import dask.dataframe as dd
import pyarrow.dataset as ds
import pytest
from dask.distributed import Client, LocalCluster

from portscope.app.cli import main
from portscope.ingest.sql import RUN, VIEWS, connect, open_runs, run_query

REPO = Path(__file__).resolve().parents[2]
RUNS = [REPO / "sample_traces" / f"{name}.arrow" for name in ("llama_fp16-npu_forward", "llama_fp16-npu_generate",
                                                               "llama_cuda_forward", "bert_small_h100")]
D2H = ("SELECT c.run, r.name AS region, count(*) AS copies, sum(c.bytes) AS d2h_bytes FROM copies c "
       "JOIN regions r USING (run, region_id) WHERE c.direction = 'd2h' GROUP BY ALL ORDER BY c.run, region")  # docs/sql.md, 3


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("parquet")
    assert main(["export", "--parquet", str(folder), *map(str, RUNS)]) == 0
    return folder


def test_every_view_is_written_per_run_with_the_views_columns(exported: Path) -> None:
    runs = sorted(p.name.removesuffix(".arrow") for p in RUNS)
    for view in VIEWS.values():
        assert sorted(p.name for p in (exported / view.name).iterdir()) == [f"run={r}" for r in runs], view.name
        dataset = ds.dataset(exported / view.name, partitioning="hive")
        assert dataset.schema.names == [c.name for c in view.columns] + [RUN.name], view.name


def test_dask_over_the_export_gives_the_numbers_of_portscope_sql(exported: Path) -> None:
    con = connect(open_runs(RUNS))
    try:
        expected = [tuple(r.values()) for r in run_query(con, D2H).table.to_pylist()]
    finally:
        con.close()
    assert len(expected) == 6 and expected[1] == ("llama_fp16-npu_forward", "forward:cold", 17, 21592)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, Client(cluster):
        copies = dd.read_parquet(exported / "copies")
        regions = dd.read_parquet(exported / "regions")[["run", "region_id", "name"]]
        copies, regions = copies.astype({"run": str}), regions.astype({"run": str})  # partitions read as categories
        d2h = copies[copies.direction == "d2h"].merge(regions, on=["run", "region_id"])
        frame = d2h.groupby(["run", "name"]).agg(copies=("bytes", "count"), d2h_bytes=("bytes", "sum")).compute()
    got = sorted((run, region, int(row.copies), int(row.d2h_bytes)) for (run, region), row in frame.iterrows())
    assert got == expected


def test_export_chrome_takes_one_trace_and_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--chrome", *map(str, RUNS[:2]), "-o", "x.json"]) == 2
    assert "--chrome exports one trace" in capsys.readouterr().err

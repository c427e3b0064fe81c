"""`portscope sql`: the views' columns, the command's inputs, outputs and errors, and the sandbox of the viewer."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from portscope.app.cli import main
from portscope.ingest.sql import RUN, VIEWS, Limits, QueryError, connect, open_runs, run_query, schema_text

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
BERT = SAMPLES / "bert_small_h100.arrow"
NPU = SAMPLES / "llama_fp16-npu_forward.arrow"


@pytest.fixture(scope="module")
def samples_con():
    con = connect(open_runs([SAMPLES]))
    yield con
    con.close()


def test_each_view_has_exactly_its_documented_columns_over_every_sample(samples_con) -> None:
    for view in VIEWS.values():
        described = [(r[0], r[1]) for r in samples_con.sql(f"DESCRIBE {view.name}").fetchall()]
        assert described == [(c.name, c.type) for c in (RUN, *view.columns)], view.name


def test_views_count_the_rows_of_the_tables_they_read(samples_con) -> None:
    def count(sql: str) -> dict[str, int]:
        return dict(samples_con.sql(sql).fetchall())

    # `portscope report`: 479 ops, 1 transfer, 4 signals (3 syncs) in bert_small_h100; its tables: 132 runtime calls,
    # engine slices on stream 7 (60) and DMA d2h (1), memory lanes (19 + 219 allocated, 18 + 218 reserved)
    bert = {name: count(f"SELECT run, count(*) FROM {name} GROUP BY run")["bert_small_h100"]
            for name in ("ops", "runtime", "copies", "signals", "syncs", "kernels", "memory", "flows", "regions")}
    assert bert == {"ops": 479, "runtime": 132, "copies": 1, "signals": 4, "syncs": 3, "kernels": 61, "memory": 474,
                    "flows": 61, "regions": 2}
    assert count("SELECT run, count(*) FROM runs GROUP BY run") == dict.fromkeys(
        [p.name.removesuffix(".arrow") for p in sorted(SAMPLES.glob("*.arrow"))], 1)
    assert count("SELECT run, count(*) FROM fallbacks GROUP BY run")["llama_fp16-npu_forward"] == 108


def test_schema_lists_every_view_and_column() -> None:
    text = schema_text()
    for view in VIEWS.values():
        assert f"{view.name}: {view.doc}" in text
        for column in view.columns:
            assert f"  {column.name} " in text


def test_runs_from_a_folder_a_glob_and_files_each_once(tmp_path: Path) -> None:
    runs = open_runs([SAMPLES, str(SAMPLES / "bert_*.arrow"), BERT])
    assert len(runs) == len(list(SAMPLES.glob("*.arrow")))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shutil.copy(BERT, tmp_path / "a" / "run.arrow")
    shutil.copy(NPU, tmp_path / "b" / "run.arrow")
    assert [r.name for r in open_runs([tmp_path / "a" / "run.arrow", tmp_path / "b" / "run.arrow"])] == [
        str(tmp_path / "a" / "run"), str(tmp_path / "b" / "run")]


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["sql", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_prints_an_aligned_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "SELECT direction, count(*) AS n, sum(bytes) AS bytes FROM copies GROUP BY ALL ORDER BY 1", NPU)
    assert code == 0
    assert out.splitlines() == ["direction   n  bytes", "---------  --  -----", "d2h        34  43184", "h2d        24  36736",
                                "(2 rows)"]  # report --json: per region d2h 17 copies, 21592 B; h2d 12, 18368 B


@pytest.mark.parametrize("fmt", ["csv", "json", "arrow", "parquet"])
def test_cli_writes_each_format(capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"syncs.{fmt}"
    code, _, err = _cli(capsys, "SELECT op_name, reason, call_site FROM syncs ORDER BY time_ns", BERT, "--format", fmt, "-o", out)
    assert code == 0 and "3 rows, 3 columns" in err
    if fmt == "csv":
        lines = out.read_text().splitlines()
        assert lines[0] == "op_name,reason,call_site" and lines[1] == "cudaDeviceSynchronize,cudaDeviceSynchronize,"
        assert lines[2].startswith("aten::item,item,transformers/modeling_attn_mask_utils.py:429")
    elif fmt == "json":
        assert [r["op_name"] for r in json.loads(out.read_text())] == ["cudaDeviceSynchronize", "aten::item", "cudaDeviceSynchronize"]
    else:
        table = pa.ipc.open_file(str(out)).read_all() if fmt == "arrow" else pq.read_table(out)
        assert table.column_names == ["op_name", "reason", "call_site"] and table.column("reason").to_pylist()[1] == "item"


def test_cli_csv_and_json_go_to_stdout_binary_formats_need_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "SELECT count(*) AS n FROM ops", BERT, "--format", "csv")
    assert (code, out) == (0, "n\n479\n")
    code, out, _ = _cli(capsys, "SELECT count(*) AS n FROM ops", BERT, "--format", "json")
    assert (code, json.loads(out)) == (0, [{"n": 479}])
    code, _, err = _cli(capsys, "SELECT 1", BERT, "--format", "parquet")
    assert code == 2 and "give -o FILE" in err


def test_cli_errors_are_one_message_and_status_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "notes.arrow"
    bad.write_text("not a trace")
    code, _, err = _cli(capsys, "SELECT 1", BERT, bad)
    assert code == 2 and err.startswith(f"portscope sql: {bad}: not a portscope trace")
    code, _, err = _cli(capsys, "SELEC name FROM ops", BERT)
    assert code == 2 and 'syntax error at or near "SELEC"' in err
    code, _, err = _cli(capsys, "SELECT nope FROM ops", BERT)
    assert code == 2 and 'Referenced column "nope" not found' in err
    code, _, err = _cli(capsys, "SELECT 1", str(tmp_path / "none*.arrow"))
    assert code == 2 and "no file matches" in err
    code, _, err = _cli(capsys, "SELECT 1", tmp_path / "missing.arrow")
    assert code == 2 and "missing.arrow: no such file" in err
    code, _, err = _cli(capsys, "SELECT 1")
    assert code == 2 and "at least one RUN" in err


def test_cli_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "--schema")
    assert code == 0 and out == schema_text()


def test_the_command_line_never_touches_files_through_sql(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    code, _, err = _cli(capsys, f"COPY (SELECT 1) TO '{target}'", BERT)
    assert code == 2 and "file system operations are disabled" in err and not target.exists()


def test_only_the_sql_command_module_and_no_duckdb_at_start_up() -> None:
    code = ("import sys; from portscope.app.cli import build_parser; build_parser('sql'); "
            "print('duckdb' in sys.modules, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


# the viewer's sandbox ------------------------------------------------------------------------------------------

SANDBOX = dataclasses.replace(Limits.sandbox(), seconds=1.0, rows=100, memory="256MB")


@pytest.fixture
def sandbox_con():
    con = connect(open_runs([BERT]), limits=SANDBOX)
    yield con
    con.close()


@pytest.mark.parametrize(("sql", "message"), [
    ("COPY (SELECT * FROM ops) TO '/tmp/portscope-escape.csv'", "only SELECT queries"),
    ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
    ("SELECT * FROM read_text('/etc/hostname')", "file system operations are disabled"),
    ("SELECT * FROM read_parquet('https://example.org/x.parquet')", "disabled"),
    ("ATTACH '/tmp/portscope-escape.db'", "only SELECT queries"),
    ("INSTALL httpfs", "only SELECT queries"),
    ("LOAD httpfs", "only SELECT queries"),
    ("SET enable_external_access = true", "only SELECT queries"),
    ("SELECT set_config('memory_limit', '100GB')", "does not exist"),
    ("CREATE TABLE x AS SELECT 1", "only SELECT queries"),
    ("DROP VIEW ops", "only SELECT queries"),
    ("SELECT 1; SELECT 2", "one statement"),
    ("SELECT count(*) FROM range(10000000) a, range(10000000) b", "stopped after 1 s"),
    ("SELECT list(repeat('x', 1000)) FROM range(10000000)", "memory limit"),
])  # fmt: skip
def test_the_sandbox_refuses_each_escape_cleanly(sandbox_con, sql: str, message: str) -> None:
    with pytest.raises(QueryError, match=message.replace("(", r"\(")):
        run_query(sandbox_con, sql, limits=SANDBOX)
    assert not Path("/tmp/portscope-escape.csv").exists() and not Path("/tmp/portscope-escape.db").exists()
    assert run_query(sandbox_con, "SELECT count(*) AS n FROM ops", limits=SANDBOX).table.to_pylist() == [{"n": 479}]


def test_the_sandbox_configuration_is_locked(sandbox_con) -> None:
    with pytest.raises(Exception, match="locked"):
        sandbox_con.execute("SET enable_external_access = true")
    with pytest.raises(Exception, match="locked"):
        sandbox_con.execute("SET memory_limit = '100GB'")


def test_a_huge_result_stops_at_the_row_limit_without_being_computed(sandbox_con) -> None:
    started = time.perf_counter()
    result = run_query(sandbox_con, "SELECT * FROM range(1000000000000)", limits=SANDBOX)
    assert (result.table.num_rows, result.truncated) == (100, True)
    assert time.perf_counter() - started < 5
    wide = dataclasses.replace(SANDBOX, rows=None, result_bytes=1 << 20)
    result = run_query(sandbox_con, "SELECT repeat('x', 10000) AS s FROM range(1000000)", limits=wide)
    assert result.truncated and result.table.nbytes <= 1 << 20


def test_a_runaway_query_does_not_stop_another_connection() -> None:
    runaway = connect(open_runs([BERT]), limits=SANDBOX)
    other = connect(open_runs([BERT]), limits=SANDBOX)
    caught: list[BaseException] = []

    def run() -> None:
        try:
            run_query(runaway, "SELECT count(*) FROM range(10000000) a, range(10000000) b", limits=SANDBOX)
        except QueryError as exc:
            caught.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.2)
    assert run_query(other, "SELECT count(*) AS n FROM kernels", limits=SANDBOX).table.to_pylist() == [{"n": 61}]
    thread.join(10)
    assert not thread.is_alive() and "time limit" in str(caught[0])
    runaway.close()
    other.close()


def test_region_depths_are_the_region_trees(samples_con) -> None:
    from portscope.ingest.region_tree import region_depths

    for run in open_runs([SAMPLES]):
        got = dict(samples_con.execute("SELECT region_id, depth FROM regions WHERE run = ?", [run.name]).fetchall())
        assert got == region_depths(run.trace), run.name
    assert samples_con.sql("SELECT max(depth) FROM regions").fetchall()[0][0] >= 2


def test_a_file_validated_once_is_not_read_through_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from portscope.ingest import sql

    copy = tmp_path / "copy.arrow"
    shutil.copy(BERT, copy)
    calls: list[bool] = []
    real = sql.read_trace
    monkeypatch.setattr(sql, "read_trace", lambda path, validate=True: calls.append(validate) or real(path, validate=validate))
    open_runs([copy])
    open_runs([copy])
    assert calls == [True, False]
    copy.touch()  # changed: validated again
    open_runs([copy])
    assert calls == [True, False, True]


def test_a_connection_holds_the_views_a_query_names() -> None:
    from portscope.ingest.sql import views_in

    assert views_in("WITH per AS (SELECT run FROM kernels) SELECT * FROM per JOIN Regions USING (run)") == ["regions", "kernels"]
    assert views_in('SELECT count(*) FROM "ops"') == ["ops"] and views_in("SELECT 1") == []
    con = connect(open_runs([BERT]), views=["ops"])
    try:
        names = {r[0] for r in con.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        assert names == {"ops", "t0_ops"}  # the view and the one table it reads (registered Arrow tables list as views)
    finally:
        con.close()

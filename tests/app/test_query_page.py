"""The Query page's answer as a plain function: rows and columns for the grid, DuckDB's message, the limits."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from portscope.app import urls
from portscope.app.pages import query
from portscope.app.pages.query import answer, run_options
from portscope.ingest import read_trace

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.fixture
def viewer(make_app):
    app = make_app(trace_paths=(SAMPLES,))
    with app.server.test_request_context("/"):
        yield app


def _id(name: str) -> str:
    return read_trace(SAMPLES / f"{name}.arrow").content_hash()


def test_answer_gives_grid_columns_and_rows(viewer) -> None:
    columns, rows, error, status = answer([_id("bert_small_h100")], "SELECT run, count(*) AS n, sum(dur) AS s, "
                                          "'a.b' AS \"x.y\" FROM kernels GROUP BY run")
    assert error is None and status.startswith("1 rows in")
    assert [(c["field"], c["headerName"], c.get("type")) for c in columns] == [
        ("c0", "run", None), ("c1", "n", "numericColumn"), ("c2", "s", "numericColumn"), ("c3", "x.y", None)]
    assert rows == [{"c0": "bert_small_h100", "c1": 61, "c2": 309437, "c3": "a.b"}]  # report --ops: 309.4 µs of device work


def test_a_column_says_its_type_so_the_next_query_never_keeps_an_earlier_ones(viewer) -> None:
    """The grid keeps a column's data type while its id stays: a text column where the last query had a number
    would read "Invalid Number". Each column says its type, and a column of another type is a new column."""
    bert = [_id("bert_small_h100")]
    first, rows, _, _ = answer(bert, "SELECT count(*) FROM fallbacks")
    second, rows, _, _ = answer(bert, "SELECT run, count(*) n, true AS ok, DATE '2024-01-02' AS day FROM ops GROUP BY run")
    assert [(c["field"], c["cellDataType"]) for c in first] == [("c0", "number")]
    assert [(c["field"], c["cellDataType"]) for c in second] == [("c0", "text"), ("c1", "number"), ("c2", "boolean"), ("c3", "text")]
    assert first[0]["colId"] != second[0]["colId"]  # a new column to the grid, not the number column renamed
    assert rows == [{"c0": "bert_small_h100", "c1": 479, "c2": True, "c3": "2024-01-02"}]


def test_headers_wrap_and_name_the_column_on_hover(viewer) -> None:
    columns, _, _, _ = answer([_id("bert_small_h100")], 'SELECT 1 AS "Shared memory bytes"')
    assert columns[0]["wrapHeaderText"] and columns[0]["autoHeaderHeight"]
    assert columns[0]["headerTooltip"] == columns[0]["headerName"] == "Shared memory bytes"


def test_every_listed_run_is_offered(viewer) -> None:
    assert len(run_options([])) == len(list(SAMPLES.glob("*.arrow")))


def test_bad_queries_and_escapes_answer_with_a_message_under_the_box(viewer) -> None:
    bert = [_id("bert_small_h100")]
    for sql, words in [("SELECT nope FROM ops", 'Referenced column "nope" not found'),
                       ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
                       ("ATTACH '/tmp/x.db'", "only SELECT queries"), ("SET threads = 64", "only SELECT queries")]:
        columns, rows, error, status = answer(bert, sql)
        assert (columns, rows, status) == ([], [], "") and words in error.children.children
    assert "Tick at least one run" in answer([], "SELECT 1")[2].children.children
    assert "no run 'ffffffffffffffff' here" in answer(["ffffffffffffffff"], "SELECT 1")[2].children.children


def test_a_huge_result_is_cut_at_the_row_limit_and_says_so(viewer) -> None:
    _, rows, error, status = answer([_id("bert_small_h100")], "SELECT * FROM range(1000000000000)")
    assert error is None and len(rows) == 10_000 and "the first 10,000 only" in status


def test_query_url_carries_runs_and_sql() -> None:
    assert urls.query(["a", "b"], "SELECT 1") == "/query?runs=a%2Cb&sql=SELECT+1"
    assert urls.query() == "/query"


def test_the_runs_view_names_files_not_server_paths(viewer) -> None:
    _, rows, error, _ = answer([_id("bert_small_h100")], "SELECT run, file, source FROM runs")
    assert error is None and rows == [{"c0": "bert_small_h100", "c1": "bert_small_h100.arrow", "c2": "converted"}]


def test_a_runaway_query_is_interrupted_while_the_server_answers_others(make_app, monkeypatch: pytest.MonkeyPatch) -> None:
    quick = dataclasses.replace(query.Limits.sandbox(), seconds=1.5)

    class Quick(query.Limits):
        @classmethod
        def sandbox(cls) -> query.Limits:
            return quick

    monkeypatch.setattr(query, "Limits", Quick)
    app = make_app(trace_paths=(SAMPLES,))
    bert = [_id("bert_small_h100")]
    answers: list = []

    def runaway() -> None:
        with app.server.test_request_context("/"):
            answers.append(answer(bert, "SELECT count(*) FROM range(10000000) a, range(10000000) b"))

    thread = threading.Thread(target=runaway)
    started = time.perf_counter()
    thread.start()
    time.sleep(0.3)
    assert app.server.test_client().get("/api/runs").status_code == 200
    with app.server.test_request_context("/"):
        assert answer(bert, "SELECT count(*) AS n FROM ops")[1] == [{"c0": 479}]
    thread.join(15)
    assert not thread.is_alive() and time.perf_counter() - started < 10
    assert "stopped after 1.5 s" in answers[0][2].children.children

"""One verdict: the runs page, the run page, the region page, `report --json` and `check` agree on every sample."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from portscope.app.components import STATUS_TEXT
from portscope.app.context import store
from portscope.app.pages import region
from portscope.app.pages.common import region_rows
from portscope.ingest import read_trace, write_trace
from portscope.ingest.budget import METRICS
from portscope.ingest.builder import TraceBuilder
from portscope.ingest.catalog import Status, group_counts, worst_status
from portscope.ingest.report import trace_report_data
from portscope.ingest.schema import Mode, SignalKind, Source
from portscope.ingest.summary import summarize
from portscope.ingest.trace import RunInfo

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_traces").glob("*.arrow"))


def _texts(component: Any) -> list[str]:
    if component is None:
        return []
    if isinstance(component, str | int | float):
        return [str(component)]
    if isinstance(component, list | tuple):
        return [t for c in component for t in _texts(c)]
    return [t for name in ("children", "label") for t in _texts(getattr(component, name, None))]


def _pages_agree(app: Any, path: Path) -> None:
    trace = read_trace(path)
    run_id = trace.content_hash()
    report = trace_report_data(trace)
    by_id = {r["region_id"]: r for r in report["regions"]}
    with app.server.test_request_context("/"):
        runs_row = store().run_row(run_id, path.name)
        rows = region_rows(run_id, trace)
        for row in rows:  # run page vs report
            r = by_id[row["region_id"]]
            counts = group_counts({SignalKind(s["signal"]): s["count"] for s in r["signals"]})
            assert (row["status"], row["clean"], row["depth"], row["d2h_bytes"]) == (
                r["verdict"]["status"], r["verdict"]["clean"], r["depth"], r["d2h_bytes"]), (path.name, r["region"])
            assert {k: row[k] for k in counts} == counts
            summary = summarize(trace, row["region_id"])  # check's budgets read the same summary
            for s in r["signals"]:
                assert METRICS[SignalKind(s["signal"]).short].measure(summary) == s["count"]
        for row in [r for r in rows if r["depth"] == 0][:3]:  # region page shows the report's verdict
            page = region.layout(run_id=run_id, region=row["name"], n=str(row["nth"]))
            text = _texts(page)
            assert STATUS_TEXT[row["status"]] in text
            assert all(reason in text for reason in by_id[row["region_id"]]["verdict"]["reasons"])
    top = [r for r in rows if r["depth"] == 0]
    assert runs_row.status == report["totals"]["status"] == worst_status(Status(r["status"]) for r in top).value
    for key in ("fallbacks", "bounces", "compiles", "d2h_bytes"):  # run totals: top-level regions only
        assert getattr(runs_row, key) == sum(r[key] for r in top), key
    assert runs_row.d2h_bytes == report["totals"]["transfer_bytes"]["d2h"]


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_every_page_and_command_agree_on_every_sample(path: Path, make_app: Any) -> None:
    _pages_agree(make_app(trace_paths=(path,)), path)


def test_run_totals_never_double_count_nested_regions() -> None:
    """cuda_diff_test: the run moved 117,936 bytes device-to-host (its one top-level region); summing every
    nested region counts the same copies up to three more times."""
    report = trace_report_data(read_trace(SAMPLES[0].parent / "cuda_diff_test.arrow"))
    assert report["totals"]["transfer_bytes"]["d2h"] == 117_936
    assert [r["depth"] for r in report["regions"]][:3] == [0, 1, 2]
    assert sum(r["d2h_bytes"] for r in report["regions"]) > 117_936


def test_a_region_that_raised_is_an_error_everywhere(make_app: Any, tmp_path: Path) -> None:
    b = TraceBuilder(RunInfo(source=Source.MEASURED))
    b.add_region("step", start_ns=0, dur_ns=10, mode=Mode.EAGER, device="cpu", error="RuntimeError: boom")
    path = write_trace(b.build(), tmp_path / "raised.arrow")
    report = trace_report_data(read_trace(path))
    assert report["regions"][0]["verdict"] == {"clean": False, "status": "error", "reasons": ["error: RuntimeError: boom"]}
    assert report["totals"]["status"] == "error"
    _pages_agree(make_app(trace_paths=(path,)), path)


def test_check_fails_on_a_region_that_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from portscope.app.cli import main

    b = TraceBuilder(RunInfo(source=Source.MEASURED))
    b.add_region("step", start_ns=0, dur_ns=10, mode=Mode.EAGER, device="cpu", error="RuntimeError: boom")
    b.add_region("fine", start_ns=20, dur_ns=10, mode=Mode.EAGER, device="cpu")
    path = write_trace(b.build(), tmp_path / "raised.arrow")
    assert main(["check", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == ["error: region step raised RuntimeError: boom"]


def test_the_text_report_says_the_status() -> None:
    from portscope.ingest.report import format_trace

    verdicts = [line.strip() for line in format_trace(read_trace(SAMPLES[0].parent / "llama_fp16-npu_eager_vs_compiled.arrow"))
                .splitlines() if line.strip().startswith("verdict:")]
    # eager:cold, eager:warm, compiled:cold (one graph compiled, nothing else), compiled:warm
    assert [v.split(" --")[0] for v in verdicts] == ["verdict: NOT clean", "verdict: NOT clean",
                                                    "verdict: clean (compiles only)", "verdict: clean"]

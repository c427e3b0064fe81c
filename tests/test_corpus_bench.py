"""bench/corpus.py: one row per file of a folder, each converted in its own process; refusals say why."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def _corpus():  # bench/ is not a package: load the script as a module
    spec = importlib.util.spec_from_file_location("corpus_bench", ROOT / "bench" / "corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small good files (a ROCm Kineto export, a TORCH_TRACE log) and one bad (empty) file."""
    folder = tmp_path_factory.mktemp("corpus")
    shutil.copy(FIXTURES / "kineto" / "rocm_mi250_small.json.gz", folder)
    for log in (FIXTURES / "torch_trace").iterdir():
        shutil.copy(log, folder)
    (folder / "bad").mkdir()
    shutil.copy(FIXTURES / "bad_inputs" / "empty.json", folder / "bad")
    (folder / ".hidden").write_text("not looked at")
    return folder


@pytest.fixture(scope="module")
def rows(folder: Path) -> list[dict]:
    corpus = _corpus()
    return [corpus.run_child(path, folder, timeout_s=300) for path in corpus.trace_files(folder)]


def test_one_row_per_file_with_its_format_and_refusal(rows: list[dict]) -> None:
    picked = [(r["file"], r["format"], r["outcome"], r["refused"]) for r in rows]
    assert picked == [
        ("bad/empty.json", "", "refused", True),
        ("graph_breaks_small.log", "torch-trace", "converted", False),
        ("rocm_mi250_small.json.gz", "kineto", "converted", False),
    ]


def test_refused_says_why_and_converted_count_their_events(rows: list[dict]) -> None:
    empty, log, rocm = rows
    assert empty["why"].endswith("empty.json: the file is empty (0 bytes)") and empty["events"] is None
    assert rocm["events"] == 220  # the ROCm export's traceEvents (../shared/fixtures/README.md, counted with a JSON reader)
    assert log["events"] > 0 and log["why"] == ""
    for row in rows:
        assert row["seconds"] is not None and 0 <= row["seconds"] < 60
        assert 20 < row["peak_rss_mb"] < 2000  # an interpreter with pyarrow loaded, in MB


def test_table_and_json_from_the_command_line(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _corpus()
    assert corpus.main([str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["file", "format", "events", "seconds", "peak", "RSS", "MB", "refused", "why"]
    assert lines[1].split()[:3] == ["bad/empty.json", "-", "-"]
    assert lines[1].endswith("yes      the file is empty (0 bytes)")
    assert lines[3].split()[:3] == ["rocm_mi250_small.json.gz", "kineto", "220"]
    assert lines[-1] == "3 files: 2 converted, 1 refused, 0 crashed, 0 timed out"
    assert corpus.main([str(folder), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["file"], r["refused"]) for r in listed] == [("bad/empty.json", True), ("graph_breaks_small.log", False),
                                                           ("rocm_mi250_small.json.gz", False)]


def test_a_file_past_the_timeout_is_not_a_refusal(folder: Path) -> None:
    row = _corpus().run_child(folder / "rocm_mi250_small.json.gz", folder, timeout_s=0.01)
    assert (row["outcome"], row["refused"], row["why"]) == ("timed out", False, "ran past 0.01 s")

"""In the browser: several rank files dropped at once upload as one multi-rank run (one multipart request)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from test_upload_ranks import RANKS

from portscope.ingest.ranks import convert_ranks

pytestmark = pytest.mark.browser


def test_rank_files_dropped_together_are_one_run(dash_duo, make_app, tmp_path: Path) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for name, doc in RANKS.items():
        (folder / name).write_text(json.dumps(doc))
    expected = convert_ranks(folder, tmp_path / "expected.arrow", jobs=1)[1]
    dash_duo.start_server(make_app(trace_paths=()))
    dash_duo.wait_for_contains_text("#runs-table", "No traces yet", timeout=15)
    upload = dash_duo.driver.find_element(By.ID, "upload-file-input")
    upload.send_keys("\n".join(str(folder / name) for name in RANKS))
    dash_duo.wait_for_contains_text("#upload-status", "1 loaded", timeout=30)
    dash_duo.wait_for_contains_text("#runs-list", expected, timeout=10)
    assert dash_duo.get_logs() == []


def kineto_export(doc: dict) -> dict:
    """A rank's trace laid out as the PyTorch profiler writes it: distributedInfo at its head, before its events."""
    return {"schemaVersion": 1, "distributedInfo": doc["distributedInfo"],
            **{k: v for k, v in doc.items() if k not in ("schemaVersion", "distributedInfo")}}


def test_rank_files_named_without_a_rank_are_one_run_by_their_distributed_info(dash_duo, make_app, tmp_path: Path) -> None:
    """No rank in the names: the browser reads each file's head (a .json.gz unpacked) for its distributedInfo."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    names = {"rank0.json": "worker-a.pt.trace.json", "rank1.json": "worker-b.pt.trace.json.gz",
             "rank2.json": "host-c.json"}  # fmt: skip
    for rank_name, name in names.items():
        data = json.dumps(kineto_export(RANKS[rank_name])).encode()
        (folder / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    expected = convert_ranks(folder, tmp_path / "expected.arrow", jobs=1)[1]
    dash_duo.start_server(make_app(trace_paths=()))
    dash_duo.wait_for_contains_text("#runs-table", "No traces yet", timeout=15)
    upload = dash_duo.driver.find_element(By.ID, "upload-file-input")
    upload.send_keys("\n".join(str(folder / name) for name in names.values()))
    dash_duo.wait_for_contains_text("#upload-status", "1 loaded", timeout=30)
    dash_duo.wait_for_contains_text("#runs-list", expected, timeout=10)
    assert dash_duo.get_logs() == []


def test_traces_without_ranks_dropped_together_stay_separate_runs(dash_duo, make_app, tmp_path: Path) -> None:
    """Two traces with no rank anywhere, and two single-process runs (world size 1, both rank 0): separate runs."""
    folder = tmp_path / "plain"
    folder.mkdir()
    plain = {k: v for k, v in RANKS["rank0.json"].items() if k != "distributedInfo"}
    alone = kineto_export({**RANKS["rank0.json"], "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}})
    (folder / "first.json").write_text(json.dumps(plain))
    (folder / "second.json").write_text(json.dumps({**plain, "baseTimeNanoseconds": plain["baseTimeNanoseconds"] + 1}))
    (folder / "alone-a.json").write_text(json.dumps(alone))
    (folder / "alone-b.json").write_text(json.dumps({**alone, "baseTimeNanoseconds": alone["baseTimeNanoseconds"] + 1}))
    dash_duo.start_server(make_app(trace_paths=()))
    dash_duo.wait_for_contains_text("#runs-table", "No traces yet", timeout=15)
    upload = dash_duo.driver.find_element(By.ID, "upload-file-input")
    for pair in (("first.json", "second.json"), ("alone-a.json", "alone-b.json")):
        upload.send_keys("\n".join(str(folder / n) for n in pair))
        for name in pair:  # each its own run, named after its file (a multi-rank run is named "N rank files")
            dash_duo.wait_for_contains_text("#runs-list", name, timeout=30)
    assert "rank files" not in dash_duo.find_element("#runs-list").text
    assert dash_duo.get_logs() == []

"""In the browser: several rank files dropped at once upload as one multi-rank run (one multipart request)."""

from __future__ import annotations

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

"""In the browser: an upload of no format portscope knows says so in one line, the formats tried folded under it.

Run alone:  DASH_TEST_CHROMEPATH=/usr/bin/chromium .venv/bin/python -m pytest --headless tests/app/test_upload_errors_browser.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from test_upload_errors import PNG, TRIED

pytestmark = pytest.mark.browser
SHOTS = Path("/tmp/appfix1")


def test_an_unrecognised_upload_is_one_line_and_the_formats_tried_unfold(dash_duo, make_app, tmp_path: Path) -> None:
    picture = tmp_path / "picture.png"
    picture.write_bytes(PNG)
    dash_duo.start_server(make_app(trace_paths=()))
    dash_duo.wait_for_contains_text("#runs-table", "No traces yet", timeout=15)
    dash_duo.driver.find_element(By.ID, "upload-file-input").send_keys(str(picture))
    dash_duo.wait_for_contains_text("#upload-status", "0 loaded, 1 failed", timeout=30)
    box = dash_duo.find_element("#upload-messages .problem")
    assert box.text == "picture.png: not a trace portscope reads (unrecognised content)\nformats tried"  # folded
    SHOTS.mkdir(exist_ok=True)
    dash_duo.driver.save_screenshot(str(SHOTS / "upload-unrecognised.png"))

    box.find_element(By.CSS_SELECTOR, "details summary").click()
    listed = box.find_element(By.CSS_SELECTOR, "details pre")
    assert listed.is_displayed() and [line.strip() for line in listed.text.splitlines()] == [f"- {t}" for t in TRIED]
    dash_duo.driver.save_screenshot(str(SHOTS / "upload-unrecognised-open.png"))
    logs = dash_duo.get_logs()  # the only console entry: the browser's note of the 422 answer
    assert all("api/upload" in entry["message"] and "422" in entry["message"] for entry in logs), logs

"""Large uploads of other formats convert in the background: 202 with a job, progress polled, then the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from portscope.ingest.convert import load_any

UPLOAD = {"X-Portscope-Upload": "1"}
ALEXNET = Path(__file__).parents[1] / "fixtures" / "kineto" / "cuda_alexnet_small.json.gz"  # 24,808 bytes, 1,408 events


def _wait(client, job: str, timeout_s: float = 60.0) -> list[dict]:
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.get(f"/api/upload/{job}")
        assert status.status_code == 200
        seen.append(status.json)
        if "ok" in status.json:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"conversion {job} did not finish: {seen[-1]}")


def test_large_upload_converts_in_the_background_and_names_its_run(make_app, tmp_path: Path) -> None:
    client = make_app(background_convert_bytes=10_000).server.test_client()
    answer = client.post("/api/upload?name=alexnet.json.gz", data=ALEXNET.read_bytes(), headers=UPLOAD)
    assert answer.status_code == 202 and answer.json["ok"] and answer.json["bytes"] == 24_808
    seen = _wait(client, answer.json["job"])
    done = seen[-1]
    assert done["ok"] and done["stage"] == "done"
    assert done["run_id"] == load_any(ALEXNET, name="alexnet.json.gz").content_hash()  # the run named as uploaded
    assert (done["done_bytes"], done["total_bytes"], done["events"]) == (24_808, 24_808, 1_408)
    assert client.get(f"/api/run/{done['run_id']}").json["source"] == "converted"
    assert list((tmp_path / "store" / "incoming").iterdir()) == []  # the job deleted the upload


def test_the_job_process_converts_at_a_lower_priority_than_the_server(tmp_path: Path) -> None:
    """The job's entry point (what `python -m portscope.app.upload_jobs` runs) lowers its own priority by 10 before
    converting: the viewer's requests get the CPU first while a multi-GB upload converts."""
    upload = tmp_path / "alexnet.json.gz"
    upload.write_bytes(ALEXNET.read_bytes())
    (tmp_path / "runs").mkdir()
    status = tmp_path / "status.json"
    code = ("import os, sys; from portscope.app.upload_jobs import main; "
            "main(sys.argv[1:]); print(os.nice(0))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "runs"), str(upload), "alexnet.json.gz", str(status)],
                         capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
    assert int(out.stdout.split()[-1]) == min(os.nice(0) + 10, 19)
    done = json.loads(status.read_text())
    assert done["ok"] and (tmp_path / "runs" / f"{done['run_id']}.arrow").is_file()
    assert done["run_id"] == load_any(ALEXNET, name="alexnet.json.gz").content_hash()  # the run named as uploaded
    assert not upload.exists()  # the job owns the upload and deletes it


def test_small_upload_still_answers_with_the_run(make_app) -> None:
    client = make_app().server.test_client()  # 32 MiB threshold: converted in the request
    answer = client.post("/api/upload?name=alexnet.json.gz", data=ALEXNET.read_bytes(), headers=UPLOAD)
    assert answer.status_code == 200 and answer.json["run_id"] == load_any(ALEXNET, name="alexnet.json.gz").content_hash()


def test_background_failure_names_the_file_and_unknown_jobs_are_404(make_app) -> None:
    client = make_app(background_convert_bytes=10).server.test_client()
    answer = client.post("/api/upload?name=cut.json", data=b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1,', headers=UPLOAD)
    assert answer.status_code == 202
    done = _wait(client, answer.json["job"])[-1]
    assert done["ok"] is False and done["stage"] == "failed" and done["error"].startswith("cut.json: ")
    assert client.get("/api/upload/" + "0" * 32).status_code == 404
    assert client.get("/api/upload/..secret").status_code == 404  # not a job id: never a file name


@pytest.mark.browser
def test_page_follows_a_background_conversion_to_its_run(dash_duo, make_app, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    dash_duo.start_server(make_app(trace_paths=(), background_convert_bytes=10_000))
    dash_duo.wait_for_contains_text("#runs-table", "No traces yet", timeout=15)
    dash_duo.driver.find_element(By.ID, "upload-file-input").send_keys(str(ALEXNET))
    rid = load_any(ALEXNET).content_hash()
    dash_duo.wait_for_contains_text("#upload-messages", "Loaded cuda_alexnet_small.json.gz", timeout=30)
    dash_duo.wait_for_contains_text("#upload-status", "1 loaded", timeout=10)
    dash_duo.wait_for_contains_text("#runs-table", "cuda_alexnet_small.json.gz", timeout=10)  # named by its file
    dash_duo.find_element(f"#upload-messages a[href='/run/{rid}']").click()
    dash_duo.wait_for_contains_text("#regions-list", "cuda_alexnet_small.json.gz", timeout=15)  # the file, not traceName
    dash_duo.wait_for_text_to_equal("#run-file", f"uploaded as cuda_alexnet_small.json.gz · {rid}.arrow", timeout=10)
    assert dash_duo.get_logs() == []


def test_the_status_keeps_being_saved_while_a_stage_reports_nothing_and_stops_before_the_end(tmp_path: Path) -> None:
    """While writing (no progress calls), the heartbeat saves the status so its elapsed time goes on; it is stopped
    and joined when the conversion's body ends, so the final status written after it is the one that stays."""
    from portscope.app.upload_jobs import JobProgress, heartbeat
    from portscope.ingest import progress

    saves: list[str] = []

    class Counted(JobProgress):
        def save(self, *, force: bool = False, **extra) -> None:
            saves.append("final" if "ok" in extra else "beat")
            super().save(force=force, **extra)

    status = tmp_path / "status.json"
    listener = Counted(status, "big.json")
    listener.stage(progress.Stage.WRITING)
    saves.clear()
    with heartbeat(listener, every_s=0.05):
        time.sleep(0.6)  # nothing reported meanwhile, as while the Arrow file is written
    assert len(saves) >= 5 and set(saves) == {"beat"}
    listener.save(force=True, ok=True, run_id="r")
    time.sleep(0.2)
    assert saves[-1] == "final"  # no beat after the end
    assert json.loads(status.read_text())["ok"] is True

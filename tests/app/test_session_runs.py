"""This browser's run list names each upload by the file uploaded (not `upload <run id>`), reads what earlier
versions stored (bare run ids) and skips what is not an entry (the list lives in the browser's localStorage)."""

from __future__ import annotations

from pathlib import Path

from portscope.app.pages.run import file_text
from portscope.app.shell import apply_upload_results, session_entries

UPLOAD = {"X-Portscope-Upload": "1"}
ALEXNET = Path(__file__).parents[1] / "fixtures" / "kineto" / "cuda_alexnet_small.json.gz"

RID_A, RID_B = "0123456789abcdef", "fedcba9876543210"


def test_entries_old_and_new_and_malformed() -> None:
    stored = [RID_A, [RID_B, "step.json.gz"], [RID_A], 7, None, [RID_B, 3], {"run": RID_A}, [RID_A, ""]]
    assert session_entries(stored) == [(RID_A, None), (RID_B, "step.json.gz"), (RID_B, None), (RID_A, None)]
    assert session_entries(None) == [] and session_entries({"a": 1}) == [] and session_entries("x") == []
    assert session_entries([[RID_A, "n" * 300]]) == [(RID_A, "n" * 200)]


def test_a_batch_adds_named_runs_once_and_says_what_failed() -> None:
    batch = {"results": [
        {"ok": True, "file": "a.json", "run_id": RID_A},
        {"ok": False, "file": "bad.json", "error": "bad.json: not a trace"},
        {"ok": True, "file": "a_again.json", "run_id": RID_A},
    ]}  # fmt: skip
    runs, messages = apply_upload_results(batch, [RID_B])  # an entry stored by an earlier version
    assert runs == [[RID_B, None], [RID_A, "a_again.json"]]  # one row a run: the latest upload's name
    assert messages == [
        {"ok": True, "file": "a.json", "run_id": RID_A},
        {"ok": False, "file": "bad.json", "error": "bad.json: not a trace"},
        {"ok": True, "file": "a_again.json", "run_id": RID_A},
    ]


def test_the_run_list_shows_the_uploaded_file_name_to_its_browser_only(make_app, tmp_path: Path) -> None:
    from portscope.app.pages.runs import runs_rows

    app = make_app(trace_paths=())
    client = app.server.test_client()
    rid = client.post("/api/upload?name=alexnet.json.gz", data=ALEXNET.read_bytes(), headers=UPLOAD).json["run_id"]
    with app.server.test_request_context():
        assert [(r["run_id"], r["file"]) for r in runs_rows([[rid, "alexnet.json.gz"]])[0]] == [(rid, "alexnet.json.gz")]
        assert [r["file"] for r in runs_rows([[rid, "mine.json.gz"]])[0]] == ["mine.json.gz"]  # cached row, another name
        assert [r["file"] for r in runs_rows([rid])[0]] == [f"upload {rid}"]  # an entry without a name


def test_the_run_page_names_the_upload_in_the_browser_that_sent_it() -> None:
    page = {"run_id": RID_A, "file": f"{RID_A}.arrow"}
    assert file_text(page, [[RID_B, "other.json"], [RID_A, "step 3.json.gz"]]) == f"uploaded as step 3.json.gz · {RID_A}.arrow"
    assert file_text(page, [[RID_B, "other.json"]]) == f"{RID_A}.arrow"  # another browser: the file only
    assert file_text(page, [RID_A]) == f"{RID_A}.arrow"  # an entry of an earlier version: no name
    assert file_text(None, None) == ""

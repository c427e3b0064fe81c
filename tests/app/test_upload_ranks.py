"""Uploads of a multi-rank run: a .zip of per-rank traces, or several rank files in one drop, is one run."""

from __future__ import annotations

import io
import json
import sys
import time
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "ingest"))
from test_ranks import BASE, kineto  # noqa: E402

from portscope.ingest.ranks import convert_ranks  # noqa: E402

UPLOAD = {"X-Portscope-Upload": "1"}
RANKS = {"rank0.json": kineto(0), "rank1.json": kineto(1, step=150.0, gemm=90.0, base=BASE + 1_000_000),
         "rank2.json": kineto(2)}  # fmt: skip


def zipped(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def rank_bytes() -> dict[str, bytes]:
    return {name: json.dumps(doc).encode() for name, doc in RANKS.items()}


@pytest.fixture
def expected_run_id(tmp_path: Path) -> str:
    folder = tmp_path / "expected"
    folder.mkdir()
    for name, data in rank_bytes().items():
        (folder / name).write_bytes(data)
    return convert_ranks(folder, tmp_path / "expected.arrow", jobs=1)[1]


def _wait(client, job: str, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.get(f"/api/upload/{job}").json
        if "ok" in status:
            return status
        time.sleep(0.1)
    raise AssertionError(f"conversion {job} did not finish: {status}")


def _incoming_empty(tmp_path: Path) -> bool:
    return list((tmp_path / "store" / "incoming").iterdir()) == []


def test_a_zip_of_rank_files_is_one_run(make_app, tmp_path: Path, expected_run_id: str) -> None:
    client = make_app().server.test_client()
    answer = client.post("/api/upload?name=ranks.zip", data=zipped(rank_bytes()), headers=UPLOAD)
    assert answer.status_code == 200, answer.json
    assert answer.json["ok"] and answer.json["run_id"] == expected_run_id  # the same run as `portscope convert DIR`
    run = client.get(f"/api/run/{expected_run_id}")
    assert run.status_code == 200
    assert _incoming_empty(tmp_path)


def test_several_rank_files_in_one_drop_are_one_run(make_app, tmp_path: Path, expected_run_id: str) -> None:
    client = make_app().server.test_client()
    files = [(io.BytesIO(data), name) for name, data in rank_bytes().items()]
    answer = client.post("/api/upload/ranks", data={"file": files}, headers=UPLOAD, content_type="multipart/form-data")
    assert answer.status_code == 200, answer.json
    assert answer.json == {"file": "3 rank files", "ok": True, "run_id": expected_run_id,
                           "bytes": sum(map(len, rank_bytes().values())), "sha256": None}  # fmt: skip
    assert _incoming_empty(tmp_path)


def test_a_large_zip_converts_in_the_background(make_app, tmp_path: Path, expected_run_id: str) -> None:
    client = make_app(background_convert_bytes=1_000).server.test_client()
    answer = client.post("/api/upload?name=ranks.zip", data=zipped(rank_bytes()), headers=UPLOAD)
    assert answer.status_code == 202 and answer.json["ok"]
    done = _wait(client, answer.json["job"])
    assert done["ok"] and done["run_id"] == expected_run_id and done["stage"] == "done"
    assert _incoming_empty(tmp_path)


@pytest.mark.parametrize(("member", "problem"), [
    ("../rank9.json", "'../rank9.json' is not a plain file name"),
    ("/etc/rank9.json", "'/etc/rank9.json' is not a plain file name"),
    ("sub/rank9.json", "'sub/rank9.json' is not a plain file name"),
    ("..\\rank9.json", "is not a plain file name"),
    ("inner.zip", "'inner.zip': a zip inside the zip"),
    ("notes.txt", "'notes.txt': not a trace file name"),
])  # fmt: skip
def test_zip_members_are_checked(make_app, tmp_path: Path, member: str, problem: str) -> None:
    client = make_app().server.test_client()
    answer = client.post("/api/upload?name=ranks.zip", data=zipped({**rank_bytes(), member: b"{}"}), headers=UPLOAD)
    assert answer.status_code == 422 and not answer.json["ok"]
    assert answer.json["error"].startswith("ranks.zip: ") and problem in answer.json["error"]
    assert _incoming_empty(tmp_path) and not (tmp_path / "store" / "rank9.json").exists()


def test_a_zip_named_json_inside_is_refused(make_app, tmp_path: Path) -> None:
    client = make_app().server.test_client()
    inner = zipped({"rank5.json": b"{}"})
    answer = client.post("/api/upload?name=ranks.zip", data=zipped({**rank_bytes(), "rank3.json": inner}), headers=UPLOAD)
    assert answer.status_code == 422 and "'rank3.json': a zip inside the zip" in answer.json["error"]
    assert _incoming_empty(tmp_path)


def test_a_zip_bomb_stops_at_the_limit(make_app, tmp_path: Path) -> None:
    client = make_app(max_upload_bytes=200_000).server.test_client()
    bomb = zipped({"rank0.json": b" " * 5_000_000})  # ~5 KB packed, 5 MB unpacked
    answer = client.post("/api/upload?name=ranks.zip", data=bomb, headers=UPLOAD)
    assert answer.status_code == 422 and "'rank0.json' is 5.0 MB unpacked" in answer.json["error"]
    assert _incoming_empty(tmp_path)


def test_a_rank_that_cannot_be_read_is_named(make_app, tmp_path: Path) -> None:
    client = make_app().server.test_client()
    members = {**rank_bytes(), "rank1.json": b'{"traceEvents": [{"ph": "X"'}
    answer = client.post("/api/upload?name=ranks.zip", data=zipped(members), headers=UPLOAD)
    assert answer.status_code == 422
    assert answer.json["error"].startswith("ranks.zip: ") and "rank1.json: " in answer.json["error"]
    assert _incoming_empty(tmp_path)


def test_several_files_are_checked_by_name(make_app, tmp_path: Path) -> None:
    client = make_app().server.test_client()
    files = [(io.BytesIO(b"{}"), "rank0.json"), (io.BytesIO(b"{}"), "../rank1.json"), (io.BytesIO(b"PK"), "r.zip")]
    answer = client.post("/api/upload/ranks", data={"file": files}, headers=UPLOAD, content_type="multipart/form-data")
    assert answer.status_code == 422 and "3 rank files: 2 problems" in answer.json["error"]
    assert _incoming_empty(tmp_path)
    one = [(io.BytesIO(b"{}"), "rank0.json")]
    refused = client.post("/api/upload/ranks", data={"file": one}, content_type="multipart/form-data")
    assert refused.status_code == 400  # no upload header


def test_a_portscope_trace_is_not_read_as_a_zip_of_ranks(make_app, demo_paths: dict[str, Path]) -> None:
    client = make_app().server.test_client()
    answer = client.post("/api/upload?name=eager.arrow", data=demo_paths["eager"].read_bytes(), headers=UPLOAD)
    assert answer.status_code == 200 and answer.json["ok"]


def test_a_corrupt_member_is_one_clear_error(make_app, tmp_path: Path) -> None:
    client = make_app().server.test_client()
    data = bytearray(zipped(rank_bytes(), zipfile.ZIP_STORED))
    at = data.index(b'"traceEvents"') + 3
    data[at] ^= 0xFF  # the member's bytes no longer match its CRC
    answer = client.post("/api/upload?name=ranks.zip", data=bytes(data), headers=UPLOAD)
    assert answer.status_code == 422 and "ranks.zip: a member could not be unpacked (BadZipFile" in answer.json["error"]
    assert _incoming_empty(tmp_path)


def test_a_zip_of_torch_npu_rank_folders_is_one_run(make_app, tmp_path: Path) -> None:
    """Two *_ascend_pt folders under a top folder, as a user zips a job's output: what ingest.ranks reads of each is
    unpacked (the raw device data beside it is not), and the run is the one `portscope convert DIR` makes."""
    from test_ranks_ascend import ASCEND_OUTPUT, rank_folder

    root = tmp_path / "job"
    rank_folder(root, "node_2_ascend_pt", ("profiler_info_1.json", json.dumps({"rank_id": 1})), late=30)
    rank_folder(root, "node_1_ascend_pt", ("profiler_info_0.json", json.dumps({"rank_id": 0})))
    expected = convert_ranks(root, tmp_path / "expected.arrow", jobs=1)[1]
    members = {f"job/{p.relative_to(root).as_posix()}": p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    members["job/node_1_ascend_pt/PROF_000001/device_0/data/raw.bin"] = b"\x00" * 4096  # never unpacked
    assert f"job/node_1_ascend_pt/{ASCEND_OUTPUT}/kernel_details.csv" in members
    client = make_app().server.test_client()
    answer = client.post("/api/upload?name=npu_job.zip", data=zipped(members), headers=UPLOAD)
    assert answer.status_code == 200, answer.json
    assert answer.json["ok"] and answer.json["run_id"] == expected
    assert _incoming_empty(tmp_path)


def test_a_zip_of_torch_npu_folders_without_a_trace_view_is_named(make_app, tmp_path: Path) -> None:
    members = {"node_1_ascend_pt/profiler_info_0.json": b'{"rank_id": 0}',
               "node_1_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv": b""}
    client = make_app().server.test_client()
    answer = client.post("/api/upload?name=npu_job.zip", data=zipped(members), headers=UPLOAD)
    assert answer.status_code == 422
    assert "no *_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json" in json.dumps(answer.json)


def test_only_what_is_read_of_torch_npu_folders_is_unpacked(tmp_path: Path) -> None:
    from portscope.app.upload_ranks import unpack_rank_zip

    members = {"out/a_ascend_pt/profiler_info_0.json": b'{"rank_id": 0}',
               "out/a_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json": b"[]",
               "out/a_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv": b"x",
               "out/a_ascend_pt/PROF_1/device_0/data/raw.bin": b"\x00" * 64}
    (tmp_path / "in.zip").write_bytes(zipped(members))
    written = unpack_rank_zip(tmp_path / "in.zip", tmp_path / "out", "in.zip", 1 << 20)
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == [
        "a_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", "a_ascend_pt/profiler_info_0.json"]
    bad = {"../a_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json": b"[]"}
    (tmp_path / "bad.zip").write_bytes(zipped(bad))
    with pytest.raises(Exception, match="not a plain path"):
        unpack_rank_zip(tmp_path / "bad.zip", tmp_path / "out2", "bad.zip", 1 << 20)

"""Crash safety of the upload store: gunicorn killed (SIGKILL) mid-upload loses nothing already stored,
and the partial upload is discarded when the server starts again."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from portscope.ingest import read_trace

from .conftest import bench_module

pytest.importorskip("gunicorn")
load_bench = bench_module("load_bench")


def _post(port: int, path: Path) -> dict:
    status, body = load_bench.request(port, "POST", f"/api/upload?name={path.name}", path.read_bytes(), load_bench.UPLOAD_HEADERS)
    assert status == 200, body
    return json.loads(body)


def test_a_server_killed_mid_upload_keeps_its_runs_and_drops_the_partial(tmp_path: Path, demo_paths: dict[str, Path]) -> None:
    store = tmp_path / "store"
    server = load_bench.start_server(store=store, traces=[], workers=1)
    try:
        kept = _post(server.port, demo_paths["eager"])["run_id"]
        # a client starts a 20 MB upload and sends only its first megabyte
        sock = socket.create_connection(("127.0.0.1", server.port))
        head = (
            "POST /api/upload?name=big.arrow HTTP/1.1\r\nHost: x\r\nX-Portscope-Upload: 1\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {20 << 20}\r\n\r\n"
        )
        sock.sendall(head.encode() + b"PK\x03\x04" + b"\0" * (1 << 20))
        incoming = store / "incoming"
        end = time.time() + 30
        while not any(p.stat().st_size > 0 for p in incoming.iterdir()):
            assert time.time() < end, "the upload never reached the disk"
            time.sleep(0.05)
        partial = next(incoming.iterdir())
    finally:
        server.kill()  # SIGKILL to master and worker, mid-upload
    sock.close()
    assert partial.exists()  # what a crash leaves behind
    server = load_bench.start_server(store=store, traces=[], workers=1)
    try:
        assert not partial.exists() and list(incoming.iterdir()) == []
        status, body = load_bench.request(server.port, "GET", f"/api/run/{kept}")
        assert status == 200, body
        assert read_trace(store / "runs" / f"{kept}.arrow").content_hash() == kept
        assert _post(server.port, demo_paths["compiled"])["ok"]  # and it takes new uploads
        assert sorted(p.name for p in (store / "runs").iterdir()) == sorted(
            f"{read_trace(p).content_hash()}.arrow" for p in (demo_paths["eager"], demo_paths["compiled"])
        )
    finally:
        server.kill()


def test_a_live_workers_upload_is_not_discarded_by_another_worker_starting(make_app, tmp_path: Path) -> None:
    """Workers share the store: a starting worker deletes only uploads whose writer process is gone."""
    import os

    incoming = tmp_path / "store" / "incoming"
    incoming.mkdir(parents=True)
    live = incoming / f"{os.getpid()}-{'a' * 32}.part.arrow"  # this process: alive
    dead = incoming / f"{2**22 + 12345}-{'b' * 32}.part.arrow"  # beyond pid_max: gone
    for path in (live, dead):
        path.write_bytes(b"partial")
    make_app()
    assert live.exists() and not dead.exists()

"""Scale out: gunicorn with several workers sharing the store, the cache in a real redis-server.

A run uploaded through one worker must open through the others.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

redis = pytest.importorskip("redis")
pytest.importorskip("gunicorn")
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 60.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.2)
    raise AssertionError(f"{url} did not come up")


def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    if not os.path.exists(REDIS_SERVER):
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    end = time.time() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.time() > end:
                proc.kill()
                raise
            time.sleep(0.1)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


def test_gunicorn_workers_share_uploads_through_store_and_redis(tmp_path: Path, demo_dir: Path, demo_paths: dict[str, Path], redis_url: str) -> None:
    port = free_port()
    env = {
        **os.environ,
        "PORTSCOPE_TRACES": str(demo_dir),
        "PORTSCOPE_STORE": str(tmp_path / "store"),
        "PORTSCOPE_CACHE_URL": redis_url,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", "3", "-b", f"127.0.0.1:{port}", "--timeout", "120", "portscope.app.server:create_server()"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/api/runs")
        request = urllib.request.Request(
            f"{base}/api/upload?name=compiled.arrow",
            data=demo_paths["compiled"].read_bytes(),
            headers={"X-Portscope-Upload": "1", "Content-Type": "application/octet-stream"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            answer = json.loads(r.read())
        assert answer["ok"], answer
        served_by = set()
        for _ in range(200):
            status, row = get_json(f"{base}/api/run/{answer['run_id']}")
            assert status == 200, row
            assert row["source"] == "measured" and row["compiles"] == 2
            served_by.add(row["served_by"])
            if len(served_by) >= 2:
                break
        assert len(served_by) >= 2, "every request went to the same worker"
        with urllib.request.urlopen(f"{base}/runs", timeout=30) as r:
            assert r.headers["X-Frame-Options"] == "DENY"
        keys = redis.Redis.from_url(redis_url).keys("portscope:*")
        assert any(b":row:" in k for k in keys), keys  # portscope:<derived-data version>:row:<run>
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()

"""A large upload end to end: a ~300 MB trace streamed to a running `portscope view`, then opened.

Usage: python bench/upload_bench.py [--events 3800000] [--port 8765]
Generates a synthetic trace through the real writer (bench/viewer_bench.py), starts the
viewer on loopback, POSTs the file to /api/upload in 1 MiB chunks, then GETs the run page.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def wait_for(port: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/runs")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the viewer did not start")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=int, default=3_800_000)
    p.add_argument("--port", type=int, default=8765)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "big.arrow"
        subprocess.run([sys.executable, str(HERE / "viewer_bench.py"), "--events", str(args.events),
                        "--generate-only", str(trace)], check=True)
        size = trace.stat().st_size
        (Path(tmp) / "empty").mkdir()
        server = subprocess.Popen([sys.executable, "-m", "portscope.app.cli", "view", str(Path(tmp) / "empty"),
                                   "--no-browser", "--port", str(args.port), "--store", str(Path(tmp) / "store"),
                                   "--max-upload-mb", "1024"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for(args.port)
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=600)
            conn.putrequest("POST", "/api/upload?name=big.arrow")
            conn.putheader("X-Portscope-Upload", "1")
            conn.putheader("Content-Length", str(size))
            conn.putheader("Content-Type", "application/octet-stream")
            conn.endheaders()
            with trace.open("rb") as f:
                while chunk := f.read(1 << 20):
                    conn.send(chunk)
            response = conn.getresponse()
            body = json.loads(response.read())
            t_upload = time.perf_counter() - t0
            if response.status != 200 or not body.get("ok"):
                raise SystemExit(f"upload failed: {response.status} {body}")
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=600)
            conn.request("GET", f"/run/{body['run_id']}")
            page = conn.getresponse()
            page.read()
            t_open = time.perf_counter() - t0
            print(f"uploaded {size / 1e6:.0f} MB in {t_upload:.1f} s ({size / 1e6 / t_upload:.0f} MB/s, validated and stored); "
                  f"run page {page.status} in {t_open:.2f} s")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()

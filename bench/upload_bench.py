"""A large upload end to end: a ~300 MB trace streamed to a running `portscope view`, then opened.

Usage: python bench/upload_bench.py [--events 3800000] [--port 8765]
Generates a synthetic trace through the real writer (bench/viewer_bench.py), starts the
viewer on loopback, POSTs the file to /api/upload in 1 MiB chunks, then GETs the run page.

    python bench/upload_bench.py --kineto TRACE.json

uploads a Kineto trace instead: it converts in the background (202 and a job), and while it
does another client GETs /runs every 0.2 s; prints the conversion time and those answers'
latencies (median, max): other users are served meanwhile; and the peak resident memory of the
server and of the conversion's own process (sampled every 0.1 s).
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

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


class PeakMemory(threading.Thread):
    """Peak RSS of the server and, apart, of its children (the background conversion), sampled until stopped."""

    def __init__(self, server: int) -> None:
        super().__init__(daemon=True)
        self.server, self.server_peak, self.child_peak = server, 0, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        server = psutil.Process(self.server)
        while not self.stopped.wait(0.1):
            try:
                self.server_peak = max(self.server_peak, server.memory_info().rss)
                self.child_peak = max(self.child_peak, sum(c.memory_info().rss for c in server.children(recursive=True)))
            except psutil.Error:  # a child gone between listing and reading
                pass


def _get(port: int, path: str) -> tuple[int, bytes, float]:
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    answer = conn.getresponse()
    return answer.status, answer.read(), time.perf_counter() - t0


def follow(port: int, job: str, size: int, t_upload: float) -> dict:
    """Poll a background conversion to its end while timing GET /runs (another user); its final status."""
    t0 = time.perf_counter()
    latencies = []
    while True:
        status, body, _ = _get(port, f"/api/upload/{job}")
        done = json.loads(body)
        if "ok" in done:
            break
        code, _, seconds = _get(port, "/runs")
        if code != 200:
            raise SystemExit(f"/runs answered {code} during the conversion")
        latencies.append(seconds)
        time.sleep(0.2)
    t_convert = time.perf_counter() - t0
    if not done["ok"]:
        raise SystemExit(f"conversion failed: {done}")
    latencies.sort()
    print(f"streamed {size / 1e6:.0f} MB in {t_upload:.1f} s; converted in the background in {t_convert:.1f} s "
          f"({done['events']:,} events); meanwhile {len(latencies)} GET /runs answered in "
          f"{latencies[len(latencies) // 2] * 1000:.0f} ms median, {latencies[-1] * 1000:.0f} ms max")  # fmt: skip
    return done


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=int, default=3_800_000)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--kineto", type=Path, help="upload this Kineto trace (converted in the background) instead")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = args.kineto or Path(tmp) / "big.arrow"
        if not args.kineto:
            subprocess.run([sys.executable, str(HERE / "viewer_bench.py"), "--events", str(args.events),
                            "--generate-only", str(trace)], check=True)  # fmt: skip
        size = trace.stat().st_size
        (Path(tmp) / "empty").mkdir()
        server = subprocess.Popen([sys.executable, "-m", "portscope.app.cli", "view", str(Path(tmp) / "empty"),
                                   "--no-browser", "--port", str(args.port), "--store", str(Path(tmp) / "store"),
                                   "--max-upload-mb", str(max(1024, size // 2**20 + 1))], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for(args.port)
            peaks = PeakMemory(server.pid)
            peaks.start()
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=600)
            conn.putrequest("POST", f"/api/upload?name={trace.name}")
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
            if response.status == 202 and body.get("job"):
                body = follow(args.port, body["job"], size, t_upload)
            elif response.status != 200 or not body.get("ok"):
                raise SystemExit(f"upload failed: {response.status} {body}")
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=600)
            conn.request("GET", f"/run/{body['run_id']}")
            page = conn.getresponse()
            page.read()
            t_open = time.perf_counter() - t0
            stored = "streamed" if args.kineto else "validated and stored"
            print(f"uploaded {size / 1e6:.0f} MB in {t_upload:.1f} s ({size / 1e6 / t_upload:.0f} MB/s, {stored}); "
                  f"run page {page.status} in {t_open:.2f} s")
            peaks.stopped.set()
            peaks.join()
            print(f"peak RSS: server {peaks.server_peak / 1e9:.2f} GB, conversion process {peaks.child_peak / 1e9:.2f} GB")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()

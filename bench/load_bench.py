"""Load bench: `portscope view` under gunicorn, N concurrent clients on loopback, two identical rounds.

    .venv/bin/python bench/load_bench.py [--clients 16] [--seconds 60] [--workers 4] [--rounds 2] [--json out.json]

Each client (a thread, one HTTP connection per request: gunicorn's sync workers close after each
answer) loops over a fixed mix: the page HTML, the page content callback (`_pages_content`, which
renders a run page on the server), a timeline zoom (the `relayoutData` callback, answered with a
Patch), the JSON API, and an upload of a sample trace. Reports per round: requests served, p50/p95
latency, errors (any non-2xx answer or failed connection; must be 0) and the RSS of the gunicorn
master + workers at the end of the round (a second identical round must not grow it).

    .venv/bin/python bench/load_bench.py --big-upload TRACE.json [--clients 16 --seconds 30]

adds a last round run while one more client streams TRACE.json (a multi-GB Kineto trace) to
/api/upload and follows its background conversion to the end: the same mix's latencies and errors
then, against the rounds before (other users are served while a big upload converts), plus the
upload's stream and conversion times and the conversion process's peak RSS.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
GUNICORN = Path(sys.executable).with_name("gunicorn")


def _rss(process: psutil.Process) -> int:
    """A process's resident memory; 0 once it has exited (gone, or a zombie its parent has not reaped yet)."""
    try:
        return process.memory_info().rss
    except psutil.Error:
        return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None, timeout: float = 60.0) -> tuple[int, bytes]:
    """One HTTP request on a fresh connection; (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


@dataclasses.dataclass
class Server:
    """A running gunicorn serving the viewer."""

    proc: subprocess.Popen
    port: int
    store: Path

    def rss_bytes(self) -> int:
        """Resident memory of the master and every worker (a process that exits while they are counted counts 0)."""
        master = psutil.Process(self.proc.pid)
        return master.memory_info().rss + sum(_rss(p) for p in master.children(recursive=True))

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (master and workers), as a crash or `kill -9` would."""
        try:
            workers = psutil.Process(self.proc.pid).children(recursive=True)
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, psutil.NoSuchProcess):
            workers = []
        self.proc.wait(30)
        psutil.wait_procs(workers, timeout=30)


def start_server(*, store: Path, traces: list[Path], workers: int = 4, port: int | None = None, timeout_s: float = 90.0, max_upload_mb: float | None = None) -> Server:
    """Start `gunicorn -w N 'portscope.app.server:create_server()'` on 127.0.0.1 and wait until it answers."""
    port = port or free_port()
    env = {**os.environ, "PORTSCOPE_TRACES": os.pathsep.join(map(str, traces)), "PORTSCOPE_STORE": str(store)}
    if max_upload_mb is not None:
        env["PORTSCOPE_MAX_UPLOAD_MB"] = str(max_upload_mb)
    cmd = [str(GUNICORN), "-w", str(workers), "-b", f"127.0.0.1:{port}", "--timeout", "120", "--log-level", "warning", "portscope.app.server:create_server()"]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = Server(proc, port, store)
    end = time.time() + timeout_s
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if request(port, "GET", "/api/runs", timeout=5)[0] == 200:
                return server
        except OSError:
            pass
        time.sleep(0.25)
    server.kill()
    raise RuntimeError("gunicorn did not answer in time")


@contextmanager
def running(**kwargs: Any) -> Iterator[Server]:
    server = start_server(**kwargs)
    try:
        yield server
    finally:
        server.kill(signal.SIGTERM)


UPLOAD_HEADERS = {"X-Portscope-Upload": "1", "Content-Type": "application/octet-stream"}
JSON_HEADERS = {"Content-Type": "application/json"}


def _callback(output: str, outputs: Any, inputs: list[dict[str, Any]], state: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {"output": output, "outputs": outputs, "inputs": inputs, "state": state, "changedPropIds": [f"{i['id']}.{i['property']}" for i in inputs]}
    ).encode()


def workload(port: int, run_ids: list[str], uploads: list[Path]) -> list[tuple[str, str, str, bytes | None, dict[str, str]]]:
    """The requests of one client loop: (label, method, path, body, headers)."""
    mix: list[tuple[str, str, str, bytes | None, dict[str, str]]] = [("GET /", "GET", "/", None, {})]
    for rid in run_ids[:2]:
        mix += [
            ("GET /run/<id>", "GET", f"/run/{rid}", None, {}),
            ("page content /run/<id>", "POST", "/_dash-update-component", _callback(
                ".._pages_content.children..._pages_store.data..",
                [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}],
                [{"id": "_pages_location", "property": "pathname", "value": f"/run/{rid}"}, {"id": "_pages_location", "property": "search", "value": ""}],
                [],
            ), JSON_HEADERS),
            ("timeline zoom", "POST", "/_dash-update-component", _callback(
                "..timeline-graph.figure...timeline-status.children..",
                [{"id": "timeline-graph", "property": "figure"}, {"id": "timeline-status", "property": "children"}],
                [{"id": "timeline-graph", "property": "relayoutData", "value": {"xaxis.range[0]": 0, "xaxis.range[1]": random.Random(rid).randint(10_000, 5_000_000)}}],
                [{"id": "timeline-key", "property": "data", "value": {"run_ids": [rid]}},
                 {"id": "timeline-match", "property": "data", "value": None}],
            ), JSON_HEADERS),
            ("GET /api/run/<id>", "GET", f"/api/run/{rid}", None, {}),
        ]
    mix.append(("GET /api/runs", "GET", "/api/runs", None, {}))
    for path in uploads:
        mix.append(("upload", "POST", f"/api/upload?name={path.name}", path.read_bytes(), UPLOAD_HEADERS))
    return mix


@dataclasses.dataclass
class Round:
    requests: int
    errors: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    seconds: float
    rss_mb: float
    error_examples: list[str]
    by_kind_p95_ms: dict[str, float]


def run_round(server: Server, mix: list[tuple[str, str, str, bytes | None, dict[str, str]]], *, clients: int, seconds: float,
              during: threading.Thread | None = None) -> Round:
    """`clients` threads loop over `mix` for `seconds`, and for as long as `during` (started already) runs."""
    latencies: list[tuple[str, float]] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.time() + seconds

    def client(k: int) -> None:
        i = k  # clients start at different places in the mix
        while time.time() < stop or (during is not None and during.is_alive()):
            label, method, path, body, headers = mix[i % len(mix)]
            i += 1
            t = time.perf_counter()
            try:
                status, answer = request(server.port, method, path, body, headers)
                ok = 200 <= status < 300
                why = f"{label}: HTTP {status} {answer[:200]!r}"
            except OSError as exc:
                ok, why = False, f"{label}: {type(exc).__name__}: {exc}"
            dt = time.perf_counter() - t
            with lock:
                latencies.append((label, dt))
                if not ok:
                    errors.append(why)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    times = sorted(d for _, d in latencies)
    by_kind: dict[str, list[float]] = {}
    for label, d in latencies:
        by_kind.setdefault(label, []).append(d)
    return Round(
        requests=len(times),
        errors=len(errors),
        p50_ms=round(1000 * statistics.median(times), 1) if times else 0.0,
        p95_ms=round(1000 * times[int(0.95 * (len(times) - 1))], 1) if times else 0.0,
        max_ms=round(1000 * times[-1], 1) if times else 0.0,
        seconds=round(elapsed, 1),
        rss_mb=round(server.rss_bytes() / 2**20, 1),
        error_examples=errors[:5],
        by_kind_p95_ms={k: round(1000 * sorted(v)[int(0.95 * (len(v) - 1))], 1) for k, v in sorted(by_kind.items())},
    )


class BigUpload(threading.Thread):
    """Stream a file to /api/upload in 1 MiB chunks, then follow its background conversion to the end."""

    def __init__(self, server: Server, path: Path) -> None:
        super().__init__(daemon=True)
        self.server, self.path = server, path
        self.result: dict[str, Any] = {}
        self.child_peak = 0

    def _conversions(self) -> list[psutil.Process]:
        """The server's background conversion processes still running. One that has exited is left out: psutil
        raises for it (ZombieProcess while the server's waiting thread has not reaped it yet, NoSuchProcess after)."""
        running = []
        for worker in psutil.Process(self.server.proc.pid).children(recursive=True):
            try:
                if "portscope.app.upload_jobs" in " ".join(worker.cmdline()):
                    running.append(worker)
            except psutil.Error:
                pass
        return running

    def _sample(self) -> None:
        for worker in self._conversions():
            self.child_peak = max(self.child_peak, _rss(worker))

    def settle(self, timeout_s: float = 60.0) -> None:
        """Wait for the conversion's process to exit (it says "ok" before it ends), then note the server's RSS: the
        round's figure may still count that process."""
        end = time.time() + timeout_s
        while time.time() < end and self._conversions():
            time.sleep(0.2)
        self.result["server_rss_after_mb"] = round(self.server.rss_bytes() / 2**20, 1)

    def run(self) -> None:
        size = self.path.stat().st_size
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=600)
        conn.putrequest("POST", f"/api/upload?name={self.path.name}")
        for key, value in {**UPLOAD_HEADERS, "Content-Length": str(size)}.items():
            conn.putheader(key, value)
        conn.endheaders()
        with self.path.open("rb") as f:
            while chunk := f.read(1 << 20):
                conn.send(chunk)
        answer = conn.getresponse()
        body = json.loads(answer.read())
        conn.close()
        streamed = time.perf_counter() - t0
        if answer.status != 202:
            self.result = {"error": f"HTTP {answer.status}: {body}"}
            return
        while True:
            self._sample()
            status, raw = request(self.server.port, "GET", f"/api/upload/{body['job']}")
            done = json.loads(raw) if status == 200 else {"ok": False, "error": f"HTTP {status}"}
            if "ok" in done:
                break
            time.sleep(0.2)
        self.result = {"bytes": size, "stream_s": round(streamed, 1), "convert_s": round(time.perf_counter() - t0 - streamed, 1),
                       "ok": done["ok"], "events": done.get("events"), "run_id": done.get("run_id"), "error": done.get("error"),
                       "conversion_peak_rss_gb": round(self.child_peak / 1e9, 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=60.0, help="length of one round")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--traces", type=Path, default=REPO / "sample_traces", help="folder of traces to list and upload")
    p.add_argument("--json", type=Path, default=None, help="write the figures here too")
    p.add_argument("--big-upload", type=Path, default=None, help="a last round while this file uploads and converts")
    args = p.parse_args(argv)
    traces = sorted(args.traces.glob("*.arrow"))
    cap = args.big_upload.stat().st_size / 2**20 + 1 if args.big_upload else None
    with tempfile.TemporaryDirectory(prefix="portscope-load-") as tmp, running(store=Path(tmp) / "store", traces=[args.traces], workers=args.workers, max_upload_mb=cap) as server:
        status, body = request(server.port, "GET", "/api/runs")
        run_ids = json.loads(body)["runs"]
        mix = workload(server.port, run_ids, traces[:2])
        for label, method, path, payload, headers in mix:  # warm-up: timeline indexes, caches; every request must succeed
            status, answer = request(server.port, method, path, payload, headers)
            if not 200 <= status < 300:
                raise SystemExit(f"warm-up {label} failed: HTTP {status} {answer[:300]!r}")
        rss_start = round(server.rss_bytes() / 2**20, 1)
        rounds = [run_round(server, mix, clients=args.clients, seconds=args.seconds) for _ in range(args.rounds)]
        big = None
        if args.big_upload:
            big = BigUpload(server, args.big_upload)
            big.start()
            rounds.append(run_round(server, mix, clients=args.clients, seconds=args.seconds, during=big))
            big.join()
            big.settle()
    result = {
        "clients": args.clients,
        "workers": args.workers,
        "seconds_per_round": args.seconds,
        "rss_after_warmup_mb": rss_start,
        "rounds": [dataclasses.asdict(r) for r in rounds],
        "rss_growth_last_round_mb": round(rounds[-1].rss_mb - rounds[0].rss_mb, 1) if len(rounds) > 1 else 0.0,
        "big_upload": big.result if big else None,
    }
    for i, r in enumerate(rounds, 1):
        during = " (during the big upload)" if big and i == len(rounds) else ""
        print(f"round {i}{during}: {r.requests} requests in {r.seconds} s ({r.requests / r.seconds:.0f}/s), p50 {r.p50_ms} ms, "
              f"p95 {r.p95_ms} ms, max {r.max_ms} ms, errors {r.errors}, server RSS {r.rss_mb} MB")
        for example in r.error_examples:
            print(f"  error: {example}")
    print(f"RSS after warm-up {rss_start} MB; growth from round 1 to round {len(rounds)}: {result['rss_growth_last_round_mb']} MB")
    print("p95 by request kind (last round):", json.dumps(rounds[-1].by_kind_p95_ms))
    if big:
        print("big upload:", json.dumps(big.result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 1 if any(r.errors for r in rounds) or (big and not big.result.get("ok")) else 0


if __name__ == "__main__":
    sys.exit(main())

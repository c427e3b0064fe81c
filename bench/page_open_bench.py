"""Seconds from opening a viewer page in headless Chromium until an element appears (the page drawn).

    python bench/page_open_bench.py sample_traces "/compare/<a>/<b>=#compare-timelines .main-svg" ["/run/<id>/timeline=.main-svg" ...]

Each argument is PATH=CSS (split at the last "="). The viewer is started on the folder on a free port; run ids are
those of `GET /api/runs`. Chromium flags are those of the browser tests (../shared/NOTES.md: software WebGL).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.common.by import By

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader", "--disable-dev-shm-usage",
         "--window-size=1400,1000")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("pages", nargs="+", help="PATH=CSS")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    port = _free_port()
    portscope = Path(sys.executable).with_name("portscope")
    server = subprocess.Popen([str(portscope), "view", str(args.folder), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    options = Options()
    for flag in FLAGS:
        options.add_argument(flag)
    options.binary_location = args.chromium
    driver = None
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs", timeout=5)
                break
            except OSError:
                time.sleep(0.5)
        driver = webdriver.Chrome(options=options)
        for page in args.pages:
            path, css = page.rsplit("=", 1)
            start = time.perf_counter()
            driver.get(f"http://127.0.0.1:{port}{path}")
            while not driver.find_elements(By.CSS_SELECTOR, css):
                if time.perf_counter() - start > args.timeout:
                    print(f"{path}: {css} not drawn within {args.timeout:.0f} s")
                    break
                time.sleep(0.1)
            else:
                print(f"{path}: {css} after {time.perf_counter() - start:.1f} s")
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Screenshots of every viewer page, made in headless Chromium: docs/screenshots/*.png.

    .venv/bin/python docs/screenshots.py [TRACE_DIR]

Uses the bundled sample traces (or TRACE_DIR); when there are none, the demo traces
of portscope.app.dev_samples. Needs chromium and chromedriver (Debian packages).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait
from werkzeug.serving import make_server

from portscope.app import urls
from portscope.app.config import ViewerConfig, bundled_traces_dir
from portscope.app.dev_samples import write_demo_traces
from portscope.app.server import create_app
from portscope.ingest import read_trace
from portscope.ingest.summary import region_ids

OUT = Path(__file__).resolve().parent / "screenshots"
QUERY_SHOT = ("SELECT run, operator, count(*) AS kernels, round(sum(dur) / 1e3, 1) AS device_us\nFROM kernels\n"
              "GROUP BY ALL\nORDER BY device_us DESC\nLIMIT 12")


def browser() -> webdriver.Chrome:
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader", "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage", "--window-size=1400,1000", "--hide-scrollbars"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def shoot(driver: webdriver.Chrome, url: str, wait_css: str, name: str) -> Path:
    driver.get(url)
    WebDriverWait(driver, 30).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, wait_css)))
    time.sleep(1.5)  # let grids and WebGL finish drawing
    height = driver.execute_script("return Math.max(document.body.scrollHeight, 1000)")
    driver.set_window_size(1400, min(height + 40, 4000))
    time.sleep(0.5)
    path = OUT / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    return path


def shoot_section(driver: webdriver.Chrome, url: str, wait_css: str, section_css: str, name: str) -> Path:
    """One part of a page (an element) rather than the whole page."""
    driver.set_window_size(1400, 4000)
    driver.get(url)
    WebDriverWait(driver, 30).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, wait_css)))
    time.sleep(1.5)
    path = OUT / f"{name}.png"
    driver.find_element(By.CSS_SELECTOR, section_css).screenshot(str(path))
    driver.set_window_size(1400, 1000)
    return path


def schedule_shots(driver: webdriver.Chrome, base: str, loaded: list) -> list[Path]:
    """The compare page's schedules section on the eager-vs-compiled sample: eager:warm against compiled:warm."""
    modes = next((t for t in loaded if (t.path or "").endswith("eager_vs_compiled.arrow")), None)
    if modes is None or not (region_ids(modes, "eager:warm") and region_ids(modes, "compiled:warm")):
        return []
    run, ra, rb = modes.content_hash(), region_ids(modes, "eager:warm")[0], region_ids(modes, "compiled:warm")[0]
    return [shoot_section(driver, f"{base}/compare/{run}/{run}?ra={ra}&rb={rb}", "#compare-schedule-timelines .gl-container canvas",
                          "#compare-schedules", "compare-schedules")]


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else bundled_traces_dir()
    traces = sorted(folder.glob("*.arrow"))
    tmp = tempfile.TemporaryDirectory()
    if not traces:
        folder = Path(tmp.name) / "traces"
        traces = sorted(write_demo_traces(folder).values())
    loaded = [read_trace(p) for p in traces]
    app = create_app(ViewerConfig(trace_paths=(folder,), store_dir=Path(tmp.name) / "store"))
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    # the run with the most signals shows the most; compare it with the cleanest run of the same model
    ranked = sorted((t for t in loaded if t["regions"].num_rows), key=lambda t: t["signals"].num_rows, reverse=True)
    first = ranked[0]
    first_id = first.content_hash()
    region = first.region_names()[region_ids(first)[0]]
    second_id = ranked[-1].content_hash() if len(ranked) > 1 else first_id
    by_name = {t.run_info.target: t for t in ranked}
    if "fp16-npu" in by_name and "cuda" in by_name:  # the bundled samples: the same forward, two targets
        first = by_name["fp16-npu"] if by_name["fp16-npu"]["ops"].num_rows < 1000 else first
        first = next((t for t in ranked if (t.path or "").endswith("fp16-npu_forward.arrow")), first)
        first_id, second_id = first.content_hash(), by_name["cuda"].content_hash()
        region = first.region_names()[0]
    OUT.mkdir(exist_ok=True)
    driver = browser()
    try:
        shots = [
            shoot(driver, f"{base}/runs", "#runs-list", "runs"),
            shoot(driver, f"{base}/run/{first_id}", "#regions-list", "run"),
            shoot(driver, f"{base}/run/{first_id}/region/{region}", "#signal-grid .ag-row", "region"),
            shoot(driver, f"{base}/run/{first_id}/timeline", "#timeline-graph .gl-container canvas", "timeline"),
            shoot(driver, f"{base}/compare/{first_id}/{second_id}", "#compare-signals-table", "compare"),
            shoot(driver, base + urls.query([first_id, second_id], QUERY_SHOT), "#query-grid .ag-row", "query"),
        ]
        shots += schedule_shots(driver, base, loaded)
        plans = [t for t in loaded if t["plan"].num_rows]
        if plans:  # a `portscope plan` trace among them
            shots.append(shoot(driver, f"{base}/run/{plans[0].content_hash()}/plan", "#plan-table", "plan"))
        logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()
        server.shutdown()
        tmp.cleanup()
    for path in shots:
        print(path)
    if logs:
        print("browser console errors:", *logs, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

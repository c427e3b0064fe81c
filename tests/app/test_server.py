"""The Flask side without a browser: headers, uploads, the store, page layouts, the CLI."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path
from typing import Any

import pytest

from portscope.app import view_cli
from portscope.app.config import ViewerConfig, bundled_traces_dir
from portscope.app.pages import compare, region, run, timeline
from portscope.ingest import read_trace
from portscope.ingest.errors import UsageError
from portscope.ingest.viewport import KINDS

UPLOAD = {"X-Portscope-Upload": "1"}


def texts(component: Any) -> list[str]:
    """Every string in a Dash component tree (what the browser shows as text)."""
    if component is None:
        return []
    if isinstance(component, str | int | float):
        return [str(component)]
    if isinstance(component, list | tuple):
        return [t for c in component for t in texts(c)]
    out = []
    for name in ("children", "label"):
        out += texts(getattr(component, name, None))
    return out


def test_security_headers_and_private_store(make_app, tmp_path: Path) -> None:
    app = make_app()
    response = app.server.test_client().get("/runs")
    assert response.status_code == 200
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    for folder in (tmp_path / "store", tmp_path / "store" / "cache", tmp_path / "store" / "runs"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_listing_and_run_json(make_app, demo_paths: dict[str, Path]) -> None:
    client = make_app().server.test_client()
    runs = client.get("/api/runs").json
    eager_id = read_trace(demo_paths["eager"]).content_hash()
    assert eager_id in runs["runs"] and len(runs["runs"]) == 3 and runs["problems"] == []
    row = client.get(f"/api/run/{eager_id}").json
    assert (row["fallbacks"], row["bounces"], row["file"]) == (34, 20, "demo-eager.arrow")
    assert client.get("/api/run/..etc..passwd").status_code == 404
    assert client.get("/api/run/0123456789abcdef").status_code == 404


def test_upload_good_bad_empty_and_too_large(make_app, demo_paths: dict[str, Path], broken_file: Path, tmp_path: Path) -> None:
    app = make_app(max_upload_bytes=200_000)
    client = app.server.test_client()
    good = client.post("/api/upload?name=mine.arrow", data=demo_paths["compiled"].read_bytes(), headers=UPLOAD)
    assert good.status_code == 200 and good.json["ok"]
    run_id = good.json["run_id"]
    assert run_id == read_trace(demo_paths["compiled"]).content_hash()
    assert (tmp_path / "store" / "runs" / f"{run_id}.arrow").exists()
    bad = client.post("/api/upload?name=../../broken.arrow", data=broken_file.read_bytes(), headers=UPLOAD)
    assert bad.status_code == 422 and not bad.json["ok"]
    assert bad.json["error"].startswith("broken.arrow: ") and "ZIP" in bad.json["error"]
    empty = client.post("/api/upload?name=e.arrow", data=b"", headers=UPLOAD)
    assert empty.status_code == 400 and "empty" in empty.json["error"]
    big = client.post("/api/upload?name=big.arrow", data=b"x" * 300_000, headers=UPLOAD)
    assert big.status_code == 413 and "big.arrow is 300.0 KB" in big.json["error"] and "200.0 KB" in big.json["error"]
    no_header = client.post("/api/upload?name=x.arrow", data=demo_paths["compiled"].read_bytes())
    assert no_header.status_code == 400
    assert list((tmp_path / "store" / "incoming").iterdir()) == []  # temporary files are gone
    assert client.get(f"/api/run/{run_id}").status_code == 200  # and the server still answers


def test_uploaded_run_opens_in_a_second_app_on_the_same_store(make_app, demo_paths: dict[str, Path], tmp_path: Path) -> None:
    first = make_app(trace_paths=())
    run_id = first.server.test_client().post("/api/upload?name=a.arrow", data=demo_paths["predicted"].read_bytes(), headers=UPLOAD).json["run_id"]
    second = make_app(trace_paths=())
    assert second.server.test_client().get(f"/api/run/{run_id}").json["source"] == "predicted"


def test_page_layouts_show_the_trace(make_app, demo_paths: dict[str, Path]) -> None:
    app = make_app()
    eager = read_trace(demo_paths["eager"]).content_hash()
    compiled = read_trace(demo_paths["compiled"]).content_hash()
    with app.server.test_request_context("/"):
        run_text = " ".join(texts(run.layout(run_id=eager)))
        assert "generate [cold, eager]" in run_text and "rmsnorm [eager]" in run_text and "max_abs_diff" in run_text
        page = region.layout(run_id=eager, region="generate", n="0")
        grid = next(c for c in _walk(page) if getattr(c, "id", None) == "signal-grid")
        counts = {r["signal"]: r["count"] for r in grid.rowData}
        assert counts == {"dispatch/cpu_fallback": 14, "dispatch/recompile": 7, "host_bounce/dtype_cast": 10, "transfer/d2h": 1, "sync": 1}
        assert "Side by side with " in " ".join(texts(page))
        missing = " ".join(texts(region.layout(run_id=eager, region="nope")))
        assert "has no region named 'nope'" in missing
        assert "no run" in " ".join(texts(run.layout(run_id="0123456789abcdef")))
        timeline_page = timeline.layout(run_id=eager)
        graph = next(c for c in _walk(timeline_page) if getattr(c, "id", None) == "timeline-graph")
        # one WebGL trace per slice kind, then the search highlights (WebGL), the clicked slice's flows (SVG arrows)
        # and the points along the bars a click lands on (WebGL, invisible)
        assert [t["type"] for t in graph.figure["data"]] == ["scattergl"] * len(KINDS) + ["scattergl", "scatter", "scattergl"]
        assert [t["name"] for t in graph.figure["data"][len(KINDS):]] == ["search matches", "flows", "bar hits"]
        compare_page = compare.layout(a=eager, b=compiled)
        assert any(getattr(c, "id", None) == "compare-timelines" for c in _walk(compare_page))
        signals, operators, _ = compare.comparison_tables(eager, compiled, 0, 0)
        assert "dispatch/cpu_fallback" in texts(signals) and "-14" in texts(signals)


def _walk(component: Any):
    yield component
    children = getattr(component, "children", None)
    if isinstance(children, list | tuple):
        for c in children:
            yield from _walk(c)
    elif children is not None and not isinstance(children, str | int | float):
        yield from _walk(children)


def test_view_cli_arguments(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    view_cli.register(parser.add_subparsers())
    args = parser.parse_args(["view", "--no-browser", "--store", str(tmp_path), "--max-upload-mb", "10"])
    config = view_cli.config_from_args(args)
    assert config.trace_paths == (bundled_traces_dir(),) and config.store_dir == tmp_path
    assert config.max_upload_bytes == 10 * 1024**2 and not config.debug
    assert args.host == "127.0.0.1" and args.port == 8050
    with pytest.raises(UsageError, match="no such trace file or folder: /nope, /nada"):
        view_cli.config_from_args(parser.parse_args(["view", "/nope", "/nada"]))
    assert view_cli.url_for("0.0.0.0", 8050) == "http://127.0.0.1:8050/"


def test_config_from_env(tmp_path: Path) -> None:
    config = ViewerConfig.from_env({"PORTSCOPE_TRACES": str(tmp_path), "PORTSCOPE_STORE": str(tmp_path / "s"), "PORTSCOPE_MAX_UPLOAD_MB": "1"})
    assert config.trace_paths == (tmp_path,) and config.store_dir == tmp_path / "s" and config.max_upload_bytes == 1024**2

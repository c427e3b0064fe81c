"""Security: safe defaults, upload caps, no unpickling, a private store, security headers."""

from __future__ import annotations

import argparse
import gzip
import io
import os
import re
import stat
import tokenize
from pathlib import Path

import pytest

from .conftest import upload

REPO = Path(__file__).resolve().parents[2]


def _view_args(*argv: str) -> argparse.Namespace:
    from portscope.app import view_cli

    parser = argparse.ArgumentParser()
    view_cli.register(parser.add_subparsers())
    return parser.parse_args(["view", *argv])


def test_portscope_view_binds_loopback_without_debug_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from portscope.app import server, view_cli
    from portscope.app.config import ViewerConfig

    args = _view_args("--no-browser")
    assert args.host == "127.0.0.1" and args.debug is False
    assert view_cli.config_from_args(args).debug is False and ViewerConfig().debug is False
    ran: dict[str, object] = {}

    class FakeApp:
        def run(self, **kwargs: object) -> None:
            ran.update(kwargs)

    monkeypatch.setattr(server, "create_app", lambda config: FakeApp())
    assert view_cli.run(args) == 0
    assert ran == {"host": "127.0.0.1", "port": 8050, "debug": False}


def test_uploads_over_the_size_cap_get_413(make_app, demo_paths: dict[str, Path]) -> None:
    app = make_app(max_upload_bytes=10_000)
    with app.server.test_client() as c:
        answer = upload(c, demo_paths["eager"])  # ~50 KB
        assert answer.status_code == 413 and "accepts files up to" in answer.get_json()["error"]
        chunked = c.post(  # no Content-Length (chunked): counted while streaming
            "/api/upload?name=x.arrow",
            input_stream=io.BytesIO(b"x" * 32_000),
            headers={"X-Portscope-Upload": "1"},
            environ_overrides={"wsgi.input_terminated": True},
        )
        assert chunked.status_code == 413, chunked.get_json()
    assert not any((Path(app.server.extensions["portscope"].store.incoming)).iterdir())


def test_a_gzip_bomb_is_refused_by_ratio_without_inflating_it(make_app, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (200 << 20), compresslevel=9))  # 200 MiB -> ~200 KB
    assert bomb.stat().st_size < 400_000
    app = make_app()
    with app.server.test_client() as c:
        answer = upload(c, bomb)
    assert answer.status_code == 422
    assert "gzip bomb" in answer.get_json()["error"]


_UNSAFE_NAMES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "joblib", "PyExtensionType", "jsonpickle",
                 "eval", "exec"}  # fmt: skip


def _unsafe_code(path: Path) -> list[str]:
    """Lines of code (not strings, not comments: a message may say it refuses pickles) that name a deserialiser,
    eval/exec, or yaml.load."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    hits = []
    for k, tok in enumerate(tokens):
        attribute = tok.string == "load" and k >= 2 and tokens[k - 1].string == "." and tokens[k - 2].string == "yaml"
        if tok.type == tokenize.NAME and (tok.string in _UNSAFE_NAMES or attribute):
            hits.append(f"{path.relative_to(REPO)}:{tok.start[0]}: {tok.line.strip()}")
    return hits


def test_no_module_that_reads_input_can_unpickle() -> None:
    """Readers and the viewer never deserialise code: no pickle/marshal/eval anywhere in the code of ingest/ or app/."""
    hits = [hit for folder in ("ingest", "app") for path in sorted((REPO / folder).rglob("*.py")) for hit in _unsafe_code(path)]
    assert hits == []


def test_the_unsafe_code_check_finds_code_not_words(tmp_path: Path) -> None:
    sample = REPO / "ingest" / "_unsafe_check_sample.py"
    try:
        sample.write_text('import pickle\nx = "never pickle"  # a pickle in a comment\nyaml.load(s)\n')
        assert [h.split(": ", 1)[1] for h in _unsafe_code(sample)] == ["import pickle", "yaml.load(s)"]
    finally:
        sample.unlink()


def test_cache_and_store_folders_are_private(make_app, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        loose = tmp_path / "store"
        loose.mkdir(mode=0o755)  # an existing folder is tightened too
        app = make_app(store_dir=loose)
    finally:
        os.umask(old)
    store = app.server.extensions["portscope"].store
    for folder in (store.root, store.runs_dir, store.incoming, store.derived, loose / "cache"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_security_headers_on_every_kind_of_response(make_app, demo_paths: dict[str, Path]) -> None:
    app = make_app(max_upload_bytes=10_000)
    with app.server.test_client() as c:
        answers = [
            c.get("/"),
            c.get("/_dash-layout"),
            c.get("/api/runs"),
            c.get("/api/run/0123456789abcdef"),  # 404 JSON
            c.get("/run/0123456789abcdef"),  # 404 page
            c.post("/api/upload?name=a.arrow", data=b"x", headers={"X-Portscope-Upload": "1"}),  # 422
            upload(c, demo_paths["eager"]),  # 413
            c.get("/assets/does-not-exist.css"),
        ]
    for answer in answers:
        assert answer.headers.get("X-Content-Type-Options") == "nosniff", answer.status
        assert answer.headers.get("X-Frame-Options") == "DENY", answer.status
        policy = dict(part.strip().split(" ", 1) for part in answer.headers["Content-Security-Policy"].split(";"))
        assert policy["object-src"] == "'none'" and policy["frame-ancestors"] == "'none'", answer.status
        scripts = policy["script-src"].split()
        assert scripts[0] == "'self'" and "'unsafe-inline'" not in scripts and "*" not in scripts, answer.status
        assert all(s.startswith("'sha256-") for s in scripts[2:]) and len(scripts) > 2  # Dash's inline scripts


def test_csp_allows_exactly_the_inline_scripts_of_the_page(make_app) -> None:
    """Every inline script Dash writes into the page has its hash in the policy; nothing else inline may run."""
    import base64
    import hashlib

    app = make_app()
    with app.server.test_client() as c:
        page = c.get("/")
        html = page.get_data(as_text=True)
    allowed = set(page.headers["Content-Security-Policy"].split("script-src ", 1)[1].split(";", 1)[0].split())
    html = re.sub(r"<!--.*?-->", "", html, flags=re.S)  # Dash's <!--[if IE]> warning is a comment elsewhere
    inline = [body for attrs, body in re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
              if "src=" not in attrs and "application/json" not in attrs]
    assert inline
    for body in inline:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in allowed, body[:80]

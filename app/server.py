"""The app factory (`create_app`) and the WSGI factory for gunicorn (`create_server`).

    gunicorn -w 4 -b 127.0.0.1:8050 'portscope.app.server:create_server()'

Every worker builds its own app from the same environment (see ViewerConfig.from_env);
they share the on-disk store and the cache (a filesystem cache in the store, or Redis
with PORTSCOPE_CACHE_URL), so a run uploaded through one worker opens through any other.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import dash
import flask
from flask_caching import Cache

from . import pages, shell
from .config import ViewerConfig, private_dir
from .context import Viewer, viewer
from .store import RunNotFound, TraceStore
from .upload import register_upload_route

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def cache_config(config: ViewerConfig) -> dict[str, Any]:
    """flask-caching settings: Redis when a URL is given, else a private filesystem cache."""
    if config.cache_url:
        return {"CACHE_TYPE": "RedisCache", "CACHE_REDIS_URL": config.cache_url, "CACHE_KEY_PREFIX": "portscope:", "CACHE_DEFAULT_TIMEOUT": 0}
    folder = private_dir(config.resolved_cache_dir)
    return {"CACHE_TYPE": "FileSystemCache", "CACHE_DIR": str(folder), "CACHE_THRESHOLD": 5000, "CACHE_DEFAULT_TIMEOUT": 0}


def _assets_folder() -> str:
    from importlib.resources import files

    return str(Path(str(files("portscope.assets"))))


def content_security_policy(app: dash.Dash) -> str:
    """Scripts only from this server plus Dash's own inline scripts (by hash): an injected <script> or
    inline event handler never runs. WebGL traces (regl) compile their draw calls with `new Function`,
    hence 'unsafe-eval'; React sets inline styles."""
    scripts = ["'self'", "'unsafe-eval'", *app.csp_hashes()]
    return "; ".join([
        "default-src 'self'", f"script-src {' '.join(scripts)}", "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:", "font-src 'self' data:", "worker-src 'self' blob:", "connect-src 'self'",
        "object-src 'none'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
    ])


def _security_headers(app: dash.Dash) -> Any:
    policy: list[str] = []  # per app; computed at the first answer, once Dash's first-request setup has
    #                         registered its inline scripts (clientside callbacks), whose hashes it needs

    def add(response: flask.Response) -> flask.Response:
        if not policy:
            policy.append(content_security_policy(app))
        for key, value in {**SECURITY_HEADERS, "Content-Security-Policy": policy[0]}.items():
            response.headers.setdefault(key, value)
        return response

    return add


def create_app(config: ViewerConfig) -> dash.Dash:
    """A Dash app over the traces of `config` (nothing global: two apps never share state)."""
    app = dash.Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        assets_folder=_assets_folder(),
        suppress_callback_exceptions=True,
        title="portscope",
        update_title=None,
    )
    server = app.server
    server.config["MAX_CONTENT_LENGTH"] = config.max_upload_bytes
    cache = Cache(server, config=cache_config(config))
    store = TraceStore(root=config.store_dir, sources=config.trace_paths, cache=cache)
    server.extensions["portscope"] = Viewer(config=config, store=store)
    server.before_request(_unknown_runs_are_404(app))
    register_upload_route(server, store, config.max_upload_bytes, background_bytes=config.background_convert_bytes)
    server.add_url_rule("/api/run/<run_id>", "portscope_run", _run_json)
    server.add_url_rule("/api/runs", "portscope_runs", _runs_json)
    pages.register_all(app)
    app.layout = shell.layout(config)
    shell.register_callbacks(app)
    server.after_request(_security_headers(app))
    return app


_RUN_PAGE = re.compile(r"^/(?:run/(?P<run>[^/]+)|compare/(?P<a>[^/]+)/(?P<b>[^/]+))(?:/|$)")


def _unknown_runs_are_404(app: dash.Dash) -> Any:
    """A page URL naming a run this viewer does not have answers 404 (the page itself says which run)."""

    def check() -> tuple[Any, int] | None:
        match = _RUN_PAGE.match(flask.request.path)
        if match is None or flask.request.method != "GET":
            return None
        store = viewer().store
        if all(store.exists(unquote(rid)) for rid in match.groupdict().values() if rid):
            return None
        return app.index(), 404

    return check


def _run_json(run_id: str) -> tuple[Any, int]:
    store = viewer().store
    try:
        row = store.run_row(run_id)
    except RunNotFound as exc:
        return flask.jsonify({"error": str(exc)}), 404
    return flask.jsonify({**row.to_json(), "served_by": os.getpid()}), 200


def _runs_json() -> tuple[Any, int]:
    runs, problems = viewer().store.listed()
    return flask.jsonify({"runs": [rid for rid, _ in runs], "problems": problems}), 200


def create_server() -> flask.Flask:
    """WSGI factory: the Flask server of an app configured from PORTSCOPE_* environment variables."""
    return create_app(ViewerConfig.from_env()).server

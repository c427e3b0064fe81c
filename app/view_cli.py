"""`portscope view`: open the web viewer on traces (the bundled samples when none are named)."""

from __future__ import annotations

import argparse
import sys
import threading
import webbrowser
from pathlib import Path

from portscope.ingest.errors import UsageError
from portscope.ingest.output_paths import OutputFolder

from .config import DEFAULT_MAX_UPLOAD_BYTES, ViewerConfig, bundled_traces_dir, default_store_dir


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `view` sub-command to the `portscope` parser."""
    p = sub.add_parser(
        "view", description="Serve the portscope viewer on traces and open it in a browser. "
        "With no paths it shows the sample traces bundled with portscope.",
    )
    p.add_argument("paths", nargs="*", metavar="TRACE_OR_DIR", help="trace files or folders of *.arrow traces")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8050, help="port (default: 8050)")
    p.add_argument("--no-browser", action="store_true", help="print the URL but do not open a browser")
    p.add_argument("--store", type=OutputFolder, default=None, help=f"folder for uploads and derived data (default: {default_store_dir()})")
    p.add_argument("--cache-url", default=None, help="share the cache through Redis, e.g. redis://127.0.0.1:6379/0")
    p.add_argument("--max-upload-mb", type=float, default=DEFAULT_MAX_UPLOAD_BYTES / 1024**2, help="largest accepted upload in MiB (default: %(default).0f)")
    p.add_argument("--debug", action="store_true", help="Dash debug mode (never on a shared machine: the debugger runs code)")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> ViewerConfig:
    """The viewer options of a `portscope view` command line; every missing path is reported at once."""
    paths = tuple(Path(p) for p in args.paths) or (bundled_traces_dir(),)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"no such trace file or folder: {', '.join(missing)}")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port")
    kwargs: dict[str, object] = {
        "trace_paths": paths,
        "cache_url": args.cache_url,
        "max_upload_bytes": int(args.max_upload_mb * 1024**2),
        "debug": bool(args.debug),
    }
    if args.store is not None:
        kwargs["store_dir"] = Path(args.store)
    return ViewerConfig(**kwargs)  # type: ignore[arg-type]


def url_for(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def run(args: argparse.Namespace) -> int:
    from .server import create_app  # dash is imported only when the viewer is used

    config = config_from_args(args)
    app = create_app(config)
    url = url_for(args.host, args.port)
    print(f"portscope viewer: {url}  (traces: {', '.join(map(str, config.trace_paths))}; store: {config.store_dir}; Ctrl+C stops it)")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: bound to {args.host}: anyone who can reach this address can read and upload traces", file=sys.stderr)
    if args.debug:
        print("warning: debug mode is on; its debugger can run code: do not use it on a shared machine", file=sys.stderr)
    if not args.no_browser:
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    app.run(host=args.host, port=args.port, debug=args.debug)
    return 0

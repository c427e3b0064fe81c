"""Viewer options: one frozen dataclass, from the command line or from the environment (gunicorn)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

DEFAULT_MAX_UPLOAD_BYTES = 2 * 1024**3  # 2 GiB


def default_store_dir() -> Path:
    """~/.cache/portscope/store (or $XDG_CACHE_HOME/portscope/store)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "portscope" / "store"


def bundled_traces_dir() -> Path:
    """The sample traces shipped with portscope (package `portscope.sample_traces`)."""
    from importlib.resources import files

    return Path(str(files("portscope.sample_traces")))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ViewerConfig:
    """Where traces come from and where the viewer keeps what it derives from them."""

    trace_paths: tuple[Path, ...] = ()  # files or folders listed on the runs page
    store_dir: Path = dataclasses.field(default_factory=default_store_dir)  # uploads + derived data (private, 0700)
    cache_dir: Path | None = None  # filesystem cache; default <store_dir>/cache
    cache_url: str | None = None  # redis://host:port/db to share the cache through Redis
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    background_convert_bytes: int = 32 * 1024**2  # uploads to convert larger than this convert in the background
    debug: bool = False

    @property
    def resolved_cache_dir(self) -> Path:
        return self.cache_dir or self.store_dir / "cache"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ViewerConfig:
        """Options from PORTSCOPE_TRACES (os.pathsep-separated), PORTSCOPE_STORE, PORTSCOPE_CACHE_DIR,
        PORTSCOPE_CACHE_URL, PORTSCOPE_MAX_UPLOAD_MB; the bundled sample traces when no traces are named."""
        env = os.environ if environ is None else environ
        paths = tuple(Path(p) for p in env.get("PORTSCOPE_TRACES", "").split(os.pathsep) if p)
        kwargs: dict[str, object] = {"trace_paths": paths or (bundled_traces_dir(),)}
        if env.get("PORTSCOPE_STORE"):
            kwargs["store_dir"] = Path(env["PORTSCOPE_STORE"])
        if env.get("PORTSCOPE_CACHE_DIR"):
            kwargs["cache_dir"] = Path(env["PORTSCOPE_CACHE_DIR"])
        if env.get("PORTSCOPE_CACHE_URL"):
            kwargs["cache_url"] = env["PORTSCOPE_CACHE_URL"]
        if env.get("PORTSCOPE_MAX_UPLOAD_MB"):
            kwargs["max_upload_bytes"] = int(float(env["PORTSCOPE_MAX_UPLOAD_MB"]) * 1024**2)
        return cls(**kwargs)  # type: ignore[arg-type]


def private_dir(path: Path) -> Path:
    """Create a folder only its owner can read (0700), or tighten an existing one we own."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_uid == os.getuid():
        os.chmod(path, 0o700)
    return path

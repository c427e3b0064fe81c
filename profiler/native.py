"""The recording mode's hot path in C++ (``_native.cpp``): built on first use, cached, optional.

``explain()`` without stacks spends most of its per-operator cost in the interpreter (attribute reads,
tuples, bookkeeping right after each kernel). The native handler does exactly what ``recorder._dispatch``
does when no stack is captured and no hook is set, and hands every other call to ``_dispatch``; the
records it appends are the same tuples, so the decoder and every consumer see no difference.

It is compiled with ``torch.utils.cpp_extension`` (a C++ compiler and ninja) the first time a region
opens in a process that has not built it yet (~30 s on 2 cores), into ``$PORTSCOPE_CACHE`` or
``~/.cache/portscope/native/<name>``, where ``<name>`` hashes the source, torch's and Python's versions;
later processes import the built library directly. ``PORTSCOPE_NATIVE=0`` turns it off. A build that fails
(no compiler, no headers, no ninja) warns once and leaves the Python path in charge; it never fails a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import sysconfig
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

ENV = "PORTSCOPE_NATIVE"  # "0": use the Python hot path
CACHE_ENV = "PORTSCOPE_CACHE"  # where the library is built (default ~/.cache/portscope/native)
_SOURCE = Path(__file__).with_name("_native.cpp")
_STALE_LOCK_S = 600  # a build lock older than this was left by a build that died
_log = logging.getLogger(__name__)
_lock = threading.Lock()
PLAIN = frozenset({int, float, bool, type(None), list, tuple, torch.dtype, torch.device, torch.layout,
                    torch.memory_format})  # argument types that are never tensors
_loaded: dict[str, Any] = {}  # "handler": the Handler type, or None once it could not be had


def enabled() -> bool:
    """Whether the native handler may be used (``PORTSCOPE_NATIVE`` is not ``0``)."""
    return os.environ.get(ENV, "1").strip() != "0"


def handler_type(plain: frozenset[type]) -> Callable[[Any, Any, Callable[..., Any]], Any] | None:
    """The native handler's type, ``Handler(session, mode, fallback)``, building it on first use; None when
    turned off or not available. ``plain``: argument types that are never tensors."""
    if not enabled():
        return None
    if "handler" not in _loaded:
        with _lock:
            if "handler" not in _loaded:
                _loaded["handler"] = _load(plain)
    return _loaded["handler"]


def library_name() -> str:
    """The built library's name: it changes with the source, torch and Python."""
    key = hashlib.sha256(_SOURCE.read_bytes())
    key.update(f"{torch.__version__}|{sys.version}|{sys.platform}".encode())
    return f"portscope_dispatch_{key.hexdigest()[:16]}"


def cache_dir() -> Path:
    root = os.environ.get(CACHE_ENV)
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "portscope"
    return base / "native"


def _load(plain: frozenset[type]) -> Any:
    clock = time.get_clock_info("perf_counter").implementation
    if clock != "clock_gettime(CLOCK_MONOTONIC)":
        return _unavailable(f"time.perf_counter reads {clock}, the native recorder reads CLOCK_MONOTONIC")
    try:
        module = _build_or_import()
        module.setup(torch._ops.OpOverload, torch.nn.Parameter, tuple(plain), torch.bool)
        before = time.perf_counter_ns()
        native_now = module.monotonic_ns()
        after = time.perf_counter_ns()
        if not before <= native_now <= after:
            return _unavailable(f"its clock ({native_now} ns) is not time.perf_counter_ns ({before}..{after} ns)")
        return module.Handler
    except Exception as exc:  # noqa: BLE001  (a compiler's, ninja's or the loader's: never the user's run)
        detail = " ".join(str(exc).split())  # a build's cause is at the end of its output
        return _unavailable(f"{type(exc).__name__}: {detail if len(detail) <= 300 else '...' + detail[-300:]}")


def _unavailable(why: str) -> None:
    warnings.warn(f"portscope: the native recorder is not available ({why}); explain() records through its "
                  f"Python path, about twice the overhead per operator. Set {ENV}=0 to silence this.",
                  RuntimeWarning, stacklevel=6)  # the user's `with explain(...)` line
    return None


def _build_or_import() -> Any:
    name = library_name()
    where = cache_dir() / name
    built = where / f"{name}.so"
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_private(where)
    if built.exists() and not (where / "lock").exists():  # torch holds the lock while it builds
        try:
            return _import(name, built)
        except ImportError as exc:  # a half-written library: build it again
            _log.info("portscope: rebuilding %s (%s)", built, exc)
    _clear_stale_lock(where)
    from torch.utils.cpp_extension import load

    _log.info("portscope: building the native recorder once, in %s", where)
    sys.stderr.write(f"portscope: building the native recorder once (~30 s), in {where}; later runs reuse it\n")
    torch_log = logging.getLogger("torch.utils.cpp_extension")
    saved_level = torch_log.level
    torch_log.setLevel(logging.ERROR)  # its banner about compilers: a failure is reported once, below
    try:
        with warnings.catch_warnings(), _ninja_on_path():
            warnings.simplefilter("ignore")  # torch's notes about compilers and CUDA arch lists
            return load(name=name, sources=[str(_SOURCE)], extra_cflags=["-O2"], build_directory=str(where),
                        verbose=False)
    finally:
        torch_log.setLevel(saved_level)


def _check_private(where: Path) -> None:
    """The library is loaded into the user's process: refuse a build folder that someone else owns or may
    write to (a shared or planted cache would run their code)."""
    for folder in (where, where.parent):
        st = folder.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise PermissionError(f"{folder} is not private to this user (owner uid {st.st_uid}, "
                                  f"mode {st.st_mode & 0o777:o}): not loading code from it")


def _import(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a loadable extension")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _clear_stale_lock(where: Path) -> None:
    """torch's build waits forever on a lock file that a killed build left behind."""
    lock = where / "lock"
    with contextlib.suppress(OSError):
        if time.time() - lock.stat().st_mtime > _STALE_LOCK_S:
            lock.unlink()


@contextlib.contextmanager
def _ninja_on_path() -> Iterator[None]:
    """torch runs ``ninja`` from PATH; the one pip installs sits next to this interpreter, which a venv used
    without activating it leaves off PATH."""
    saved = os.environ.get("PATH", "")
    if shutil.which("ninja") is None:
        extra = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
        with contextlib.suppress(ImportError, AttributeError):
            import ninja  # type: ignore[import-not-found]

            extra.insert(0, str(ninja.BIN_DIR))
        os.environ["PATH"] = os.pathsep.join([*extra, saved])
    try:
        yield
    finally:
        os.environ["PATH"] = saved


def ready() -> bool:
    """Build (or load) the native handler now rather than at the first region; whether it is in use."""
    return handler_type(PLAIN) is not None


if __name__ == "__main__":  # python -m portscope.profiler.native: build it once, e.g. after installing
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(f"native recorder: {'ready' if ready() else 'not available'} ({cache_dir() / library_name()})")

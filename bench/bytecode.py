"""Bytecode of portscope's modules written before a bench times whole processes.

An installed package has its modules compiled (pip writes the ``.pyc`` files); an editable install writes them on
the first import, unless ``PYTHONDONTWRITEBYTECODE`` is set (it is on some build machines): then every process
compiles each module it imports from source again, ~0.1 s of a conversion's start-up here. Benches of whole
processes call `compile_portscope` first so that they time what a user's installed copy does.
"""

from __future__ import annotations

import compileall
import importlib
from pathlib import Path

PACKAGES = ("portscope.app", "portscope.ingest", "portscope.profiler")


def compile_portscope() -> list[Path]:
    """Write the bytecode of every module of portscope's packages (where it is missing or stale): their folders."""
    folders = [Path(importlib.import_module(p).__file__).parent for p in PACKAGES]  # type: ignore[arg-type]
    for folder in folders:
        compileall.compile_dir(folder, quiet=1)
    return folders

"""An independent reading of Kineto files with the standard json module, for the tests' expected counts."""

from __future__ import annotations

import collections
import functools
import gzip
import json
from pathlib import Path


@functools.lru_cache(maxsize=4)
def events(path: Path) -> list[dict]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def complete(path: Path, cat: str) -> list[dict]:
    return [e for e in events(path) if e.get("ph") == "X" and e.get("cat") == cat]


def memcpy_by_direction(path: Path) -> dict[str, tuple[int, int]]:
    """{"h2d": (count, bytes), ...} from the memcpy names and args.bytes."""
    out: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for e in complete(path, "gpu_memcpy"):
        name = e["name"]
        direction = "h2d" if "HtoD" in name else "d2h" if "DtoH" in name else "d2d"
        out[direction][0] += 1
        out[direction][1] += int(e.get("args", {}).get("bytes", 0))
    return {k: (v[0], v[1]) for k, v in out.items()}

"""Call sites: one format for every source (the profiler, compile logs, Kineto stacks, fallback logs).

A call site is the innermost frame of *model code* that led to an operator, then the model frame
that called it: `transformers/models/llama/modeling_llama.py:65 (LlamaRMSNorm.forward) <-
transformers/models/llama/modeling_llama.py:297 (LlamaDecoderLayer.forward)`. Its *line* is the part
before ` <- `: signals are grouped by line. Paths are relative to a root kept in `run_info.roots`
(a package's folder for libraries, `.` for the user's code), so traces travel between machines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CALLER_SEPARATOR = " <- "
_LIBRARY_FOLDERS = ("site-packages/", "dist-packages/")
_FILE_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?::\d+)?(?: \((?P<function>.*)\))?$")
_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)")


def format_frame(file: str, line: int | None, function: str | None = None) -> str:
    """`file:line (function)`; the function is left out when unknown."""
    where = f"{file}:{line}" if line is not None else file
    return f"{where} ({function})" if function else where


def format_site(line: str, caller: str | None = None) -> str:
    """A call site from its line and (optionally) the model line that called it, both already formatted."""
    return f"{line}{CALLER_SEPARATOR}{caller}" if caller else line


def site_line(call_site: str) -> str:
    """The line a call site points at (the innermost model frame), without its caller."""
    return call_site.split(CALLER_SEPARATOR, 1)[0]


def parse_frame(text: str) -> tuple[str, int | None, str | None]:
    """(file, line, function) of `file:line (function)` (also `file:line:col`); line None when absent."""
    m = _FILE_LINE.match(text.strip())
    if m is None:
        return text.strip(), None, None
    return m["file"], int(m["line"]), m["function"]


def package_relative(path: str) -> str:
    """A library path relative to its package root (`.../site-packages/transformers/x.py` -> `transformers/x.py`).

    For sources that only carry paths (converted traces): anything not under a package folder is kept.
    """
    unified = path.replace("\\", "/")
    for folder in _LIBRARY_FOLDERS:
        at = unified.rfind(folder)
        if at >= 0:
            return unified[at + len(folder):]
    return path


def relative_site(text: str) -> str:
    """A `file:line (function)` (or a whole call site) with library paths made package-relative."""
    parts = []
    for part in text.split(CALLER_SEPARATOR):
        file, line, function = parse_frame(part)
        parts.append(format_frame(package_relative(file), line, function) if line is not None else part)
    return CALLER_SEPARATOR.join(parts)


# Code that is never the model's, recognised by path in converted stacks: torch, portscope, test runners
# and notebook kernels (package-relative), and Python's own library (`.../lib/python3.11/x.py`).
_PLUMBING_PACKAGES = ("torch/", "functorch/", "portscope/", "_pytest/", "pytest/", "pluggy/", "IPython/", "ipykernel/")
_STDLIB = re.compile(r"(^|/)lib/python\d+(\.\d+)?/(?!site-packages/|dist-packages/)")

Frame = tuple[str, int, str]  # (file, line, function)


def is_plumbing_path(path: str) -> bool:
    """Whether a frame's file is torch, portscope or Python's plumbing (never the model line)."""
    unified = path.replace("\\", "/")
    if unified.startswith("<frozen"):
        return True
    return package_relative(unified).startswith(_PLUMBING_PACKAGES) or bool(_STDLIB.search(unified))


def relative_frames(frames: Iterable[Frame]) -> list[Frame]:
    """Frames with library paths made package-relative (for `StackInterner.intern`)."""
    return [(package_relative(file), line, function) for file, line, function in frames]


def model_site(model: list[Frame]) -> str | None:
    """`line <- caller` from the model frames of a stack (innermost first, already formatted paths): the
    innermost one, and the next one out that is not a closure (decorator wrappers are `f.<locals>.wrapper`)."""
    if not model:
        return None
    callers = [f for f in model[1:] if "<locals>" not in f[2]] or model[1:2]
    return format_site(format_frame(*model[0]), format_frame(*callers[0]) if callers else None)


def site_of_frames(frames: list[Frame]) -> str | None:
    """The call site of a stack from another tool (innermost first), paths package-relative; the innermost
    frame when every frame is plumbing."""
    relative = relative_frames(frames)
    return model_site([f for f in relative if not is_plumbing_path(f[0])] or relative[:1])


def module_summary(counts: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Module paths folded by layer index: `model.layers.[0-3].input_layernorm` -> count, most counted first.

    A path seen alone is kept as it is (`model.layers.3.self_attn.q_norm`).
    """
    groups: dict[str, dict[str, int]] = {}
    for path, n in counts:
        groups.setdefault(_INDEX.sub("*", path), {}).setdefault(path, 0)
        groups[_INDEX.sub("*", path)][path] += n
    out: dict[str, int] = {}
    for pattern, paths in groups.items():
        total = sum(paths.values())
        pieces = [_INDEX.split(p) for p in paths]  # text between indices: equal within a group
        indices = [_INDEX.findall(p) for p in paths]
        varying = [i for i in range(len(indices[0])) if len({ix[i] for ix in indices}) > 1]
        if len(varying) != 1:
            out[next(iter(paths)) if len(paths) == 1 else pattern] = total
            continue
        shown = list(indices[0])
        shown[varying[0]] = "[" + _ranges(sorted({int(ix[varying[0]]) for ix in indices})) + "]"
        out["".join(t + (shown[i] if i < len(shown) else "") for i, t in enumerate(pieces[0]))] = total
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _ranges(values: list[int]) -> str:
    """`0-3,5` for [0, 1, 2, 3, 5]."""
    spans: list[list[int]] = []
    for v in values:
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ",".join(f"{a}-{b}" if b > a + 1 else (f"{a},{b}" if b > a else str(a)) for a, b in spans)

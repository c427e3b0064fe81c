"""Graph-break reasons: the one parser of Dynamo's ``dynamo_graph_break_reason`` text.

Live recordings (profiler/compiled.py) and TORCH_TRACE logs (readers/torch_trace.py) both read
the reason and the user's source line through it, so a live and an offline trace of one run say the
same thing and diff cleanly.
"""

from __future__ import annotations

import re

_BREAK_AT = re.compile(r"Graph break in user code at (?P<file>.+):(?P<line>\d+)")
_TB_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')

__all__ = ["location", "parse_graph_break"]


def parse_graph_break(payload: str) -> tuple[str | None, str | None, list[tuple[str, int, str]]]:
    """(reason, call site, user stack innermost first) of a dynamo_graph_break_reason payload."""
    lines = payload.splitlines()
    site = None
    if lines and (m := _BREAK_AT.search(lines[0])):
        site = f"{m.group('file')}:{m.group('line')}"
    reason_lines: list[str] = []
    frames: list[tuple[str, int, str]] = []
    in_tb = False
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("User code traceback"):
            in_tb = True
            continue
        if in_tb:
            if stripped.startswith("Traceback (most recent call last)"):
                break
            if m := _TB_FRAME.search(stripped):
                frames.append((m.group("file"), int(m.group("line")), m.group("func")))
            continue
        if stripped.startswith("Graph Break Reason:"):
            stripped = stripped[len("Graph Break Reason:") :].strip()
        if stripped and not stripped.startswith(("Encountered graph break", "Hint:", "Developer debug", "For more details")):
            reason_lines.append(stripped.removeprefix("Explanation: "))
    frames.reverse()
    if site and frames and site.endswith(f":{frames[0][1]}"):
        site = f"{site} ({frames[0][2]})"
    return ": ".join(reason_lines[:2]) or None, site, frames


def location(site: str | None) -> str | None:
    """``file:line`` of a call site, without the function some sources add (``file:line (func)``)."""
    return site.split(" (", 1)[0] if site else site

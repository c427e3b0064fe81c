"""The README stays short and true: its length, its quick-start report block, its relative links."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 300
# A fenced block whose first line is `$ portscope report ...`: the rest of the block is what it prints.
REPORT_BLOCK = re.compile(r"^```console\n\$ (portscope report [^\n]+)\n(.*?)^```$", re.M | re.S)
# [text](target) and ![alt](target); a target may carry a title after a space.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _normalised(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def test_readme_has_at_most_300_lines() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_LINES, f"README.md has {count} lines (at most {MAX_LINES}): move details to docs/"


def test_quick_start_report_prints_what_the_readme_shows() -> None:
    blocks = REPORT_BLOCK.findall(README.read_text(encoding="utf-8"))
    assert len(blocks) == 1, "README.md should hold one ```console block starting with `$ portscope report ...`"
    command, shown = blocks[0]
    args = shlex.split(command)[1:]
    assert args[0] == "report" and args[1].startswith("sample_traces/") and (ROOT / args[1]).is_file(), command
    proc = subprocess.run([sys.executable, "-m", "portscope.app.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert _normalised(proc.stdout) == _normalised(shown), (
        f"`{command}` no longer prints the README's block: paste its current output into README.md"
    )


def test_relative_links_point_at_files_that_exist() -> None:
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    relative = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]
    assert len(relative) >= 10, relative  # the screenshots and docs are linked: a parser that finds none is broken
    missing = [t for t in relative if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_link_parser_sees_images_titles_and_anchors() -> None:
    text = '![a](docs/x.png) [b](docs/y.md#part) [c](https://example.org) [d](#local) [e](z.md "title")'
    assert LINK.findall(text) == ["docs/x.png", "docs/y.md#part", "https://example.org", "#local", "z.md"]

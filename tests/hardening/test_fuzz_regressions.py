"""Every input that once broke a reader (tests/fuzz_regressions/<reader>/<file>) loads or raises its own error.

A file whose bug is not fixed yet is listed in KNOWN_BUGS with the reason; the test is then a strict xfail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .fuzz_targets import READERS, REGRESSIONS, feed

KNOWN_BUGS: dict[str, str] = {}


def _cases() -> list[object]:
    cases = []
    for path in sorted(REGRESSIONS.glob("*/*")):
        if path.parent.name not in READERS or path.name.startswith(".") or path.suffix == ".md":
            continue
        key = f"{path.parent.name}/{path.name}"
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[key])] if key in KNOWN_BUGS else []
        cases.append(pytest.param(path, id=key, marks=marks))
    return cases


@pytest.mark.parametrize("path", _cases())
def test_a_once_failing_input_loads_or_gives_a_clear_error(path: Path) -> None:
    assert feed(path.parent.name, path.read_bytes()) in ("ok", "error")

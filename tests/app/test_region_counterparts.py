"""The regions a region page shows side by side (`counterparts`): the same name in another phase or mode."""

from __future__ import annotations

from portscope.app.pages.region import counterparts


def _row(region_id: int, name: str, mode: str = "eager", phase: str = "none") -> dict:
    return {"region_id": region_id, "name": name, "mode": mode, "phase": phase, "label": f"{name} #{region_id}"}


def test_a_name_repeated_in_one_phase_and_mode_has_no_counterpart() -> None:
    # a collective once per step on each of three ranks: nine regions of one name, all eager, no phase
    rows = [_row(i, "gloo:all_reduce") for i in range(9)]
    assert counterparts("run", rows, 4) == []


def test_the_first_region_of_each_other_phase_or_mode_is_its_counterpart() -> None:
    rows = [_row(0, "forward", "eager", "cold"), _row(1, "forward", "eager", "cold"), _row(2, "forward", "compiled", "cold"),
            _row(3, "forward", "compiled", "warm"), _row(4, "forward", "compiled", "warm"), _row(5, "backward", "compiled", "warm")]
    assert [r["region_id"] for r in counterparts("run", rows, 1)] == [2, 3]

"""The prediction check (ingest/prediction_check.py) on the hand-made pair of tests/ingest/prediction_pair.py:
every figure below is worked out by hand from the pair's docstring."""

from __future__ import annotations

import pytest
from prediction_pair import measured, predicted

from portscope.ingest.prediction_check import TOTAL, CostLabel, cost_label, prediction_check


def test_rows_line_up_by_operator_sorted_by_absolute_error_with_a_total() -> None:
    check = prediction_check(predicted(), [0], measured(), [0])
    assert check is not None and (check.predicted, check.target, check.measured_by) == ("A", "demo-npu", "host")
    rows = check.rows.set_index("operator")
    # measured: each call's own host time (aten::linear 1000 less its aten::addmm 800 = 200)
    # predicted: the operator's own work, not its dispatch (addmm 300; nonzero 500 on the host + 30 d2h)
    expected = {  # operator: (kind, predicted calls, measured calls, predicted ns, measured ns, error ns, cost)
        "aten::addmm": ("GEMM", 1, 1, 300, 800, -500, "matrix: calibrated"),
        "aten::linear": ("GEMM", 0, 1, 0, 200, -200, ""),
        "aten::nonzero": ("other", 1, 1, 530, 400, 130, "host: assumed"),
        "aten::add": ("elementwise", 2, 2, 100, 120, -20, "vector: assumed"),
        "aten::view": ("other", 1, 1, 0, 10, -10, ""),
    }
    assert list(rows.index) == [*expected, TOTAL]  # largest absolute error first, the total last
    for operator, (kind, pc, mc, pns, mns, err, cost) in expected.items():
        r = rows.loc[operator]
        assert (r.kind, r.predicted_calls, r.measured_calls, r.predicted_ns, r.measured_ns, r.error_ns, r.abs_error_ns,
                r.cost) == (kind, pc, mc, pns, mns, err, abs(err), cost), operator
    assert rows.loc["aten::addmm", "error_pct"] == pytest.approx(-62.5)
    assert rows.loc["aten::nonzero", "error_pct"] == pytest.approx(32.5)
    assert rows.loc["aten::add", "error_pct"] == pytest.approx(-100 * 20 / 120)
    total = rows.loc[TOTAL]
    assert (total.predicted_calls, total.measured_calls, total.predicted_ns, total.measured_ns, total.error_ns) == (5, 6, 930, 1530, -600)
    assert total.error_pct == pytest.approx(-100 * 600 / 1530)
    assert total.cost == "2 calibrated, 1 datasheet, 4 assumed"
    assert check.labels[CostLabel.CALIBRATED] == ["engines.matrix.flops_per_ns", "engines.matrix.latency_ns"]


def test_either_side_can_be_the_prediction_and_two_measurements_are_no_check() -> None:
    check = prediction_check(measured(), [0], predicted(), [0])
    assert check is not None and check.predicted == "B"
    assert check.rows.iloc[0]["operator"] == "aten::addmm" and check.rows.iloc[0]["error_ns"] == -500
    assert prediction_check(measured(), [0], measured(), [0]) is None


def test_cost_labels() -> None:
    assert cost_label("measured: control.json, n=61, median of the launch calls") is CostLabel.CALIBRATED
    assert cost_label("measured: RBLN-CA12, torch-rbln 0.9 (1,000 eager adds)") is CostLabel.MEASURED
    assert cost_label("datasheet: PCIe 4.0") is CostLabel.DATASHEET
    assert cost_label("assumed: no synchronize call in a.json") is CostLabel.ASSUMED

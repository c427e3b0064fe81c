"""Human time axes and region band labels: ticks chosen by the zoom, labels that never overlap."""

from __future__ import annotations

import pytest

from portscope.app.figures import LABEL_CHAR_PX, MAX_LABEL_ROWS, band_label_rows, panel_annotations
from portscope.app.time_axis import fmt_span, parse_clock, time_ticks
from portscope.ingest.schema import TimeUnit


def in_view(ticks, x0: float, x1: float) -> list[tuple[float, str]]:
    return [(v, t) for v, t in zip(ticks.values, ticks.labels, strict=True) if x0 <= v <= x1]


def test_seconds_of_nanoseconds_read_in_seconds() -> None:
    ticks = time_ticks(0, 7.5e9)  # the predicted run whose axis read "0, 1B, 2B ... 7B"
    assert in_view(ticks, 0, 7.5e9) == [(0.0, "0"), (1e9, "1 s"), (2e9, "2 s"), (3e9, "3 s"), (4e9, "4 s"),
                                        (5e9, "5 s"), (6e9, "6 s"), (7e9, "7 s")]
    assert ticks.title == "time"


@pytest.mark.parametrize(
    ("x1", "expected"),
    [
        (73_000, ["0", "10 µs", "20 µs", "30 µs", "40 µs", "50 µs", "60 µs", "70 µs"]),  # 73 µs: compiled:warm
        (3.44e6, ["0", "0.5 ms", "1 ms", "1.5 ms", "2 ms", "2.5 ms", "3 ms"]),  # 3.44 ms: eager:warm
        (950, ["0", "0.1 µs", "0.2 µs", "0.3 µs", "0.4 µs", "0.5 µs", "0.6 µs", "0.7 µs", "0.8 µs", "0.9 µs"]),  # 100 ns steps read in µs
        (300, ["0", "50 ns", "100 ns", "150 ns", "200 ns", "250 ns", "300 ns"]),  # a 50 ns step stays in ns
    ],
)
def test_the_unit_follows_the_zoom(x1: float, expected: list[str]) -> None:
    assert [t for _, t in in_view(time_ticks(0, x1), 0, x1)] == expected


def test_ticks_reach_one_view_either_side_for_panning() -> None:
    ticks = time_ticks(10_000, 20_000)  # step 1 µs (10 µs / 8 = 1.25 µs: 1 is nearer than 2)
    assert ticks.values[0] == 0 and ticks.values[-1] == 30_000
    assert len(ticks.values) == 31


def test_deep_zoom_far_from_zero_labels_offsets_from_a_named_origin() -> None:
    ticks = time_ticks(7.2e9, 7.2e9 + 3000)  # 3 µs at 7.2 s: step 500 ns
    assert ticks.title == "time from 7.2 s"
    assert in_view(ticks, 7.2e9, 7.2e9 + 3000)[:3] == [(7.2e9, "+0 µs"), (7.2e9 + 500, "+0.5 µs"), (7.2e9 + 1000, "+1 µs")]


def test_cycles_without_a_clock_read_in_cycles() -> None:
    ticks = time_ticks(0, 120_000, unit=TimeUnit.CYCLES)
    assert ticks.title == "cycles"
    assert [t for _, t in in_view(ticks, 0, 120_000)] == ["0", "20k", "40k", "60k", "80k", "100k", "120k"]


def test_short_cycle_spans_read_in_plain_cycles() -> None:
    ticks = time_ticks(0, 600, unit=TimeUnit.CYCLES)  # a 100-cycle step (600 / 8 = 75: 100 is nearest)
    assert [t for _, t in in_view(ticks, 0, 600)] == ["0", "100", "200", "300", "400", "500", "600"]


def test_cycles_with_a_clock_read_in_time_at_cycle_positions() -> None:
    ticks = time_ticks(0, 120_000, unit=TimeUnit.CYCLES, clock_hz=800e6)  # 120k cycles at 0.8 GHz = 150 µs
    assert ticks.title == "time (cycles at 0.8 GHz)"
    shown = in_view(ticks, 0, 120_000)
    assert shown[:4] == [(0.0, "0"), (16_000.0, "20 µs"), (32_000.0, "40 µs"), (48_000.0, "60 µs")]  # 20 µs = 16k cycles
    assert shown[-1] == (112_000.0, "140 µs")


def test_parse_clock() -> None:
    assert parse_clock("1.2 GHz") == 1.2e9
    assert parse_clock("800MHz") == 800e6
    assert parse_clock("1.5") == 1.5e9  # a bare small number is GHz
    assert parse_clock("2000000000") == 2e9
    for bad in ("", None, "fast", "-1 GHz", "0"):
        assert parse_clock(bad) is None


def test_band_labels_that_would_overlap_go_up_a_row() -> None:
    # 1000 px for 1000 units: labels of 20 chars are 124 px wide
    bands = [(0, 100, "a" * 20), (50, 300, "b" * 20), (100, 200, "c" * 20), (500, 600, "d" * 20)]
    assert band_label_rows(bands, 0, 1000, plot_px=1000) == [(0, False), (1, False), (2, False), (0, False)]
    # zoomed in on 0..250 (4 px per unit) every label has room in the first row
    assert band_label_rows(bands, 0, 250, plot_px=1000) == [(0, False)] * 3 + [None]  # d is out of the view
    # a label that would run past the right edge ends there instead (d: 124 px from 950 px)
    assert band_label_rows([(950, 1000, "d" * 20)], 0, 1000, plot_px=1000) == [(0, True)]


def test_a_label_with_no_free_row_is_left_out_and_none_overlap() -> None:
    bands = [(float(i), float(i + 1), f"region {i}") for i in range(10)]  # ten bands within 10 px
    rows = [p[0] if p else None for p in band_label_rows(bands, 0, 1000, plot_px=1000)]
    assert rows[:MAX_LABEL_ROWS] == list(range(MAX_LABEL_ROWS)) and rows[MAX_LABEL_ROWS:] == [None] * (10 - MAX_LABEL_ROWS)
    spans = {}
    for (x0, _x1, text), row in zip(bands, rows, strict=True):
        if row is not None:
            spans.setdefault(row, []).append((x0, x0 + len(text) * LABEL_CHAR_PX))
    for row_spans in spans.values():
        row_spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(row_spans, row_spans[1:], strict=False))


def test_panel_annotations_place_labels_by_row_and_clip_to_the_view() -> None:
    bands = [[(0, 100, "eager:cold"), (10, 200, "eager:warm"), (200, 400, "compiled:cold")]]
    notes = panel_annotations(bands, None, [(150, 400)])
    # the first band ends before the view; the second starts before it: its label sits at the view's edge
    assert [(n["text"], n["x"], n["yshift"]) for n in notes] == [("eager:warm", 150, 0), ("compiled:cold", 200, 0)]


def test_a_range_heading_is_precise_enough_to_tell_its_length() -> None:
    assert fmt_span(484e6, 485.7e6) == "484.00 ms to 485.70 ms (1.7 ms)"
    assert fmt_span(240, 420, TimeUnit.CYCLES) == "240 cycles to 420 cycles (180 cycles)"

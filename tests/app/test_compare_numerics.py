"""The compare page's numerics table: a row without a figure (the verdict) shows its text on each side."""

from __future__ import annotations

from pathlib import Path

from portscope.app.pages.compare import numerics_side_by_side
from portscope.ingest import read_trace

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "llama_fp16-npu_eager_vs_compiled.arrow"


def test_verdict_row_shows_its_text_and_figures_their_value() -> None:
    trace = read_trace(SAMPLE)
    heading, table = numerics_side_by_side(trace, trace)
    assert heading.children == "Numerics"
    rows = {tr.children[1].children: [td.children for td in tr.children] for tr in table.children[1].children}
    # the sample's numerics rows (eager-vs-compiled): verdict "match" (text only), max_abs_diff 2^-11, steps 7
    assert rows["verdict"] == ["eager-vs-compiled", "verdict", "match", "match"]
    assert rows["max_abs_diff"] == ["eager-vs-compiled", "max_abs_diff", "0.0004883", "0.0004883"]
    assert rows["steps"] == ["eager-vs-compiled", "steps", "7", "7"]

"""Signals by source line, call-site formatting and source text, on a hand-built trace."""

from __future__ import annotations

from pathlib import Path

from linestrace import LAYER, NORM, ROPE, lines_trace

from portscope.ingest.builder import TableBuilder
from portscope.ingest.callsites import module_summary, package_relative, parse_frame, relative_site, site_line
from portscope.ingest.lines import line_detail, line_table, source_index
from portscope.ingest.report import format_region, region_report_data
from portscope.ingest.summary import summarize
from portscope.ingest.trace import read_trace, write_trace


def test_call_site_helpers() -> None:
    assert site_line(f"{NORM} <- {LAYER}") == NORM
    assert parse_frame("model.py:12 (f)") == ("model.py", 12, "f")
    assert parse_frame("/a/b.py:7:3") == ("/a/b.py", 7, None)
    assert package_relative("/usr/lib/python3/dist-packages/transformers/x.py") == "transformers/x.py"
    assert package_relative("/home/me/run.py") == "/home/me/run.py"
    assert relative_site("/v/lib/python3.11/site-packages/t/m.py:3 (f) <- /v/lib/python3.11/site-packages/t/n.py:9 (g)") \
        == "t/m.py:3 (f) <- t/n.py:9 (g)"
    assert module_summary([("model.layers.0.mlp", 2), ("model.layers.1.mlp", 2), ("model.layers.2.mlp", 1),
                           ("model.norm", 1)]) == {"model.layers.[0-2].mlp": 5, "model.norm": 1}
    assert module_summary([("model.layers.3.self_attn.q_norm", 1)]) == {"model.layers.3.self_attn.q_norm": 1}


def test_line_table_counts_bytes_time_and_source(tmp_path: Path) -> None:
    trace = read_trace(write_trace(lines_trace(), tmp_path / "lines.arrow"))
    assert source_index(trace) == {NORM: "variance = x.pow(2)", ROPE: "q_embed = q * cos"}
    norm, rope = line_table(trace, 0)
    assert (norm.line, norm.count, norm.bytes, norm.time_ns) == (NORM, 3, 0, 60)  # host times: 10 + 20 + 30
    assert (rope.line, rope.count, rope.bytes, rope.time_ns) == (ROPE, 2, 128, 900)
    assert norm.modules == {"model.layers.[0,1].input_layernorm": 2, "model.norm": 1}
    assert norm.callers == {LAYER: 2} and norm.source == "variance = x.pow(2)"
    detail = line_detail(trace, 0, NORM)
    assert detail is not None and detail.operators == [
        {"signal": "dispatch/cpu_fallback", "operator": "aten::mul.Tensor", "count": 3, "bytes": 0}]
    (n, frames), = detail.stacks  # the final norm's signal has no stack
    assert n == 2 and frames == [f"{NORM}    variance = x.pow(2)", "torch/nn/modules/module.py:1778 (Module._wrapped_call_impl)",
                                 LAYER]
    assert trace.run_info.roots == {"transformers": "/x/transformers"}


def test_report_groups_an_operator_by_line() -> None:
    summary = summarize(lines_trace(), 0)
    (mul,) = summary.operators
    assert [(t.line, t.count) for t in mul.lines] == [(NORM, 3), (ROPE, 2)]
    data = region_report_data(summary)
    assert data["operators"][0]["lines"][1]["modules"] == {"model.layers.[0,1].self_attn": 2}
    text = format_region(summary)
    assert f"3x at {NORM}  in model.layers.[0,1].input_layernorm 2, model.norm 1" in text
    assert "| q_embed = q * cos" in text


def test_a_lines_time_leaves_out_its_operators_memory_levels(tmp_path: Path) -> None:
    # the rope operators (3, 4) ran on the device for 70 and 80 ns; operator 3's allocation also holds an "allocated"
    # level for 5,000 ns on a memory lane: the line's time is 150, not 5,150 (a level of memory is no time)
    trace = lines_trace()
    b = TableBuilder("engine_slices")
    for op_id, dur in ((3, 70), (4, 80)):
        b.append(engine="vector", engine_kind="vector", kind="compute", name="aten::mul.Tensor", start=op_id * 100,
                 dur=dur, op_id=op_id, region_id=0)
    b.append(engine="memory npu:0", engine_kind="other", kind="annotation", name="allocated", start=300, dur=5000,
             op_id=3, region_id=0, bytes=64)
    trace.tables["engine_slices"] = b.build()
    trace = read_trace(write_trace(trace, tmp_path / "lines.arrow"))
    rope = next(row for row in line_table(trace, 0) if row.line == ROPE)
    assert rope.time_ns == 150

"""Eager NPU fallback logs -> cpu_fallback signals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from portscope.ingest import SignalKind, TraceFormatError
from portscope.ingest.convert import detect, load_any
from portscope.ingest.lines import source_index
from portscope.ingest.readers import read_fallback_log
from portscope.ingest.report import format_trace

LOG = """\
[2026-09-14 19:49:00.145][I] `aten::neg` op ran on CPU instead of RBLN
[2026-09-14 19:49:00.146][W] TRACE: /work/llama/modeling_llama.py:85 in rotate_half
    return torch.cat((-x2, x1), dim=-1)
[2026-09-14 19:49:00.150][I] compiling program 12 for aten::mm
[2026-09-14 19:49:00.155][I] `aten::pow` op ran on CPU instead of RBLN
[2026-09-14 19:49:00.200][I] `sdpa_overrideable (query sequence length 7 not aligned to 32)` op ran on CPU instead of RBLN
[2026-09-14 19:49:00.201][W] TRACE: /work/llama/modeling_llama.py:212 in forward
    attn_output = attention_interface(self, query, key, value)
[2026-09-14 19:49:01.000][I] `aten::rsqrt (dtype float32 is not supported)` op ran on CPU instead of RBLN
something the parser has never seen
[2026-09-14 19:49:01.500][I] `aten::neg` op ran on CPU instead of RBLN
"""


def _plain_count(text: str) -> int:
    return len(re.findall(r"`[^`]+` op ran on CPU instead of", text))


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    path = tmp_path / "run.txt"  # the extension says nothing: detection is by content
    path.write_text(LOG)
    return path


def test_fallback_log(log_path: Path) -> None:
    assert detect(log_path) == "fallback-log"
    trace = load_any(log_path)
    signals = trace["signals"].to_pylist()
    assert len(signals) == _plain_count(LOG) == 5
    assert all(s["kind"] == SignalKind.CPU_FALLBACK.value and s["count"] == 1 for s in signals)
    assert [s["op_name"] for s in signals] == ["aten::neg", "aten::pow", "sdpa_overrideable", "aten::rsqrt", "aten::neg"]
    neg, pow_, sdpa, rsqrt, neg2 = signals
    assert neg["call_site"] == "/work/llama/modeling_llama.py:85 (rotate_half)"
    assert pow_["call_site"] is None and neg2["call_site"] is None
    assert sdpa["reason"] == "unaligned (query sequence length 7 not aligned to 32)"
    assert sdpa["note"] == "try: pad to a multiple of 32"
    assert sdpa["call_site"] == "/work/llama/modeling_llama.py:212 (forward)"
    assert rsqrt["reason"].startswith("dtype-not-supported")
    assert neg["reason"] is None
    assert [s["time_ns"] for s in signals] == [0, 10_000_000, 55_000_000, 855_000_000, 1_355_000_000]
    info = trace.run_info
    assert info.converted_from == "fallback-log" and info.devices == ["cpu", "rbln"]
    assert info.extra["unknown_lines"] == 2 and info.extra["fallback_lines"] == 5
    assert any("never seen" in e for e in info.extra["unknown_line_examples"])
    # the source line printed under the warning travels in the frames table, as the profiler stores it
    assert source_index(trace)["/work/llama/modeling_llama.py:85 (rotate_half)"].startswith("return torch.cat")
    assert info.start_time == "2026-09-14T19:49:00.145000"
    report = format_trace(trace)
    assert re.search(r"dispatch/cpu_fallback\s+5\s", report)
    assert "2x aten::neg" in report


def test_log_without_fallbacks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("[2026-09-14 19:49:00.145][I] all good\n")
    with pytest.raises(TraceFormatError, match="not a fallback log"):
        read_fallback_log(path)


def test_windows_line_endings_and_no_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"`aten::neg` op ran on CPU instead of RBLN\r\n`aten::neg` op ran on CPU instead of RBLN\r\n")
    trace = read_fallback_log(path)
    assert trace["signals"].num_rows == 2 and trace.run_info.extra["unknown_lines"] == 0
    assert trace["signals"].column("time_ns").null_count == 2


def test_timestamps_centuries_apart_do_not_overflow(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("[0001-01-01 00:00:00.000][I] `aten::neg` op ran on CPU instead of RBLN\n"
                    "[9999-12-31 23:59:59.999][I] `aten::neg` op ran on CPU instead of RBLN\n")
    trace = read_fallback_log(path)
    assert trace["signals"].column("time_ns").to_pylist() == [0, None]


def test_fallback_lines_with_other_loggers_prefixes(tmp_path: Path) -> None:
    # the same words after six other prefixes; a sentence's full stop after the device; a time zone; a glog line
    # (no year: untimed). Eight fallbacks at 0, 1, 2, -, 4, 5, 6, 7 ms; devices rbln and rbln:0, never "rbln.".
    path = tmp_path / "variants.log"
    path.write_text(
        "[2026-09-14T19:49:00,145][WARNING] `aten::neg` op ran on CPU instead of RBLN.\n"
        "[2026-09-14 19:49:00.146+09:00][I] `aten::abs` op ran on CPU instead of RBLN\n"
        "[2026-09-14 19:49:00.147Z][I] `aten::sin` op ran on CPU instead of RBLN\n"
        "W0914 19:49:00.148000 1234 rbln/fallback.cc:12] `aten::cos` op ran on CPU instead of RBLN\n"
        "2026-09-14 19:49:00,149 - WARNING - `aten::tan` op ran on CPU instead of RBLN\n"
        "[2026-09-14 19:49:00.150][I] `aten::ünïcødé_op` op ran on CPU instead of RBLN\n"
        "[2026-09-14 19:49:00.151][I] `aten::exp` op ran on CPU instead of rbln:0\n"
        "[2026-09-14 19:49:00.152] [I] `aten::log` op ran on CPU instead of RBLN\n", encoding="utf-8")
    trace = load_any(path)
    s = trace["signals"].to_pydict()
    assert s["op_name"] == ["aten::neg", "aten::abs", "aten::sin", "aten::cos", "aten::tan", "aten::ünïcødé_op",
                            "aten::exp", "aten::log"]
    assert s["time_ns"] == [0, 1_000_000, 2_000_000, None, 4_000_000, 5_000_000, 6_000_000, 7_000_000]
    assert trace.run_info.devices == ["cpu", "rbln", "rbln:0"]
    assert trace.run_info.extra["unknown_lines"] == 0

"""The sample traces regenerate with the committed counts; `portscope record` always writes a trace."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from portscope.ingest import read_trace, summarize
from portscope.ingest.summary import region_ids
from portscope.profiler.demo import SAMPLES, make_samples

REPO = Path(__file__).resolve().parents[2]
SAMPLE_DIR = REPO / "sample_traces"


def counts(path: Path) -> dict:
    trace = read_trace(path)
    out = {}
    for rid in region_ids(trace):
        s = summarize(trace, rid)
        out[s.name] = {
            "ops": s.op_count,
            "signals": {r.signal: (int(r.count), int(r.bytes)) for r in s.signals},
            "transfers": {d.value: (s.transfer_counts[d], s.transfer_bytes[d]) for d in s.transfer_counts},
        }
    return out


def test_samples_are_listed_in_the_readme() -> None:
    readme = (SAMPLE_DIR / "README.md").read_text()
    for sample in SAMPLES:
        assert f"`{sample.file}`" in readme
        assert (SAMPLE_DIR / sample.file).is_file()


# What each regenerated sample must show on any torch, worked out by hand from the tiny Llama (2 layers, hidden 128,
# 4 heads and 2 KV heads of 32, so 5 RMSNorms a forward) and the target, per region:
# (fallbacks inside RMSNorms, host bounces inside RMSNorms, attention fallbacks for the query length, compiled graphs).
# An RMSNorm in float16 under fp16-npu (float16 only) casts to float32 and back (2 bounces) and falls back on its five
# float32 operators (pow, mean, add eps, rsqrt, mul): 5 x 5 = 25 fallbacks and 5 x 2 = 10 bounces a forward.
# fp16-npu's fused attention needs a query length that is a multiple of 32: at 7 tokens each layer's falls back.
# generate() makes 4 new tokens: 4 forwards (the prompt, then 3 decode steps of one token, also not multiples of 32).
# cuda computes in float32 and casts on the device; the measured CPU run has no target to fall back from; the
# compiled forward (padded to 64) is one graph, captured once in the cold region.
HAND_FIGURES = {
    "llama_fp16-npu_forward.arrow": {"forward:cold": (25, 10, 2, 0), "forward:warm": (25, 10, 2, 0)},
    "llama_fp16-npu_rmsnorm_narrow.arrow": {"rmsnorm (narrow)": (5, 2, 0, 0)},  # no module: the region is the norm
    "llama_fp16-npu_generate.arrow": {"generate #1 (7-token prompt)": (100, 40, 8, 0),
                                      "generate #2 (7-token prompt)": (100, 40, 8, 0),
                                      "generate #3 (12-token prompt)": (100, 40, 8, 0)},
    "llama_cuda_forward.arrow": {"forward:cold": (0, 0, 0, 0), "forward:warm": (0, 0, 0, 0)},
    "llama_fp16-npu_eager_vs_compiled.arrow": {"eager:cold": (25, 10, 0, 0), "eager:warm": (25, 10, 0, 0),
                                               "compiled:cold": (0, 0, 0, 1), "compiled:warm": (0, 0, 0, 0)},
    "llama_cpu_measured.arrow": {"forward:cold": (0, 0, 0, 0), "forward:warm": (0, 0, 0, 0)},
}


def hand_figures(path: Path) -> dict[str, tuple[int, int, int, int]]:
    """Per region: HAND_FIGURES' four counts, read from the signals table (a signal of a narrow region, one around a
    module, has no module of its own: the region's "narrow" tag names it)."""
    trace = read_trace(path)
    regions = {r["region_id"]: (r["name"], json.loads(r["tags"] or "{}").get("narrow")) for r in trace["regions"].to_pylist()}
    out = {name: [0, 0, 0, 0] for name, _ in regions.values()}
    for s in trace["signals"].to_pylist():
        name, narrow = regions[s["region_id"]]
        figures, in_norm = out[name], "norm" in (s["module"] or narrow or "")
        if s["kind"] == "dispatch/cpu_fallback" and s["reason"] == "shape-condition":
            figures[2] += s["count"]
        elif s["kind"] == "dispatch/cpu_fallback" and in_norm:
            figures[0] += s["count"]
        elif s["kind"].startswith("host_bounce/") and in_norm:
            figures[1] += s["count"]
        elif s["kind"] == "compile/graph":
            figures[3] += s["count"]
    return {name: tuple(f) for name, f in out.items()}


def test_every_sample_has_hand_figures() -> None:
    assert set(HAND_FIGURES) == {s.file for s in SAMPLES}
    for sample in SAMPLES:  # the committed files show them too
        assert hand_figures(SAMPLE_DIR / sample.file) == HAND_FIGURES[sample.file], sample.file


@pytest.mark.parametrize("sample", [s.file for s in SAMPLES])
def test_regenerated_samples_match_committed_counts(sample: str, tmp_path: Path) -> None:
    """On any torch the regenerated sample shows the hand figures; on the torch that recorded the committed file,
    every count of every region is the committed one (operator counts follow torch's decompositions)."""
    if "compiled" in sample:  # torch.compile caches live in the process: regenerate in a fresh one
        proc = run_cli("demo", "-o", str(tmp_path), "--only", sample, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        path = tmp_path / sample
    else:
        (path,) = make_samples(tmp_path, only=[sample])
    assert hand_figures(path) == HAND_FIGURES[sample]
    recorded = read_trace(SAMPLE_DIR / sample).run_info.torch_version or ""
    if recorded.split(".")[:2] == torch.__version__.split(".")[:2]:
        assert counts(path) == counts(SAMPLE_DIR / sample)


def _machine_paths(trace_path: Path) -> list[str]:
    """Strings of a trace (run info and every string column) naming a folder of the machine that made it."""
    import json

    import pyarrow as pa

    trace = read_trace(trace_path)
    texts = [json.dumps(trace.run_info.to_json())]
    for table in trace.tables.values():
        for column in table.columns:
            if pa.types.is_dictionary(column.type):
                column = column.cast(pa.string())
            if pa.types.is_string(column.type):
                texts += [v for v in column.to_pylist() if v]
    return [t[:120] for t in texts if str(REPO) in t or "site-packages" in t or "/tmp/" in t]


@pytest.mark.parametrize("sample", [s.file for s in SAMPLES])
def test_samples_carry_no_folder_of_the_machine_that_made_them(sample: str) -> None:
    assert _machine_paths(SAMPLE_DIR / sample) == []


def test_a_regenerated_sample_carries_relative_call_sites(tmp_path: Path) -> None:
    (path,) = make_samples(tmp_path, only=["llama_fp16-npu_rmsnorm_narrow.arrow"])
    trace = read_trace(path)
    assert _machine_paths(path) == [] and trace.run_info.roots == {}
    sites = {s for s in trace["signals"].column("call_site").to_pylist() if s}
    assert sites and all(s.startswith("transformers/models/llama/modeling_llama.py:") for s in sites), sites


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "portscope.app.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_record_script_with_regions(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        from portscope.profiler import explain
        x = torch.randn(4, 64, dtype=torch.float16)
        with explain("cast"):
            y = x.float().sum()
        with explain("plain"):
            z = x * 2
        print("args", sys.argv[1:])
    """))
    out = tmp_path / "run.arrow"
    proc = run_cli("record", "--target", "fp16-npu", "-o", str(out), "--", "python", str(script), "a", "b", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "args ['a', 'b']" in proc.stdout
    trace = read_trace(out)
    assert trace.region_names() == ["cast", "plain"] and trace.run_info.target == "fp16-npu"
    assert summarize(trace, 0).count(__import__("portscope.ingest").ingest.SignalKind.BOUNCE_DTYPE) == 1


def test_record_whole_script_and_failure(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import torch\nx = torch.randn(8)\ny = x.to('meta')\nraise RuntimeError('model exploded')\n")
    out = tmp_path / "run.arrow"
    proc = run_cli("record", "-o", str(out), "--", str(script), cwd=tmp_path)
    assert proc.returncode == 1 and "model exploded" in proc.stderr
    trace = read_trace(out)  # written although the script failed
    assert trace.region_names() == ["script"]
    s = summarize(trace, 0)
    assert s.error == "RuntimeError: model exploded" and s.op_count >= 2  # marked with the error, ops kept
    assert s.transfer_counts[__import__("portscope.ingest").ingest.Direction.H2D] == 1


def test_record_call_sites_are_relative_and_library_moves_them(tmp_path: Path) -> None:
    (tmp_path / "mymodel.py").write_text("import torch\n\ndef step(x):\n    return (x * 2).sum()\n")
    script = tmp_path / "script.py"
    script.write_text("import torch\nimport mymodel\nx = torch.randn(8)\ny = mymodel.step(x)\n")
    sites = {}
    for flags in ([], ["--library", "mymodel"]):
        out = tmp_path / f"run{len(flags)}.arrow"
        proc = run_cli("record", *flags, "-o", str(out), "--", "python", str(script), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        trace = read_trace(out)
        sites[len(flags)] = {(op["name"], op["call_site"]) for op in trace["ops"].to_pylist()}
        assert trace.run_info.roots["."] == str(tmp_path)
    # mymodel.py line 4 multiplies and sums, called from script.py line 4; as a library, the script's line is the site
    assert sites[0] == {("aten::mul.Tensor", "mymodel.py:4 (step) <- script.py:4 (<module>)"),
                        ("aten::sum", "mymodel.py:4 (step) <- script.py:4 (<module>)"),
                        ("aten::randn", "script.py:3 (<module>)")}
    assert sites[2] == {("aten::mul.Tensor", "script.py:4 (<module>)"), ("aten::sum", "script.py:4 (<module>)"),
                        ("aten::randn", "script.py:3 (<module>)")}


def test_record_needs_a_command(tmp_path: Path) -> None:
    proc = run_cli("record", "-o", str(tmp_path / "x.arrow"), cwd=tmp_path)
    assert proc.returncode == 2 and "nothing to run" in proc.stderr


@pytest.mark.parametrize("name", ["cuda_diff_control", "cuda_diff_test", "bert_small_h100", "bert_small_mi300"])
def test_converted_samples_match_their_source(name: str, tmp_path: Path, shared_fixtures: Path) -> None:
    from portscope.app.cli import main

    out = tmp_path / f"{name}.arrow"
    assert main(["convert", str(shared_fixtures / "kineto" / f"{name}.json.gz"), "-o", str(out)]) == 0
    assert counts(out) == counts(SAMPLE_DIR / f"{name}.arrow")

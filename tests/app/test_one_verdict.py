"""One verdict: the runs page, the run page, the region page, `report --json` and `check` agree on every sample."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from portscope.app.context import store
from portscope.app.pages import region
from portscope.app.pages.common import region_rows
from portscope.ingest import read_trace, write_trace
from portscope.ingest.budget import METRICS
from portscope.ingest.builder import TraceBuilder
from portscope.ingest.catalog import group_counts
from portscope.ingest.report import trace_report_data
from portscope.ingest.schema import Mode, SignalKind, Source
from portscope.ingest.summary import summarize
from portscope.ingest.trace import RunInfo

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_traces").glob("*.arrow"))


# Every sample's top-level regions as each surface must show them: (status, fallbacks, host bounces, compiles, d2h
# bytes), and the reasons of a few. The figures are the samples' own (sample_traces/README.md): the converted CUDA
# runs copy 60 times device-to-host (100,896 and 117,936 bytes, summed from their DtoH memcpy events) and wait 61 times
# (a cudaStreamSynchronize or cudaDeviceSynchronize each; 6 of their 30 aten::item read host scalars); the BERT pair
# reads one byte back (the H100's labelled DtoH, the MI300's labelled DtoD but launched with hipMemcpyKind 2);
# the Ascend table has 7 Cast kernels on the AI CPU; the demo Llama's forward under fp16-npu falls back 54 times (25 in
# its 5 RMSNorms, 22 in the 2 layers' rotary halves and attention, 6 in the rotary embedding, 1 position add), bounces
# 14 dtype casts through the host and compiles 12 programs cold (tests/profiler/test_schedule.py works these out).
FORWARD_COLD = ("not-clean", 54, 14, 12, 21_592)
FORWARD_WARM = ("not-clean", 54, 14, 0, 21_592)
CLEAN = ("clean", 0, 0, 0, 0)
EXPECTED: dict[str, tuple[str, dict[str, tuple[str, int, int, int, int]]]] = {
    "ascend_kernel_details_591.arrow": ("not-clean", {"kernel_details_591": ("not-clean", 7, 0, 0, 0)}),
    "bert_small_h100.arrow": ("not-clean", {"bert_small_h100.json.gz": ("not-clean", 0, 0, 0, 1)}),
    "bert_small_mi300.arrow": ("not-clean", {"bert_small_mi300.json.gz": ("not-clean", 0, 0, 0, 1)}),
    # three CPU ranks under DDP on gloo: no device, so nothing copied, fallen back or compiled
    "ddp_gloo_3ranks.arrow": ("clean", {"rank 0": CLEAN, "rank 1": CLEAN, "rank 2": CLEAN}),
    "cuda_diff_control.arrow": ("not-clean", {"cuda_diff_control.json.gz": ("not-clean", 0, 0, 0, 100_896)}),
    "cuda_diff_test.arrow": ("not-clean", {"cuda_diff_test.json.gz": ("not-clean", 0, 0, 0, 117_936)}),
    "llama_cpu_measured.arrow": ("clean", {"forward:cold": CLEAN, "forward:warm": CLEAN}),
    "llama_cuda_forward.arrow": ("clean", {"forward:cold": CLEAN, "forward:warm": CLEAN}),
    "llama_fp16-npu_eager_vs_compiled.arrow": ("not-clean", {
        "eager:cold": ("not-clean", 59, 15, 19, 198_755), "eager:warm": ("not-clean", 59, 15, 0, 198_755),
        "compiled:cold": ("compiles", 0, 0, 1, 0), "compiled:warm": CLEAN}),
    "llama_fp16-npu_forward.arrow": ("not-clean", {"forward:cold": FORWARD_COLD, "forward:warm": FORWARD_WARM}),
    "llama_fp16-npu_generate.arrow": ("not-clean", {
        "generate #1 (7-token prompt)": ("not-clean", 245, 60, 42, 162_788),
        "generate #2 (7-token prompt)": ("not-clean", 245, 60, 0, 162_788),
        "generate #3 (12-token prompt)": ("not-clean", 245, 60, 14, 178_308)}),
    "llama_fp16-npu_rmsnorm_narrow.arrow": ("not-clean", {"rmsnorm (narrow)": ("not-clean", 5, 2, 1, 1792)}),
}  # fmt: skip
REASONS = {
    "ascend_kernel_details_591.arrow": ["cpu_fallback: 7x (ran on CPU)"],
    "bert_small_mi300.arrow": ["d2h: 1x (device-to-host copies, 1 B)", "sync: 3x (host waited for the device)"],
    "cuda_diff_test.arrow": ["d2h: 60x (device-to-host copies, 117.9 KB)", "sync: 61x (host waited for the device)"],
    "llama_fp16-npu_rmsnorm_narrow.arrow": ["cpu_fallback: 5x (ran on CPU)", "bounce_dtype: 2x (copied through the host, 5.4 KB)",
                                            "d2h: 1x (device-to-host copies, 1.8 KB)"],
    "llama_cuda_forward.arrow": [],
}


def _texts(component: Any) -> list[str]:
    if component is None:
        return []
    if isinstance(component, str | int | float):
        return [str(component)]
    if isinstance(component, list | tuple):
        return [t for c in component for t in _texts(c)]
    return [t for name in ("children", "label") for t in _texts(getattr(component, name, None))]


def _figures(row: dict[str, Any]) -> tuple[str, int, int, int, int]:
    return row["status"], row["fallbacks"], row["bounces"], row["compiles"], row["d2h_bytes"]


def _pages_show(app: Any, path: Path, status: str, regions: dict[str, tuple[str, int, int, int, int]]) -> None:
    """The runs page, the run page, the region page, `report --json` and `check`'s budgets each show the hand figures."""
    trace = read_trace(path)
    run_id = trace.content_hash()
    report = trace_report_data(trace)
    with app.server.test_request_context("/"):
        runs_row = store().run_row(run_id, path.name)
        top = {r["name"]: r for r in region_rows(run_id, trace) if r["depth"] == 0}
        assert {name: _figures(r) for name, r in top.items()} == regions  # the run page
        reported = {r["region"]: r for r in report["regions"] if r["depth"] == 0}
        assert {name: (r["verdict"]["status"], *(group_counts({SignalKind(s["signal"]): s["count"] for s in r["signals"]})[k]
                                                 for k in ("fallbacks", "bounces", "compiles")), r["d2h_bytes"])
                for name, r in reported.items()} == regions  # report --json
        for name, figures in regions.items():  # check's budgets measure the same summary
            summary = summarize(trace, top[name]["region_id"])
            measure = {k: METRICS[k].measure(summary) for k in ("cpu_fallback", "host_bounce", "recompile", "graph",
                                                                 "compile_recompile", "d2h_bytes")}
            assert (measure["cpu_fallback"], measure["host_bounce"],
                    measure["recompile"] + measure["graph"] + measure["compile_recompile"], measure["d2h_bytes"]) == figures[1:]
        for row in list(top.values())[:3]:  # the region page: the status's badge and the report's reasons
            page = region.layout(run_id=run_id, region=row["name"], n=str(row["nth"]))
            assert f"badge badge-{regions[row['name']][0]}" in [b.className for b in _badges(page)]
            assert all(reason in _texts(page) for reason in reported[row["name"]]["verdict"]["reasons"])
    assert runs_row.status == report["totals"]["status"] == status  # the runs page
    for key, at in (("fallbacks", 1), ("bounces", 2), ("compiles", 3), ("d2h_bytes", 4)):  # run totals: top level only
        assert getattr(runs_row, key) == sum(figures[at] for figures in regions.values()), key
    if path.name in REASONS:
        assert [r["verdict"]["reasons"] for r in reported.values()][0] == REASONS[path.name]


def _badges(component: Any) -> list[Any]:
    if isinstance(component, list | tuple):
        return [b for c in component for b in _badges(c)]
    if component is None or isinstance(component, str | int | float):
        return []
    found = [component] if "badge" in (getattr(component, "className", None) or "") else []
    return found + _badges(getattr(component, "children", None))


def test_every_sample_has_its_figures_written_here() -> None:
    assert sorted(EXPECTED) == [p.name for p in SAMPLES]


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_every_page_and_command_show_the_samples_figures(path: Path, make_app: Any) -> None:
    status, regions = EXPECTED[path.name]
    _pages_show(make_app(trace_paths=(path,)), path, status, regions)


def test_run_totals_never_double_count_nested_regions() -> None:
    """cuda_diff_test: the run moved 117,936 bytes device-to-host (its one top-level region); summing every
    nested region counts the same copies up to three more times."""
    report = trace_report_data(read_trace(SAMPLES[0].parent / "cuda_diff_test.arrow"))
    assert report["totals"]["transfer_bytes"]["d2h"] == 117_936
    assert [r["depth"] for r in report["regions"]][:3] == [0, 1, 2]
    assert sum(r["d2h_bytes"] for r in report["regions"]) > 117_936


def test_a_region_that_raised_is_an_error_everywhere(make_app: Any, tmp_path: Path) -> None:
    b = TraceBuilder(RunInfo(source=Source.MEASURED))
    b.add_region("step", start_ns=0, dur_ns=10, mode=Mode.EAGER, device="cpu", error="RuntimeError: boom")
    path = write_trace(b.build(), tmp_path / "raised.arrow")
    report = trace_report_data(read_trace(path))
    assert report["regions"][0]["verdict"] == {"clean": False, "status": "error", "reasons": ["error: RuntimeError: boom"]}
    assert report["totals"]["status"] == "error"
    _pages_show(make_app(trace_paths=(path,)), path, "error", {"step": ("error", 0, 0, 0, 0)})


def test_check_fails_on_a_region_that_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from portscope.app.cli import main

    b = TraceBuilder(RunInfo(source=Source.MEASURED))
    b.add_region("step", start_ns=0, dur_ns=10, mode=Mode.EAGER, device="cpu", error="RuntimeError: boom")
    b.add_region("fine", start_ns=20, dur_ns=10, mode=Mode.EAGER, device="cpu")
    path = write_trace(b.build(), tmp_path / "raised.arrow")
    assert main(["check", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == ["error: region step raised RuntimeError: boom"]


def test_the_text_report_says_the_status() -> None:
    from portscope.ingest.report import format_trace

    verdicts = [line.strip() for line in format_trace(read_trace(SAMPLES[0].parent / "llama_fp16-npu_eager_vs_compiled.arrow"))
                .splitlines() if line.strip().startswith("verdict:")]
    # eager:cold, eager:warm, compiled:cold (one graph compiled, nothing else), compiled:warm
    assert [v.split(" --")[0] for v in verdicts] == ["verdict: NOT clean", "verdict: NOT clean",
                                                    "verdict: clean (compiles only)", "verdict: clean"]

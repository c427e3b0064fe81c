"""Held-out error of a calibrated target, measured (issue 33, part 3).

1. Record a torch.profiler trace (CPU activities, record_shapes=True) of a tiny random-init Llama forward.
2. Calibrate a CPU target from it (`portscope targets calibrate`, base: the `cuda` target with dispatch_ns = 0,
   written next to the outputs as cpu-host.toml; see docs/performance.md "Calibration" for why).
3. Predict a *different* tiny model (Qwen2, GPT-2) with `explain(target=calibrated)` and compare with its own
   measured profiler trace: total forward time, and per operator category the median time per call.
4. With --cuda-control/--cuda-test: calibrate from a real CUDA trace (base cuda) and compare, per operator, the
   fitted device time with the test trace's measured device time.

    .venv/bin/python bench/calibrate_bench.py [--out /tmp/calibrate] [--threads 1]
        [--cuda-control ../shared/fixtures/kineto/cuda_diff_control.json.gz
         --cuda-test ../shared/fixtures/kineto/cuda_diff_test.json.gz]

Nothing is downloaded: the models are random-init from transformers configs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
from pathlib import Path

SEQ = 64


def _models() -> dict:
    import transformers

    return {
        "llama": transformers.LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                                          num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256),
        "qwen2": transformers.Qwen2Config(vocab_size=2048, hidden_size=320, intermediate_size=768, num_hidden_layers=3,
                                          num_attention_heads=10, num_key_value_heads=2, max_position_embeddings=256),
        "gpt2": transformers.GPT2Config(vocab_size=1024, n_embd=256, n_layer=4, n_head=8, n_positions=256),
    }


def _build(name: str):  # noqa: ANN202
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(_models()[name], attn_implementation="sdpa").eval()
    ids = torch.randint(0, model.config.vocab_size, (1, SEQ), generator=torch.Generator().manual_seed(1))
    return model, ids


def record(name: str, out: Path, repeats: int = 3) -> tuple[Path, list[float], float]:
    """A profiler trace of `repeats` forwards; (path, profiled forward times in ns, unprofiled median ns)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    model, ids = _build(name)
    with torch.no_grad():
        for _ in range(3):
            model(ids)
        plain = []
        for _ in range(5):
            t = time.perf_counter_ns()
            model(ids)
            plain.append(time.perf_counter_ns() - t)
        times = []
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(repeats):
                t = time.perf_counter_ns()
                model(ids)
                times.append(time.perf_counter_ns() - t)
    path = out / f"{name}_cpu.json"
    prof.export_chrome_trace(str(path))
    return path, times, statistics.median(plain)


def predict(name: str, target: Path) -> tuple[float, dict[str, list[float]], dict]:
    """(predicted forward ns, category -> predicted per-call engine ns, the run's cost sources) of one forward."""
    import torch

    from portscope.ingest.op_categories import operator_category
    from portscope.ingest.schedule_summary import cost_sources_text, schedule_summaries
    from portscope.profiler.region import default_run_info, explain
    from portscope.profiler.tables import build_trace

    model, ids = _build(name)
    with torch.no_grad():
        model(ids)
        with explain(f"{name} forward", target=str(target)) as region:
            model(ids)
    trace = build_trace([region], default_run_info([region]))
    summary = max(schedule_summaries(trace), key=lambda s: s.total)
    slices = trace["engine_slices"].to_pandas()
    compute = slices[(slices["kind"] == "compute") & (slices["engine_kind"].isin(["matrix", "vector"]))]
    per: dict[str, list[float]] = {}
    for op, dur in zip(compute["name"], compute["dur"], strict=True):
        per.setdefault(operator_category(str(op)).value, []).append(float(dur))
    extra = {"cost_sources": cost_sources_text(trace.run_info.extra), "assumed_on_critical_path": summary.assumed}
    return float(summary.total), per, extra


def measured_by_category(path: Path, repeats: int) -> dict[str, list[float]]:
    """category -> measured per-call time of the outermost non-view operators (the calibration's samples)."""
    from portscope.ingest.convert import load_any
    from portscope.ingest.op_categories import operator_category
    from portscope.profiler.calibrate import samples_from_trace

    per: dict[str, list[float]] = {}
    for s in samples_from_trace(load_any(path)).ops:
        per.setdefault(operator_category(s.name).value, []).append(s.dur_ns)
    return per


def compare(pred: dict[str, list[float]], meas: dict[str, list[float]], repeats: int) -> dict[str, dict]:
    rows = {}
    for cat in sorted(set(pred) | set(meas)):
        p, m = pred.get(cat, []), meas.get(cat, [])
        row = {"predicted_calls": len(p), "measured_calls": len(m) / repeats,
               "predicted_median_us": statistics.median(p) / 1000 if p else None,
               "measured_median_us": statistics.median(m) / 1000 if m else None,
               "predicted_total_us": sum(p) / 1000, "measured_total_us": sum(m) / repeats / 1000}
        if p and m:
            row["median_error"] = abs(statistics.median(p) - statistics.median(m)) / statistics.median(m)
        rows[cat] = row
    return rows


def cpu_base(out: Path) -> Path:
    """The `cuda` target with dispatch_ns = 0 (the CPU runs each operator itself: the issue cost is inside each
    operator's measured time, which the engine latency absorbs) and free copies (nothing crosses)."""
    from importlib import resources

    from portscope.profiler.calibrate import render_toml

    raw = tomllib.loads((resources.files("portscope.profiler.targets") / "cuda.toml").read_text(encoding="utf-8"))
    raw["target"].update(name="cpu-host", description="the CPU as the device: cuda's rules, no separate dispatch")
    raw["cost"]["dispatch_ns"] = 0
    for direction in ("dma_h2d", "dma_d2h"):  # the CPU is the device: nothing crosses, no copy costs anything
        raw["engines"][direction].update(bytes_per_ns=0, latency_ns=0)
    path = out / "cpu-host.toml"
    path.write_text(render_toml(raw, "bench/calibrate_bench.py: cuda.toml with dispatch_ns = 0 and free copies"))
    return path


def cuda_check(control: Path, test: Path, out: Path) -> dict:
    """Calibrate from the control trace (base cuda); per operator category, the fitted device time of the test
    trace's operator calls against their measured device time (median per call, and totals)."""
    from portscope.ingest.op_categories import operator_category
    from portscope.profiler.calibrate import engine_names, engine_of, load_samples, write_calibrated

    t = time.perf_counter()
    target_path = out / "cuda-calibrated.toml"
    _, cal = write_calibrated([control], "cuda", target_path)
    fit_s = time.perf_counter() - t
    doc = tomllib.loads(target_path.read_text())
    patterned, default, matrix, _ = engine_names(doc)
    result: dict = {"calibration": cal.summary(), "fit_seconds": fit_s}
    for label, path in (("test (held out)", test), ("control (in sample)", control)):
        (_, samples), = load_samples([path])
        pred: dict[str, list[float]] = {}
        meas: dict[str, list[float]] = {}
        for s in samples.ops:
            # eager ATen operators only: the test run's compiled graphs (CompiledFunction, triton kernels) and
            # vendor ops are not what an eager per-operator model predicts; collectives wait on peers
            cat = operator_category(s.name).value
            engine = engine_of(s.name, patterned, default, matrix)
            fit = cal.fits.get(engine) if engine else None
            if fit is None or not s.name.startswith("aten::") or cat == "communication":
                continue
            pred.setdefault(cat, []).append(fit.predict(s.flops, s.nbytes))
            meas.setdefault(cat, []).append(s.dur_ns)
        total_p = sum(sum(v) for v in pred.values())
        total_m = sum(sum(v) for v in meas.values())
        errors = [r["median_error"] for r in compare(pred, meas, 1).values() if "median_error" in r]
        result[label] = {"by_category": compare(pred, meas, 1), "aten_device_predicted_ms": total_p / 1e6,
                         "aten_device_measured_ms": total_m / 1e6,
                         "aten_device_error": (total_p - total_m) / total_m if total_m else None,
                         "median_of_category_errors": statistics.median(errors) if errors else None,
                         "trace_device_ms": sum(x.dur_ns for x in samples.ops) / 1e6}
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/calibrate_bench")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: stable on a shared 2-core machine)")
    ap.add_argument("--repeats", type=int, default=10, help="profiled forwards per model")
    ap.add_argument("--held-out", default="qwen2,gpt2")
    ap.add_argument("--cuda-control")
    ap.add_argument("--cuda-test")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    import torch

    torch.set_num_threads(args.threads)
    from portscope.profiler.calibrate import write_calibrated

    train, train_times, train_plain = record("llama", out, args.repeats)
    target_path = out / "cpu-calibrated.toml"
    t = time.perf_counter()
    _, cal = write_calibrated([train], cpu_base(out), target_path)
    result["calibration"] = {"trace": str(train), "seconds": time.perf_counter() - t, "summary": cal.summary(),
                             "llama_profiled_forward_ms": statistics.median(train_times) / 1e6,
                             "llama_plain_forward_ms": train_plain / 1e6}
    print(cal.summary(), file=sys.stderr)
    for name in [n for n in args.held_out.split(",") if n]:
        path, times, plain = record(name, out, args.repeats)
        predicted, per_pred, extra = predict(name, target_path)
        measured = statistics.median(times)
        result[name] = {
            "measured_profiled_forward_ms": measured / 1e6, "measured_plain_forward_ms": plain / 1e6,
            "predicted_forward_ms": predicted / 1e6, "total_error_vs_profiled": (predicted - measured) / measured,
            "total_error_vs_plain": (predicted - plain) / plain, **extra,
            "by_category": compare(per_pred, measured_by_category(path, args.repeats), args.repeats),
        }
        errors = [r["median_error"] for r in result[name]["by_category"].values() if "median_error" in r]
        result[name]["median_of_category_errors"] = statistics.median(errors) if errors else None
    if args.cuda_control and args.cuda_test:
        result["cuda"] = cuda_check(Path(args.cuda_control), Path(args.cuda_test), out)
    text = json.dumps(result, indent=1, default=str)
    (out / "result.json").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

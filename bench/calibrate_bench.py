"""Held-out error of a calibrated target, measured (issue 33, part 3).

1. Record a torch.profiler trace (CPU activities, record_shapes=True) of a tiny random-init Llama forward.
2. Calibrate a CPU target from it (`portscope targets calibrate`, base: the `cuda` target with dispatch_ns = 0,
   written next to the outputs as cpu-host.toml; see docs/performance.md "Calibration" for why).
3. Predict a *different* tiny model (Qwen2, GPT-2) with `explain(target=calibrated)` and compare with its own
   measured profiler trace: total forward time; and, call by call, each measured operator call of the held-out
   trace against the calibrated target's time for its FLOPs and bytes: the median absolute error per operator
   kind (`op_categories`).
4. With --cuda-control/--cuda-test: calibrate from a real CUDA trace (base cuda) and compare, per operator call,
   the calibrated target's device time with the test trace's measured device time, the same way.

Every comparison is made twice: with one fit per engine (`per_kind=False`) and with per-operator-kind figures
where a kind's own fit is better in sample (`per_kind=True`, what `portscope targets calibrate` writes).

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


def predict(name: str, target: Path) -> tuple[float, dict]:
    """(predicted forward ns, the run's cost sources and the assumed figures on its critical path) of one forward."""
    import torch

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
    return float(summary.total), {"cost_sources": cost_sources_text(trace.run_info.extra),
                                  "assumed_on_critical_path": summary.assumed}


def call_time(target, name: str, flops: float, nbytes: float) -> float | None:  # noqa: ANN001
    """The target's time for one operator call, as a schedule times it on its engine (the kind's figures where the
    engine has them); None for an operator no compute engine runs."""
    from portscope.ingest.op_categories import operator_category
    from portscope.profiler.calibrate import engine_names, engine_of

    doc = {"engines": {e.name: {"kind": e.kind.value, "ops": list(e.ops)} for e in target.engines}}
    patterned, default, matrix, _ = engine_names(doc)
    engine = next((e for e in target.engines if e.name == engine_of(name, patterned, default, matrix)), None)
    if engine is None:
        return None
    f = engine.figures(operator_category(name).value)
    return f.latency_ns + max(flops / f.flops_per_ns if f.flops_per_ns else 0.0,
                              nbytes / f.bytes_per_ns if f.bytes_per_ns else 0.0)


def call_errors(target_path: Path, samples, aten_only: bool = False) -> dict:  # noqa: ANN001
    """Each measured call against the target's time for it (`call_time`): per operator kind the calls, the median
    measured and predicted time per call, the median absolute error (µs, and relative to each call's time), and
    the totals; collectives and operators no engine runs are left out."""
    from portscope.ingest.op_categories import operator_category
    from portscope.profiler.targets import load_target

    target = load_target(target_path)
    pairs: dict[str, list[tuple[float, float]]] = {}
    for s in samples.ops:
        kind = operator_category(s.name).value
        if kind == "communication" or (aten_only and not s.name.startswith("aten::")):
            continue
        p = call_time(target, s.name, s.flops, s.nbytes)
        if p is not None and s.dur_ns > 0:
            pairs.setdefault(kind, []).append((p, s.dur_ns))
    kinds = {}
    for kind, got in sorted(pairs.items()):
        kinds[kind] = {"calls": len(got), "measured_median_us": statistics.median(m for _, m in got) / 1e3,
                       "predicted_median_us": statistics.median(p for p, _ in got) / 1e3,
                       "median_abs_error_us": statistics.median(abs(p - m) for p, m in got) / 1e3,
                       "median_abs_error": statistics.median(abs(p - m) / m for p, m in got),
                       "predicted_total_ms": sum(p for p, _ in got) / 1e6, "measured_total_ms": sum(m for _, m in got) / 1e6}
    total_p = sum(k["predicted_total_ms"] for k in kinds.values())
    total_m = sum(k["measured_total_ms"] for k in kinds.values())
    every = [abs(p - m) / m for got in pairs.values() for p, m in got]
    return {"by_kind": kinds, "predicted_ms": total_p, "measured_ms": total_m,
            "total_error": (total_p - total_m) / total_m if total_m else None,
            "median_abs_error_all_calls": statistics.median(every) if every else None,
            "median_of_kind_errors": statistics.median(k["median_abs_error"] for k in kinds.values()) if kinds else None}


def cpu_base(out: Path) -> Path:
    """The `cuda` target with dispatch_ns = 0 (the CPU runs each operator itself: the issue cost is inside each
    operator's measured time, which the engine latency absorbs) and free copies (nothing crosses)."""
    from importlib import resources

    from portscope.profiler.calibrate import render_toml

    raw = tomllib.loads((resources.files("portscope.profiler.targets") / "cuda.toml").read_text(encoding="utf-8"))
    raw["target"].update(name="cpu-host", description="the CPU as the device: cuda's rules, no separate dispatch")
    raw["cost"]["dispatch_ns"] = 0
    raw["cost"]["sync_ns"] = 0  # nothing to wait for: the host is the device
    for direction in ("dma_h2d", "dma_d2h"):  # the CPU is the device: nothing crosses, no copy costs anything
        raw["engines"][direction].update(bytes_per_ns=0, latency_ns=0)
    path = out / "cpu-host.toml"
    path.write_text(render_toml(raw, "bench/calibrate_bench.py: cuda.toml with dispatch_ns = 0 and free copies"))
    return path


def cuda_check(control: Path, test: Path, out: Path) -> dict:
    """Calibrate from the control trace (base cuda), one fit per engine and per kind; each eager ATen operator
    call of the test trace (and of the control, in sample) against the calibrated target's time for it."""
    from portscope.profiler.calibrate import load_samples, write_calibrated

    result: dict = {}
    (_, test_samples), (_, control_samples) = load_samples([test, control])
    for variant, per_kind in VARIANTS:
        t = time.perf_counter()
        target_path = out / f"cuda-calibrated-{variant}.toml"
        _, cal = write_calibrated([control], "cuda", target_path, per_kind=per_kind)
        # eager ATen operators only: the test run's compiled graphs (CompiledFunction, triton kernels) and
        # vendor ops are not what an eager per-operator model predicts; collectives wait on peers
        result[variant] = {"fit_seconds": time.perf_counter() - t, "calibration": cal.summary(),
                           "test (held out)": call_errors(target_path, test_samples, aten_only=True),
                           "control (in sample)": call_errors(target_path, control_samples, aten_only=True)}
    return result


VARIANTS = (("one-fit-per-engine", False), ("per-kind", True))


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
    from portscope.ingest.convert import load_any
    from portscope.profiler.calibrate import samples_from_trace, write_calibrated

    train, train_times, train_plain = record("llama", out, args.repeats)
    base = cpu_base(out)
    targets = {}
    for variant, per_kind in VARIANTS:
        targets[variant] = out / f"cpu-calibrated-{variant}.toml"
        t = time.perf_counter()
        _, cal = write_calibrated([train], base, targets[variant], per_kind=per_kind)
        result.setdefault("calibration", {})[variant] = {"seconds": time.perf_counter() - t, "summary": cal.summary()}
        print(cal.summary(), file=sys.stderr)
    result["calibration"].update(trace=str(train), llama_profiled_forward_ms=statistics.median(train_times) / 1e6,
                                 llama_plain_forward_ms=train_plain / 1e6)
    for name in [n for n in args.held_out.split(",") if n]:
        path, times, plain = record(name, out, args.repeats)
        measured = statistics.median(times)
        samples = samples_from_trace(load_any(path))
        result[name] = {"measured_profiled_forward_ms": measured / 1e6, "measured_plain_forward_ms": plain / 1e6}
        for variant, target_path in targets.items():
            predicted, extra = predict(name, target_path)
            result[name][variant] = {
                "predicted_forward_ms": predicted / 1e6, "total_error_vs_profiled": (predicted - measured) / measured,
                "total_error_vs_plain": (predicted - plain) / plain, **extra,
                "calls": call_errors(target_path, samples),
            }
        _save(out, result)
    if args.cuda_control and args.cuda_test:
        result["cuda"] = cuda_check(Path(args.cuda_control), Path(args.cuda_test), out)
    print(_save(out, result))
    return 0


def _save(out: Path, result: dict) -> str:
    """Write what is measured so far (a later part failing keeps the earlier ones)."""
    text = json.dumps(result, indent=1, default=str)
    (out / "result.json").write_text(text)
    return text


if __name__ == "__main__":
    raise SystemExit(main())

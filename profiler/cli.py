"""The profiler's sub-commands: record, demo, compare-modes, validate (these need torch) and targets (no torch)."""

from __future__ import annotations

import argparse
import sys
import traceback

from portscope.ingest.output_paths import OutputFile, OutputFolder, check_output_file


def register(sub: argparse._SubParsersAction) -> None:
    """Add `record`, `demo`, `compare-modes`, `validate` and `targets` (the parser itself imports no torch)."""
    r = sub.add_parser(
        "record", description="portscope record [--target NAME|PATH] [-o run.arrow] -- python script.py ARGS...",
    )
    r.add_argument("--target", help="predict for a target (built-in name or TOML path) instead of measuring")
    r.add_argument("-o", "--output", default="run.arrow", type=OutputFile, help="trace file to write (default run.arrow)")
    r.add_argument("--no-stack", action="store_true", help="do not record call sites and stacks (faster)")
    r.add_argument("--library", action="append", metavar="PKG[,PKG]",
                   help="packages whose lines are never call sites, besides torch and portscope (repeatable): e.g. "
                        "--library transformers for the lines of your script (default: $PORTSCOPE_LIBRARY)")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- python script.py ARGS...")
    r.set_defaults(func=_record, needs_torch=True)

    d = sub.add_parser("demo")
    d.add_argument("-o", "--output", default="sample_traces", type=OutputFolder, help="folder to write into")
    d.add_argument("--only", action="append", help="only this file (repeatable)")
    d.set_defaults(func=_demo, needs_torch=True)

    c = sub.add_parser("compare-modes")
    _model_args(c)
    c.add_argument("--pad-to", type=int, default=64, help="pad the prompt to this length for the compiled run")
    c.add_argument("--backend", default="inductor", help="torch.compile backend (default inductor)")
    c.add_argument("-o", "--output", default="modes.arrow", type=OutputFile)
    c.set_defaults(func=_compare_modes, needs_torch=True)

    v = sub.add_parser("validate")
    _model_args(v)
    v.add_argument("--steps", type=int, default=8, help="greedy decoding steps")
    v.add_argument("--compiled", action="store_true", help="also validate the compiled model")
    v.add_argument("-o", "--output", default="validate.arrow", type=OutputFile)
    v.set_defaults(func=_validate, needs_torch=True)

    p = sub.add_parser("plan")
    p.add_argument("--model", required=True, help="a transformers config.json, or a model folder holding one")
    p.add_argument("--target", default="static-llm-npu", help="a target with a [static_shapes] section (default static-llm-npu)")
    p.add_argument("--seq", type=_int_list, default=[], help="compiled sequence lengths, e.g. 1024,2048,4096 (default: the target's)")
    p.add_argument("--batch", type=_int_list, default=[], help="batch sizes, e.g. 1,2,4 (default: the target's)")
    p.add_argument("--cache-length", type=int, help="a fixed KV-cache length (default: each sequence length)")
    p.add_argument("--prompt-lengths", metavar="FILE", help="prompt lengths in tokens (one or more per line) for padding waste")
    p.add_argument("--new-tokens", type=int, default=0, help="tokens generated per prompt (prompts whose generation runs past the cache are counted)")
    p.add_argument("-o", "--output", default="plan.arrow", type=OutputFile, help="trace file to write (default plan.arrow)")
    p.set_defaults(func=_plan, needs_torch=True)

    t = sub.add_parser("targets", description="portscope targets [FILE.toml] | portscope targets calibrate TRACE... "
                                               "[--base NAME|PATH] -o mydevice.toml")
    t.add_argument("path", nargs="*", help="a target TOML file to validate; or `calibrate TRACE...`: fit the base "
                                           "target's cost figures from measured traces of the device")
    t.add_argument("--base", default="fp16-npu", help="calibrate: the target whose rules and unmeasured figures the "
                                                      "new file keeps (built-in name or TOML path; default fp16-npu)")
    t.add_argument("-o", "--output", type=OutputFile, help="calibrate: the target file to write (default calibrated.toml)")
    t.add_argument("--name", help="calibrate: the new target's name (default: the output file's stem)")
    t.add_argument("--engines-only", action="store_true", help="calibrate: fit each engine's figures only, not also "
                   "each operator kind's ([engines.NAME.kinds.KIND], written where they time the kind better)")
    t.set_defaults(func=_targets)


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="tiny-llama",
                   help="tiny-llama, a transformers config.json or local model directory, or module:function")
    p.add_argument("--dtype", default="float16", help="the port's dtype (float16, bfloat16, float32)")
    p.add_argument("--prompt-len", type=int, default=7)
    p.add_argument("--target", help="predict for a target instead of measuring")


def _prompt(args: argparse.Namespace, model_builder) -> object:  # noqa: ANN001
    import torch

    vocab = getattr(getattr(model_builder(), "config", None), "vocab_size", 256)
    return torch.randint(3, vocab, (1, args.prompt_len), generator=torch.Generator().manual_seed(args.prompt_len))


def _compare_modes(args: argparse.Namespace) -> int:
    from .compare import compare_modes
    from .models import dtype_of, model_factory

    build = model_factory(args.model, dtype_of(args.dtype))
    ids = _prompt(args, build)
    path = compare_modes(build, lambda: {"input_ids": ids}, args.output, target=args.target, pad_to=args.pad_to,
                         backend=args.backend)
    print(path)
    return 0


def _validate(args: argparse.Namespace) -> int:
    import torch

    from portscope.ingest.numerics import numerics_table
    from portscope.ingest.trace import write_trace

    from .compare import validate
    from .models import dtype_of, model_factory
    from .region import default_run_info, explain
    from .tables import build_trace

    dtype = dtype_of(args.dtype)
    build = model_factory(args.model, dtype)
    ids = _prompt(args, build)
    comparisons = [validate(build, ids, dtype=dtype, steps=args.steps)]
    if args.compiled:
        comparisons.append(validate(build, ids, dtype=dtype, steps=args.steps, compiled=True))
    model = build().eval().to(dtype)
    with torch.no_grad(), explain("port forward", target=args.target, with_stack=True) as region:
        model(input_ids=ids)
    trace = build_trace([region], default_run_info([region]))
    trace.tables["numerics"] = numerics_table(comparisons)
    write_trace(trace, args.output)
    for c in comparisons:
        print(f"{c.name}: greedy tokens {'match' if c.greedy_match else 'DIFFER'}, first-step argmax "
              f"{'match' if c.argmax_match else 'DIFFERS'}, max |logit diff| {c.max_abs_diff:.4g}, "
              f"reference top-2 gap {c.top2_gap:.4g} -> {c.verdict.value}")
    print(args.output)
    return 1 if any(c.verdict.value == "defect" for c in comparisons) else 0


def _record(args: argparse.Namespace) -> int:
    from .record import record

    library = [name.strip() for arg in args.library or [] for name in arg.split(",") if name.strip()]
    path, failure = record(args.command, args.output, target=args.target, with_stack=not args.no_stack,
                           library=library or None)
    print(f"portscope record: wrote {path}", file=sys.stderr)
    if failure is not None:
        if isinstance(failure, SystemExit):
            return int(failure.code) if isinstance(failure.code, int) else 1
        traceback.print_exception(failure)
        return 130 if isinstance(failure, KeyboardInterrupt) else 1
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import make_samples

    for path in make_samples(args.output, only=args.only, progress=lambda f: print(f"  making {f} ...", file=sys.stderr)):
        print(path)
    return 0


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected whole numbers separated by commas") from None


def _plan(args: argparse.Namespace) -> int:
    import torch

    from portscope.ingest.plan_report import format_plan
    from portscope.ingest.trace import write_trace

    from .plan import load_config, model_shape, plan, plan_trace, read_prompt_lengths
    from .targets import load_target

    target = load_target(args.target)
    prompts = read_prompt_lengths(args.prompt_lengths) if args.prompt_lengths else []
    shape = model_shape(load_config(args.model))
    rows = plan(shape, target, sequences=args.seq, batches=args.batch, cache_length=args.cache_length,
                prompt_lengths=prompts, new_tokens=args.new_tokens)
    sweep = {"model_config": str(args.model), "prompt_lengths": args.prompt_lengths, "new_tokens": args.new_tokens}
    trace = plan_trace(rows, shape, target, command=" ".join(sys.argv), sweep=sweep, torch_version=torch.__version__)
    print(format_plan(trace["plan"], trace.run_info))
    print(write_trace(trace, args.output))
    return 0


def _targets(args: argparse.Namespace) -> int:
    from .targets import builtin_targets, load_target

    if args.path and args.path[0] == "calibrate":
        return _calibrate(args)
    if len(args.path) > 1:
        print("portscope targets: validate one target file at a time (or: targets calibrate TRACE...)", file=sys.stderr)
        return 2
    if args.path:
        t = load_target(args.path[0])
        print(f"{t.path}: ok ({t.name}: {t.description})")
        return 0
    for name in builtin_targets():
        t = load_target(name)
        print(f"{name:12s} {t.description}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from .calibrate import CalibrationError, write_calibrated

    traces = args.path[1:]
    if not traces:
        print("portscope targets calibrate: name at least one measured trace (TRACE...)", file=sys.stderr)
        return 2
    output = args.output or str(check_output_file("calibrated.toml"))  # the default: not checked by the parser
    try:
        target, cal = write_calibrated(traces, args.base, output, name=args.name, per_kind=not args.engines_only)
    except CalibrationError as exc:
        print(f"portscope targets calibrate: {exc}", file=sys.stderr)
        return 1
    print(cal.summary())
    print(f"{output}: ok ({target.name})")
    return 0

"""Coverage-guided fuzzing (atheris / libFuzzer) of every reader, one reader per process.

    .venv/bin/python bench/fuzz_long.py --reader portscope --seconds 600
    .venv/bin/python bench/fuzz_long.py --all --seconds 60      # each reader in turn

Readers: portscope, kineto, fallback-log, torch-trace, detect (format detection + conversion),
target. The corpus starts from the seeds in tests/hardening/fuzz_targets.py (real small inputs)
and grows in a scratch folder. Readers that convert sliced (Kineto, generic Chrome, trace view, kernel_details,
detection) convert each input sliced too, with tiny knobs, written and read back (tests/hardening/_sliced.py):
a sliced conversion that differs from the whole one is a crash as well. An input that makes a reader raise anything but its own error
(TraceFormatError / TargetError), or run past the time bound, is a crash: libFuzzer writes it to
tests/fuzz_regressions/<reader>/crash-<sha1> (timeout-<sha1> past the bound; commit it: tests/hardening/test_fuzz_regressions.py
replays every file there). Exit status: 0 when no reader crashed.
"""

from __future__ import annotations

import argparse
import faulthandler
import math
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def fuzz_one(reader: str, seconds: float, bound_s: float, runs: int | None = None, random_seed: int | None = None) -> None:
    """Run libFuzzer on one reader in this process (atheris can fuzz once per process). With `runs` and `random_seed`,
    libFuzzer tries that many inputs from that random seed: the same inputs each time the code is the same."""
    # a run that stalls can be asked where it is: SIGQUIT prints every thread's Python stack to stderr (libFuzzer
    # keeps SIGUSR1 and SIGUSR2 for itself)
    faulthandler.register(signal.SIGQUIT, all_threads=True)
    import atheris

    import portscope.ingest.convert  # noqa: F401
    import portscope.ingest.readers.fallback_log  # noqa: F401
    import portscope.ingest.readers.kineto  # noqa: F401
    import portscope.ingest.readers.torch_trace  # noqa: F401
    import portscope.ingest.trace  # noqa: F401
    from tests.hardening.fuzz_targets import REGRESSIONS, feed, seed

    if reader == "target":
        import portscope.profiler.targets  # noqa: F401
    # portscope is installed editable (a custom finder atheris's import hook does not see):
    # instrument our modules' code objects after import instead.
    for name, module in list(sys.modules.items()):
        if name.startswith("portscope.") and module is not None:
            for value in list(vars(module).values()):
                if getattr(value, "__module__", "") != name:
                    continue
                functions = [v for v in vars(value).values() if callable(v)] if isinstance(value, type) else [value]
                for function in functions:
                    try:
                        atheris.instrument_func(function)
                    except Exception:  # noqa: BLE001 - builtins, C functions and descriptors cannot be instrumented
                        pass

    corpus = Path(tempfile.mkdtemp(prefix=f"portscope-corpus-{reader}-"))
    (corpus / "seed").write_bytes(seed(reader))
    crashes = REGRESSIONS / reader
    crashes.mkdir(parents=True, exist_ok=True)

    def one_input(data: bytes) -> None:
        # libFuzzer's -timeout bounds each input (its alarm stops C code too); a Python alarm of our own would
        # replace libFuzzer's SIGALRM timer and catch only hangs in Python code
        feed(reader, data, bound_s=None)

    libfuzzer_args = [
        sys.argv[0],
        str(corpus),
        f"-max_total_time={int(seconds)}",
        f"-artifact_prefix={crashes}/",
        f"-timeout={math.ceil(bound_s)}",
        "-rss_limit_mb=4096",
        "-max_len=262144",
        "-print_final_stats=1",
        *([f"-runs={runs}"] if runs is not None else []),
        *([f"-seed={random_seed}"] if random_seed is not None else []),
    ]
    atheris.Setup(libfuzzer_args, one_input)
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    from tests.hardening.fuzz_targets import READERS, TIME_BOUND_S

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reader", choices=sorted(READERS))
    p.add_argument("--all", action="store_true", help="fuzz every reader in turn (one process each)")
    p.add_argument("--seconds", type=float, default=600.0, help="time per reader")
    p.add_argument("--bound", type=float, default=TIME_BOUND_S, help="per-input time bound (s)")
    p.add_argument("--runs", type=int, help="stop after this many inputs (with --seconds as a cap)")
    p.add_argument("--seed", type=int, help="libFuzzer's random seed (with --runs: a repeatable run, as CI's)")
    args = p.parse_args(argv)
    if args.all:
        failed = []
        for reader in sorted(READERS):
            more = [*(["--runs", str(args.runs)] if args.runs is not None else []), *(["--seed", str(args.seed)] if args.seed is not None else [])]
            rc = subprocess.call([sys.executable, __file__, "--reader", reader, "--seconds", str(args.seconds), "--bound", str(args.bound), *more])
            print(f"{reader}: {'ok' if rc == 0 else f'CRASHED (exit {rc})'}", flush=True)
            if rc:
                failed.append(reader)
        return 1 if failed else 0
    if not args.reader:
        p.error("give --reader NAME or --all")
    fuzz_one(args.reader, args.seconds, args.bound, args.runs, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One function per reader that feeds it bytes: shared by the hypothesis tests and bench/fuzz_long.py (atheris).

Each target writes the bytes to a file (readers take paths, as users give them), reads it
within a time bound, and lets through only the reader's own error type: anything else
(or running past the bound) propagates and fails the caller.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import importlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from portscope.ingest.errors import TargetError, TraceFormatError
from portscope.ingest.readers.source import SizeCaps

from ._sliced import check_sliced

REPO = Path(__file__).resolve().parents[2]
REGRESSIONS = REPO / "tests" / "fuzz_regressions"
TIME_BOUND_S = 10.0  # generous: CI machines are shared; a real hang runs far past it
# Small caps keep every parse bounded in memory too: 16 MiB decompressed at most.
FUZZ_CAPS = SizeCaps(max_input_bytes=4 << 20, max_decompressed_bytes=16 << 20, max_gzip_ratio=200)


class Hang(Exception):
    """A reader ran past TIME_BOUND_S on one input."""


@contextlib.contextmanager
def time_bound(seconds: float = TIME_BOUND_S) -> Iterator[None]:
    """Raise Hang in the main thread when the block runs longer than `seconds` (SIGALRM)."""

    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"one input took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _read_portscope(path: Path) -> object:
    from portscope.ingest.trace import read_trace

    return read_trace(path)


def _read_kineto(path: Path, sliced: bool = False) -> object:
    from portscope.ingest.readers.kineto import read_kineto

    return read_kineto(path, caps=FUZZ_CAPS, sliced=sliced)


def _read_fallback(path: Path) -> object:
    from portscope.ingest.readers.fallback_log import read_fallback_log

    return read_fallback_log(path, caps=FUZZ_CAPS)


def _read_torch_trace(path: Path) -> object:
    from portscope.ingest.readers.torch_trace import read_torch_trace

    return read_torch_trace(path, caps=FUZZ_CAPS)


def _read_detected(path: Path, sliced: bool = False) -> object:
    from portscope.ingest.convert import load_any

    return load_any(path, caps=FUZZ_CAPS, **({"sliced": True} if sliced else {}))


def _read_as(fmt: str, sliced: bool = False) -> Callable[[Path], object]:
    """A reader of one detected format (issue 16's readers), through load_any with the fuzz caps."""

    def read(path: Path) -> object:
        from portscope.ingest.convert import load_any

        return load_any(path, format=fmt, caps=FUZZ_CAPS, **({"sliced": True} if sliced else {}))

    return read


def _read_target(path: Path) -> object:
    from portscope.profiler.targets import load_target

    return load_target(path)


SLICED_FORMATS = ("ascend-trace", "ascend-kernels")  # of issue 16's readers, those that convert sliced


@dataclasses.dataclass(frozen=True)
class Reader:
    """A reader under test: the suffix its input file gets, how to read it, the error it may raise."""

    name: str
    suffix: str
    read: Callable[[Path], object]
    error: type[Exception]
    module: str  # imported before the time bound starts (importing torch alone can take seconds)
    sliced: Callable[[Path], object] | None = None  # the same read sliced (as `portscope convert` does), if it slices


READERS: dict[str, Reader] = {
    r.name: r
    for r in (
        Reader("portscope", ".arrow", _read_portscope, TraceFormatError, "portscope.ingest.trace"),
        Reader("kineto", ".json", _read_kineto, TraceFormatError, "portscope.ingest.readers.kineto",
               lambda p: _read_kineto(p, sliced=True)),
        Reader("fallback-log", ".log", _read_fallback, TraceFormatError, "portscope.ingest.readers.fallback_log"),
        Reader("torch-trace", ".log", _read_torch_trace, TraceFormatError, "portscope.ingest.readers.torch_trace"),
        Reader("detect", ".bin", _read_detected, TraceFormatError, "portscope.ingest.convert",
               lambda p: _read_detected(p, sliced=True)),
        Reader("target", ".toml", _read_target, TargetError, "portscope.profiler.targets"),
        *(Reader(fmt, suffix, _read_as(fmt), TraceFormatError, "portscope.ingest.convert",
                 _read_as(fmt, sliced=True) if fmt in SLICED_FORMATS else None) for fmt, suffix in (
            ("ascend-trace", ".json"), ("ascend-kernels", ".csv"), ("ascend-op-statistic", ".csv"),
            ("ascend-memory-record", ".csv"), ("ascend-operator-memory", ".csv"),
            ("mobilint-trace", ".json"), ("furiosa-trace", ".json"), ("chrome", ".json"), ("rbln-explain", ".json"),
            ("furiosa-schedule", ".json"))),
        # the Kineto reader on a trace with NPU device rows (its npu_kineto hooks run)
        Reader("npu-kineto", ".json", _read_as("kineto"), TraceFormatError, "portscope.ingest.convert",
               _read_as("kineto", sliced=True)),
    )
}
# seeds of issue 16's readers: the hand-written fixtures (tests/vendor/fixtures/README.md says what each follows)
VENDOR_SEEDS = {"ascend-trace": "ascend_trace_view.json", "ascend-op-statistic": "ascend_op_statistic.csv",
                "mobilint-trace": "mobilint_core_trace.json", "furiosa-trace": "furiosa_rngd_trace.json",
                "chrome": "chrome_generic.json", "rbln-explain": "rbln_explain_runtime.json",
                "furiosa-schedule": "furiosa_schedule.json", "npu-kineto": "npu_kineto_eager.json"}  # fmt: skip

_SCRATCH = Path(tempfile.mkdtemp(prefix="portscope-fuzz-"))


def feed(reader: str, data: bytes, *, bound_s: float | None = TIME_BOUND_S) -> str:
    """Read `data` with one reader: "ok" when it loads, "error" when it raises the reader's own error. A reader
    that converts sliced converts it sliced too, with tiny knobs, and the two must agree (`_sliced.check_sliced`).
    `bound_s` None: no alarm of ours (libFuzzer's own -timeout bounds each input, C code included)."""
    r = READERS[reader]
    importlib.import_module(r.module)
    path = _SCRATCH / f"input-{os.getpid()}{r.suffix}"
    path.write_bytes(data)

    def bounded() -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if bound_s is None else time_bound(bound_s)

    try:
        try:
            with bounded():
                whole = r.read(path)
        except r.error:
            whole = None
        if r.sliced is not None:
            with bounded():
                check_sliced(r.sliced, path, whole, _SCRATCH)
    finally:
        path.unlink(missing_ok=True)
    return "ok" if whole is not None else "error"


# ---- seeds: small valid inputs of every format --------------------------------------------------


def seed(reader: str) -> bytes:
    """A small valid input of a reader's format (the starting point of mutations)."""
    if reader in ("portscope", "detect"):
        return (REPO / "sample_traces" / "llama_cpu_measured.arrow").read_bytes()
    if reader == "kineto":
        return KINETO_SEED
    if reader == "fallback-log":
        return FALLBACK_SEED
    if reader == "torch-trace":
        return (REPO / "tests" / "fixtures" / "torch_trace" / "graph_breaks_small.log").read_bytes()[:6000]
    if reader == "target":
        return (REPO / "profiler" / "targets" / "fp16-npu.toml").read_bytes()
    if reader in VENDOR_SEEDS:
        return (REPO / "tests" / "vendor" / "fixtures" / VENDOR_SEEDS[reader]).read_bytes()
    if reader == "ascend-kernels":
        return KERNEL_DETAILS_SEED
    if reader == "ascend-memory-record":
        return MEMORY_RECORD_SEED
    if reader == "ascend-operator-memory":
        return OPERATOR_MEMORY_SEED
    raise KeyError(reader)


def kineto_gz_seed() -> bytes:
    """A real small Kineto export (ROCm), decompressed."""
    return gzip.decompress((REPO / "tests" / "fixtures" / "kineto" / "rocm_mi250_small.json.gz").read_bytes())


KINETO_SEED = b"""{"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 0.0, "dur": 100.0},
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 10.5,
 "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"], "External id": 7}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2.0, "dur": 3.0,
 "args": {"correlation": 11, "External id": 7}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5.0, "dur": 4.0,
 "args": {"correlation": 11, "External id": 7, "device": 0, "stream": 7}},
{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": 20.0,
 "dur": 2.0, "args": {"bytes": 4096, "correlation": 12}},
{"ph": "s", "id": 11, "pid": 1, "tid": 1, "ts": 2.0, "cat": "ac2g", "name": "ac2g"}
]}
"""

# torch_npu kernel_details.csv quirks (as in the real files): a TAB inside the quoted start time, tripled quotes, N/A
KERNEL_DETAILS_SEED = (
    b"Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
    b"Block Dim,Input Shapes,Input Data Types,Output Shapes\n"
    b'19,4294967295,61653,2,aclnnMatmul_MatMulCommon_MatMulV2,MatMulV2,dynamic,AI_CORE,"1736413971558972.912\t",185.504,'
    b'1.087,16,"""81920,4096;8192,512""",DT_BF16;DT_BF16,"""4096,512"""\n'
    b'19,4294967295,N/A,N/A,hcom_broadcast__445_0,hcom_broadcast_,N/A,HCCL,"1736413971560588.764\t",308926.68,N/A,0,'
    b"N/A,N/A,N/A\n"
    b'19,4294967295,7,9,trans_Cast_5,Cast,static,AI_CPU,1736413971560900.5,197.54,0,1,"""1,7""",INT64,"""1,7"""\n'
)

# torch_npu memory_record.csv: components beside the allocator's (PTA), a TAB inside a quoted time, empty totals
MEMORY_RECORD_SEED = (
    b"Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n"
    b"APP,1704161511420300.000,,100.0,,,NPU:0\n"
    b'PTA,"1704161511420306.491\t",1.0,2.0,1.0,187650,NPU:0\n'
    b"PTA,1704161511420310.000,3.5,4.0,3.5,187650,NPU:0\n"
    b"PTA+GE,1704161511420311.000,11.5,12.0,,,NPU:0\n"
)
# msprof operator_memory.csv: a release whose allocation came before the collection (negative size), one still held
OPERATOR_MEMORY_SEED = (
    b"Device_id,Name,Size(KB),Allocation Time(us),Duration(us),Allocation Total Allocated(KB),"
    b"Allocation Total Reserved(KB),Release Total Allocated(KB),Release Total Reserved(KB),Device\n"
    b"0,MatMul,2048,10,5,3072,4096,1024,4096,NPU:0\n0,,-1024,11,,,,2048,4096,NPU:0\n0,Add,1024,12,,3072,4096,,,NPU:0\n"
)

FALLBACK_SEED = b"""[2026-09-14 19:49:00.145][I] `aten::neg` op ran on CPU instead of RBLN
[2026-09-14 19:49:00.146][W] TRACE: /work/model.py:85 in rotate_half
    return torch.cat((-x2, x1), dim=-1)
[2026-09-14 19:49:00.200][I] `sdpa_overrideable (query sequence length 7 not aligned to 32)` op ran on CPU instead of RBLN
[2026-09-14 19:49:01.000][I] `aten::pow.Tensor_Scalar (dtype Half not supported)` op ran on CPU instead of RBLN
some unrelated line
"""

"""Kineto vocabulary: the category names, runtime calls and copy names profiler traces (Kineto JSON, torch_npu
trace views, the predicted timeline) use, and which of them the readers read.

Public names: :data:`KINETO_RUNTIME_CATEGORIES`, :data:`KINETO_DEVICE_CATEGORIES`, :data:`KINETO_MTIA_DEVICE_CATEGORY`,
:data:`KINETO_CATEGORY_ALIASES`, :data:`KINETO_READ_CATEGORIES`, :data:`SYNC_RUNTIME_CALLS`,
:data:`ONLINE_COMPILE_CALLS`, :data:`COMPILER_PHASE_SUFFIX`, :func:`is_compiler_span`, :func:`compiler_event_of`,
:func:`is_compiled_call`, :func:`copy_direction`, :func:`is_host_copy`, :func:`copy_kind`. What the signals mean is the catalogue's (`catalog`).
"""

from __future__ import annotations

import re

from .schema import Direction

# Host-side runtime and driver calls (CUDA/ROCm, Intel XPU, Meta MTIA, PrivateUse1 backends): Kineto's
# ActivityType names (libkineto/include/ActivityType.h).
KINETO_RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "runtime", "driver", "privateuse1_runtime",
                                       "privateuse1_driver", "xpu_runtime", "xpu_driver", "mtia_runtime"})
KINETO_DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
# Meta MTIA's on-device events: kernels, and DMA requests ("dma_request", args "direction" and "size") on the same
# threads; the reader sorts them into device work and copies.
KINETO_MTIA_DEVICE_CATEGORY = "mtia_ccp_events"
# Older Kineto (PyTorch 1.8-1.10 and builds of that code into 2022) named its categories differently: read them as
# today's. "Operator" was the CPU operator until mid-2021; "Runtime", "Kernel", "Memcpy", "Memset" until late 2021.
KINETO_CATEGORY_ALIASES: dict[str, str] = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel",
                                           "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}
# Span categories the Kineto reader reads (operators, annotations, Python frames, runtime calls, device work); the
# others a trace holds (gpu_user_annotation, cuda_sync, mtia_insight...) are counted and named in the run's
# missing signals, never dropped unsaid.
KINETO_READ_CATEGORIES = frozenset({"cpu_op", "user_annotation", "python_function", "Trace", *KINETO_RUNTIME_CATEGORIES,
                                    *KINETO_DEVICE_CATEGORIES, *KINETO_CATEGORY_ALIASES, KINETO_MTIA_DEVICE_CATEGORY})
SYNC_RUNTIME_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "hipDeviceSynchronize",
    "hipStreamSynchronize", "hipEventSynchronize", "aclrtSynchronizeStream", "aclrtSynchronizeDevice",
    "cudaStreamSynchronize_ptsz", "hipStreamSynchronize_spt",  # per-thread default stream builds
    "cuCtxSynchronize", "cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuEventSynchronize",  # the driver's (cuda_driver)
    "aclrtSynchronizeStreamWithTimeout", "aclrtSynchronizeEvent",
    "synchronizeStream",  # Meta MTIA's host call (mtia_runtime); its device-side twin "synchronize" is not the host
})  # fmt: skip  (cudaStreamWaitEvent makes a stream wait, not the host)

# PyTorch's compiler (Dynamo, AOTAutograd, Inductor) records its phases as record_function ranges named
# "<phase> (dynamo_timed)" (a cpu_op in torch 2.6 and later, a user_annotation before), and beside each a short
# user_annotation "<phase>_data: [fn_name=..., ]compile_id=0/0": the compiler's work, not regions a user chose.
# Its compile events (torch/_dynamo/utils.py ChromiumEventLogger.log_event_start: "dynamo" around a frame's whole
# compile, "entire_frame_compile", "backend_compile"...) are ranges named as the event, each with its marker
# "<event>_data: compile_id=..." starting inside it.
COMPILER_PHASE_SUFFIX = " (dynamo_timed)"
_COMPILER_DATA = re.compile(r"(\S+)_data: (?:fn_name=\S+, )?compile_id=\S+$")
# What the program runs of compiled code, as the profiler records each call: Dynamo's compiled frame ("Torch-Compiled
# Region: 0/0", torch 2.3 and later), AOTAutograd's autograd function and its backward, Inductor's compiled graph
# ("## Call CompiledFxGraph <key> ##").
COMPILED_CALL_NAMES = frozenset({"CompiledFunction", "CompiledFunctionBackward"})
COMPILED_CALL_PREFIXES = ("Torch-Compiled Region", "## Call CompiledFxGraph ")


def is_compiler_span(name: str) -> bool:
    """Whether a profiler range is the compiler's: one of its phases or the metadata it records beside one."""
    return name.endswith(COMPILER_PHASE_SUFFIX) or _COMPILER_DATA.match(name) is not None


def compiler_event_of(name: str) -> str | None:
    """The compile event a metadata marker is recorded beside (``dynamo`` for ``dynamo_data: compile_id=0/0``); None:
    not a marker."""
    m = _COMPILER_DATA.match(name)
    return m.group(1) if m else None


def is_compiled_call(name: str) -> bool:
    """Whether a profiler range is a call of compiled code (`COMPILED_CALL_NAMES`, `COMPILED_CALL_PREFIXES`)."""
    return name in COMPILED_CALL_NAMES or name.startswith(COMPILED_CALL_PREFIXES)

# Runtime calls that compile an operator online, on the host, while the step waits (torch_npu's CANN lane).
ONLINE_COMPILE_CALLS = frozenset({"opCompile", "aclopCompileAndExecute"})

# cuda/hipMemcpyKind as numbers and as the enum's names (a runtime call's "kind" argument: roctracer writes the
# number, sometimes as a string; other HIP tracers the name)
_KIND_NAMES = {"hosttohost": 0, "hosttodevice": 1, "devicetohost": 2, "devicetodevice": 3, "default": 4}


def copy_kind(value: object) -> int | None:
    """A runtime copy call's kind argument as cuda/hipMemcpyKind's number (0 host->host .. 4 default): from an int,
    an integral float, a digit string (spaces around it too) or the enum's name (``hipMemcpyDeviceToHost``); None
    for anything else."""
    if type(value) is float and value.is_integer():
        value = int(value)
    elif type(value) is str:
        text = value.strip()
        if text.isdigit():
            value = int(text)
        else:
            low = text.lower()
            for prefix in ("hipmemcpy", "cudamemcpy"):
                low = low.removeprefix(prefix)
            return _KIND_NAMES.get(low)
    return value if type(value) is int and 0 <= value <= 4 else None


_COPY_WORDS: tuple[tuple[tuple[str, ...], Direction], ...] = (
    (("htod", "h2d", "h2v", "host_to_device"), Direction.H2D),
    (("dtoh", "d2h", "v2h", "device_to_host"), Direction.D2H),
    (("dtod", "d2d", "v2v", "ptop"), Direction.D2D),
)
# CUPTI's other copy kinds as Kineto names them ("Memcpy AtoH (Array -> Pageable)"...): an array is device memory.
# Whole words only (inside other words they mean nothing).
_COPY_TOKENS: dict[str, Direction] = {"htoa": Direction.H2D, "atoh": Direction.D2H, "atoa": Direction.D2D,
                                      "atod": Direction.D2D, "dtoa": Direction.D2D, "unknown": Direction.UNKNOWN}
_HOST_COPY_TOKENS = frozenset({"htoh", "h2h"})  # a copy between two host buffers: no device boundary crossed
_WORDS = re.compile(r"[a-z0-9]+")


def copy_direction(name: str) -> Direction | None:
    """Direction of a device copy from its event name (``Memcpy HtoD (Pageable -> Device)``, ``Memcpy AtoH``,
    ``rbln_copy_h2d``, ``v2h``...): UNKNOWN where it says so (``Memcpy Unknown``); None when the name does not say
    (a host-to-host copy's name says no direction: see `is_host_copy`)."""
    low = name.lower()
    for words, direction in _COPY_WORDS:
        if any(w in low for w in words):
            return direction
    return next((_COPY_TOKENS[w] for w in _WORDS.findall(low) if w in _COPY_TOKENS), None)


def is_host_copy(name: str) -> bool:
    """Whether a copy's name says it copied from host to host (``Memcpy HtoH (Pinned -> Pageable)``)."""
    return copy_direction(name) is None and not _HOST_COPY_TOKENS.isdisjoint(_WORDS.findall(name.lower()))

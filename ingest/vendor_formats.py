"""The vendor formats `load_any` recognises (issues 9, 16): explain dumps, compiler schedules, runtime profiles.

Kept apart from convert.py so that module only lists them; NPU Kineto exports
need no entry here: they are Kineto traces, and the Kineto reader maps their NPU
lanes itself (readers/npu_kineto.py).
"""

from __future__ import annotations

from collections.abc import Callable

from .readers import (
    ascend_csv,
    ascend_memory,
    ascend_trace,
    furiosa_schedule,
    furiosa_trace,
    mobilint_trace,
    rbln_dump,
)
from .trace import Trace

# (name, what it looks like, reader(path, caps, **options)) -- convert.py wraps each in an InputFormat
VENDOR_FORMATS: tuple[tuple[str, str, Callable[..., Trace]], ...] = (
    (rbln_dump.FORMAT, "RBLN torch.rbln.explain dump() JSON (hidden_host_bounce, cpu_fallback_by_op, runtime or "
     "rebel_runtime...; one dump or a list)", lambda p, caps, **kw: rbln_dump.read_rbln_dump(p, caps=caps)),
    (furiosa_schedule.FORMAT, "FuriosaAI --dump-schedule JSON ('instructions' with lifetimes in cycles, 'tensors')",
     lambda p, caps, **kw: furiosa_schedule.read_furiosa_schedule(p, caps=caps)),
    (furiosa_trace.FORMAT, "FuriosaAI runtime profiler Chrome trace (threads 'NPU <pe>', args pe_index)",
     lambda p, caps, sliced=False, **kw: furiosa_trace.read_furiosa_trace(p, caps=caps, sliced=sliced)),
    (ascend_trace.FORMAT, "torch_npu (Ascend) profiler trace_view.json (a bare array: Python, CANN, 'Ascend Hardware' "
     "processes, torch_to_npu flows)", lambda p, caps, sliced=False, **kw: ascend_trace.read_ascend_trace(p, caps=caps, sliced=sliced)),
    (ascend_csv.KERNELS_FORMAT, "torch_npu kernel_details.csv (Name, Accelerator Core, Start Time(us), Duration(us)...)",
     lambda p, caps, sliced=False, **kw: ascend_csv.read_kernel_details(p, caps=caps, sliced=sliced)),
    (ascend_csv.STATISTIC_FORMAT, "torch_npu op_statistic.csv (OP Type, Core Type, Count, Total Time(us)...)",
     lambda p, caps, **kw: ascend_csv.read_op_statistic(p, caps=caps)),
    (ascend_memory.RECORD_FORMAT, "torch_npu / msprof memory_record.csv (Component, Timestamp(us), Total Allocated(MB|KB)...)",
     lambda p, caps, sliced=False, **kw: ascend_memory.read_memory_record(p, caps=caps, sliced=sliced)),
    (ascend_memory.OPERATOR_FORMAT, "torch_npu / msprof operator_memory.csv (Name, Size(KB), Allocation Time(us), "
     "Allocation Total Allocated(MB|KB)...)",
     lambda p, caps, sliced=False, **kw: ascend_memory.read_operator_memory(p, caps=caps, sliced=sliced)),
    (mobilint_trace.FORMAT, "Mobilint qbruntime npu_core_trace.json (a bare array of B/E pairs: infer, run npu, wait core...)",
     lambda p, caps, sliced=False, **kw: mobilint_trace.read_mobilint_trace(p, caps=caps, sliced=sliced)),
)


def sniff_vendor(text: str) -> str | None:
    """The vendor format the start of a file looks like, or None."""
    if furiosa_trace.sniff(text):
        return furiosa_trace.FORMAT
    if ascend_trace.sniff(text):
        return ascend_trace.FORMAT
    if mobilint_trace.sniff(text):
        return mobilint_trace.FORMAT
    if ascend_csv.sniff_kernels(text):
        return ascend_csv.KERNELS_FORMAT
    if ascend_csv.sniff_statistic(text):
        return ascend_csv.STATISTIC_FORMAT
    if ascend_memory.sniff_record(text):
        return ascend_memory.RECORD_FORMAT
    if ascend_memory.sniff_operator(text):
        return ascend_memory.OPERATOR_FORMAT
    if rbln_dump.sniff(text):
        return rbln_dump.FORMAT
    if furiosa_schedule.sniff(text):
        return furiosa_schedule.FORMAT
    return None


__all__ = ["VENDOR_FORMATS", "sniff_vendor"]

"""FuriosaAI runtime profiler Chrome trace -> Trace: NPU rows as engine lanes, Load/Store as transfers.

NPU rows are threads ``tid = pe_index + 10000000`` named ``NPU <pe>``; their complete
("X") spans are ``Execution``, ``Load``, ``Store`` or operator names, with args
``pe_index``, ``execution_index``, ``instruction_index``, ``operator_index``.
Lanes per PE: ``NPU <pe>`` (Execution, stream), ``NPU <pe> operators`` (operator
spans, nested in an execution), ``NPU <pe> load`` (dma_h2d) and ``NPU <pe> store``
(dma_d2h); Load/Store are also transfers, with bytes when the args carry
``bytes``/``size``. Every other thread's spans go to host lanes named after the
thread. ``correlation`` is the ``execution_index``, which ties a device span to
the host span of the same execution (the same link as Kineto's launch flows).

Also read (from the producers' sources): the legacy SDK's export, a bare JSON array of ``X``
events whose host rows have cat ``Nux`` (``Quantize``, ``Lower``, ``Unlower``, ``Dequantize``,
``Inference``: host lanes named by thread, else ``host Nux``); RNGD device spans, cat ``NPU`` with
args ``begin_cycle``/``end_cycle`` (NPU rows whatever their tid; the cycle totals and the
cycles-per-microsecond they imply go to ``run_info.extra["npu_cycles"]``); and native traces,
whose device pseudo-process is named ``npu:<dev>:<pe-range>`` (lanes ``npu:<dev>:<pe-range> PE <pe>``,
device ``npu:<dev>``). Times are read through the shared Chrome pass: exact integer ns.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..builder import TraceBuilder
from ..errors import TraceFormatError
from ..schema import Direction, EngineKind, Mode, SliceKind, Source
from ..trace import RunInfo, Trace
from ._chrome_events import collect
from ._source import DEFAULT_CAPS, SizeCaps
from .chrome_generic import run_extent

FORMAT = "furiosa-trace"
NPU_TID_BASE = 10_000_000
_NPU_ROW = re.compile(r"^NPU\s*(\d+)$")
_NATIVE_NAME = re.compile(r"^npu:(\d+):([\d\-,]+)$")  # native traces: the device pseudo-process npu:<dev>:<pe-range>
_NATIVE = re.compile(r'"npu:\d+:[\d\-,]+"')
_ARGS = ("pe_index", "execution_index", "instruction_index", "operator_index", "bytes", "size", "begin_cycle", "end_cycle")
_LANES = {"Execution": ("", EngineKind.STREAM, SliceKind.COMPUTE), "Load": (" load", EngineKind.DMA_H2D, SliceKind.TRANSFER),
          "Store": (" store", EngineKind.DMA_D2H, SliceKind.TRANSFER)}  # fmt: skip


def sniff(text: str) -> bool:
    """True for a Furiosa runtime trace: ``pe_index`` args on ``NPU <pe>`` rows (object or the legacy bare
    array), RNGD device spans (cat ``NPU`` with ``begin_cycle``), or a native ``npu:<dev>:<pe-range>`` process."""
    chrome = '"traceEvents"' in text or text.lstrip()[:1] == "["
    if not chrome:
        return False
    if '"pe_index"' in text and (re.search(r'"NPU \d+"', text) is not None or str(NPU_TID_BASE) in text):
        return True
    return '"begin_cycle"' in text or _NATIVE.search(text) is not None


def read_furiosa_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a Furiosa runtime profiler Chrome trace into a Trace (times in ns, exact)."""
    path = Path(path)
    ev = collect(path, caps=caps, keep_args=_ARGS)
    vals = ev.values.values
    native = {pid: m for pid, label in ev.process_names.items() if (m := _NATIVE_NAME.match(label.strip()))}
    npu_threads = {key for key, label in ev.thread_names.items() if _NPU_ROW.match(label)}

    def npu_row(i: int) -> bool:
        pid, tid = ev.lane_key(i)
        return ((pid, tid) in npu_threads or pid in native or vals[ev.cat[i]] == "NPU"
                or (type(tid) is int and tid >= NPU_TID_BASE))  # fmt: skip

    rows = [npu_row(i) for i in range(len(ev))]
    if not any(rows):
        raise TraceFormatError(path, f"no spans on NPU rows (threads named 'NPU <pe>', tid = pe_index + {NPU_TID_BASE}, "
                                     "cat 'NPU', or a process 'npu:<dev>:<pe-range>')")  # fmt: skip
    t0, end = run_extent(ev)
    missing = set()
    b = TraceBuilder(RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=FORMAT))
    rid = b.add_region(path.name.split(".")[0], dur_ns=end - t0, mode=Mode.UNKNOWN, device="npu")
    devices: set[str] = set()
    npu_rows: set[str] = set()
    cycles = []
    for i in sorted(range(len(ev)), key=lambda i: (ev.start[i], -ev.dur[i])):
        start, dur, name = ev.start[i] - t0, ev.dur[i], vals[ev.name[i]]
        args = ev.args_of(i)
        pid, tid = ev.lane_key(i)
        execution = args.get("execution_index")
        corr = execution if type(execution) is int and 0 <= execution < 2**63 else None
        if not rows[i]:
            lane = ev.thread_names.get((pid, tid)) or (f"host {vals[ev.cat[i]]}" if vals[ev.cat[i]] else f"host thread {tid}")
            b.engine_slices.append(region_id=rid, engine=lane, engine_kind=EngineKind.HOST, kind=SliceKind.DISPATCH,
                                   name=name, start=start, dur=dur, correlation=corr)  # fmt: skip
            continue
        pe = args.get("pe_index", tid - NPU_TID_BASE if type(tid) is int and tid >= NPU_TID_BASE else tid)
        if pid in native:
            row, device = f"{ev.process_names[pid].strip()} PE {pe}", f"npu:{native[pid].group(1)}"
        else:
            row, device = f"NPU {pe}", f"npu:{pe}"
        devices.add(device)
        npu_rows.add(ev.thread_names.get((pid, tid), row))
        if type(args.get("begin_cycle")) is int and type(args.get("end_cycle")) is int:
            cycles.append((args["end_cycle"] - args["begin_cycle"], dur))
        suffix, engine_kind, slice_kind = _LANES.get(name, (" operators", EngineKind.OTHER, SliceKind.COMPUTE))
        nbytes = args.get("bytes", args.get("size"))
        nbytes = nbytes if type(nbytes) is int and 0 <= nbytes < 2**63 else None
        b.engine_slices.append(region_id=rid, engine=f"{row}{suffix}", engine_kind=engine_kind, kind=slice_kind,
                               name=name, start=start, dur=dur, correlation=corr, bytes=nbytes)  # fmt: skip
        if slice_kind is SliceKind.TRANSFER:
            direction = Direction.H2D if name == "Load" else Direction.D2H
            if nbytes is None:
                missing.add("transfer bytes (Load/Store spans carry no size)")
            b.transfers.append(region_id=rid, direction=direction, bytes=nbytes or 0, src_device="cpu" if direction is Direction.H2D
                               else device, dst_device=device if direction is Direction.H2D else "cpu",
                               start_ns=start, dur_ns=dur, cause="explicit")  # fmt: skip
            b.signals.append(region_id=rid, kind=direction.signal, reason=name, op_name=name, count=1,
                             bytes=nbytes or 0, time_ns=start)  # fmt: skip
    info = b.run_info
    info.devices = ["cpu", *sorted(devices, key=lambda d: (len(d), d))]
    info.missing_signals = sorted(missing | {"operator records and host signals (a runtime profile has no dispatcher events)"})
    info.extra = {"npu_rows": sorted(npu_rows), "events": ev.events}
    if cycles:
        total_cycles, total_ns = sum(c for c, _ in cycles), sum(d for _, d in cycles)
        info.extra["npu_cycles"] = {"spans": len(cycles), "cycles": total_cycles,
                                    "cycles_per_us": round(total_cycles * 1000 / total_ns, 3) if total_ns else None}  # fmt: skip
    return b.build()


__all__ = ["FORMAT", "read_furiosa_trace", "sniff"]

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

import numpy as np

from ..builder import TraceBuilder
from ..errors import TraceFormatError
from ..schema import Direction, EngineKind, Mode, SliceKind, Source
from ..trace import RunInfo, Trace
from ._chrome_bind import start_order
from ._chrome_events import NO_NUMBER, blocks, collect
from ._chrome_slices import finish
from ._disk_rows import DiskRows
from ._source import DEFAULT_CAPS, SizeCaps
from .chrome_generic import run_extent

FORMAT = "furiosa-trace"
NPU_TID_BASE = 10_000_000
_NPU_ROW = re.compile(r"^NPU\s*(\d+)$")
_NATIVE_NAME = re.compile(r"^npu:(\d+):([\d\-,]+)$")  # native traces: the device pseudo-process npu:<dev>:<pe-range>
_NATIVE = re.compile(r'"npu:\d+:[\d\-,]+"')
_ROWS = 1 << 16  # spans turned into rows at a time (Python objects per span live that long)
_ARGS = ("pe_index", "execution_index", "bytes", "size", "begin_cycle", "end_cycle")  # the args read; ints as columns
_REASON = {Direction.H2D.value: "Load", Direction.D2H.value: "Store"}
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


def read_furiosa_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS, sliced: bool = False) -> Trace:
    """Convert a Furiosa runtime profiler Chrome trace into a Trace (times in ns, exact).

    The spans are taken in order of (start, longest first) a time bucket at a time and their rows kept on disk
    (`DiskRows`): nothing per span is held. sliced: give the engine slices, transfers and signals as slices,
    made as they are written (`Trace.slices`)."""
    path = Path(path)
    ev = collect(path, caps=caps, keep_args=_ARGS, number_args=_ARGS)
    vals, codes = ev.values.values, ev.values.codes
    native = {pid: m for pid, label in ev.process_names.items() if (m := _NATIVE_NAME.match(label.strip()))}
    npu_threads = {key for key, label in ev.thread_names.items() if _NPU_ROW.match(label)}
    # per value code: a native device process, the NPU category, an NPU row's tid; per lane key: a thread named NPU <pe>
    native_pid = np.zeros(len(vals) + 1, dtype=bool)
    native_pid[[codes[p] for p in native if p in codes]] = True
    npu_code = np.array([type(v) is str and v == "NPU" for v in vals] + [False], dtype=bool)
    npu_tid = np.array([type(v) is int and v >= NPU_TID_BASE for v in vals] + [False], dtype=bool)
    npu_lanes = np.array(sorted((codes[p] << 32) | codes[t] for p, t in npu_threads if p in codes and t in codes), dtype=np.int64)

    def npu_rows(idx: np.ndarray) -> np.ndarray:
        pid, tid = ev.gather("pid", idx), ev.gather("tid", idx)
        lane = (pid.astype(np.int64) << 32) | tid
        return np.isin(lane, npu_lanes) | native_pid[pid] | npu_code[ev.gather("cat", idx)] | npu_tid[tid]

    if not any(bool(npu_rows(np.arange(lo, hi)).any()) for lo, hi in blocks(len(ev))):
        raise TraceFormatError(path, f"no spans on NPU rows (threads named 'NPU <pe>', tid = pe_index + {NPU_TID_BASE}, "
                                     "cat 'NPU', or a process 'npu:<dev>:<pe-range>')")  # fmt: skip
    t0, end = run_extent(ev)
    missing = set()
    b = TraceBuilder(RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=FORMAT))
    rid = b.add_region(path.name.split(".")[0], dur_ns=end - t0, mode=Mode.UNKNOWN, device="npu")
    slices = DiskRows("engine_slices", numbers={"start": "q", "dur": "q", "correlation": "q", "bytes": "q"},
                      texts=("engine", "engine_kind", "kind", "name"), optional=("correlation", "bytes"), fixed={"region_id": rid})  # fmt: skip
    transfers = DiskRows("transfers", numbers={"bytes": "q", "start_ns": "q", "dur_ns": "q"},
                         texts=("direction", "src_device", "dst_device"), fixed={"region_id": rid, "cause": "explicit"})  # fmt: skip
    signals = DiskRows("signals", numbers={"bytes": "q", "time_ns": "q"}, texts=("kind", "reason", "op_name"),
                       fixed={"region_id": rid, "count": 1})  # fmt: skip
    devices: set[str] = set()
    npu_row_names: set[str] = set()
    cycle_spans = total_cycles = total_ns = 0
    numbers = [ev.numbers[k] for k in _ARGS]
    for idx in (order[lo : lo + _ROWS] for order in start_order(ev) for lo in range(0, len(order), _ROWS)):
        rows = npu_rows(idx).tolist()
        start, dur = (ev.gather("start", idx) - t0).tolist(), ev.gather("dur", idx).tolist()
        name_c, cat_c, pid_c, tid_c, args_c = (ev.gather(c, idx).tolist() for c in ("name", "cat", "pid", "tid", "args"))
        pe_n, execution_n, bytes_n, size_n, begin_n, end_n = (c.take(idx).tolist() for c in numbers)
        lane: list[tuple[str, str, str, str, int, int, int, int]] = []  # engine, kind, slice kind, name, start, dur, corr, bytes
        moved: list[tuple[str, int, str, str, int, int]] = []  # direction, bytes, src, dst, start, dur
        for j in range(len(idx)):
            name, args = vals[name_c[j]], vals[args_c[j]] if args_c[j] >= 0 else {}
            pid, tid = vals[pid_c[j]], vals[tid_c[j]]
            execution = execution_n[j] if execution_n[j] != NO_NUMBER else args.get("execution_index")
            corr = execution if type(execution) is int and 0 <= execution < 2**63 else -1
            if not rows[j]:
                cat = vals[cat_c[j]]
                engine = ev.thread_names.get((pid, tid)) or (f"host {cat}" if cat else f"host thread {tid}")
                lane.append((engine, EngineKind.HOST.value, SliceKind.DISPATCH.value, name, start[j], dur[j], corr, -1))
                continue
            pe = pe_n[j] if pe_n[j] != NO_NUMBER else args.get("pe_index", tid - NPU_TID_BASE if type(tid) is int and tid >= NPU_TID_BASE else tid)
            if pid in native:
                row, device = f"{ev.process_names[pid].strip()} PE {pe}", f"npu:{native[pid].group(1)}"
            else:
                row, device = f"NPU {pe}", f"npu:{pe}"
            devices.add(device)
            npu_row_names.add(ev.thread_names.get((pid, tid), row))
            begin = begin_n[j] if begin_n[j] != NO_NUMBER else args.get("begin_cycle")
            finish_ = end_n[j] if end_n[j] != NO_NUMBER else args.get("end_cycle")
            if type(begin) is int and type(finish_) is int:
                cycle_spans, total_cycles, total_ns = cycle_spans + 1, total_cycles + finish_ - begin, total_ns + dur[j]
            suffix, engine_kind, slice_kind = _LANES.get(name, (" operators", EngineKind.OTHER, SliceKind.COMPUTE))
            nbytes = bytes_n[j] if bytes_n[j] != NO_NUMBER else args.get("bytes", size_n[j] if size_n[j] != NO_NUMBER else args.get("size"))
            nbytes = nbytes if type(nbytes) is int and 0 <= nbytes < 2**63 else -1
            lane.append((f"{row}{suffix}", engine_kind.value, slice_kind.value, name, start[j], dur[j], corr, nbytes))
            if slice_kind is SliceKind.TRANSFER:
                direction = Direction.H2D if name == "Load" else Direction.D2H
                if nbytes < 0:
                    missing.add("transfer bytes (Load/Store spans carry no size)")
                h2d = direction is Direction.H2D
                moved.append((direction.value, max(nbytes, 0), "cpu" if h2d else device, device if h2d else "cpu", start[j], dur[j]))
        slices.add(len(lane), **dict(zip(("engine", "engine_kind", "kind", "name", "start", "dur", "correlation", "bytes"),
                                         zip(*lane, strict=True) if lane else [()] * 8, strict=True)))  # fmt: skip
        transfers.add(len(moved), **dict(zip(("direction", "bytes", "src_device", "dst_device", "start_ns", "dur_ns"),
                                             zip(*moved, strict=True) if moved else [()] * 6, strict=True)))  # fmt: skip
        signals.add(len(moved), kind=[Direction(m[0]).signal.value for m in moved], reason=[_REASON[m[0]] for m in moved],
                    op_name=[_REASON[m[0]] for m in moved], bytes=[m[1] for m in moved], time_ns=[m[4] for m in moved])  # fmt: skip
    info = b.run_info
    info.devices = ["cpu", *sorted(devices, key=lambda d: (len(d), d))]
    info.missing_signals = sorted(missing | {"operator records and host signals (a runtime profile has no dispatcher events)"})
    info.extra = {"npu_rows": sorted(npu_row_names), "events": ev.events}
    if cycle_spans:
        info.extra["npu_cycles"] = {"spans": cycle_spans, "cycles": total_cycles,
                                    "cycles_per_us": round(total_cycles * 1000 / total_ns, 3) if total_ns else None}  # fmt: skip
    ev.close()
    tables = {name: rows.slices() for name, rows in (("engine_slices", slices), ("transfers", transfers), ("signals", signals))
              if len(rows)}  # fmt: skip
    return finish(b.build(), tables, sliced=sliced)


__all__ = ["FORMAT", "read_furiosa_trace", "sniff"]

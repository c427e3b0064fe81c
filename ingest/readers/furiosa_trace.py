"""FuriosaAI runtime profiler Chrome trace -> events (`events.EventColumns`) -> Trace: NPU rows as lanes, Load/Store
as copies.

NPU rows are threads ``tid = pe_index + 10000000`` named ``NPU <pe>``; their complete
("X") spans are ``Execution``, ``Load``, ``Store`` or operator names, with args
``pe_index``, ``execution_index``, ``instruction_index``, ``operator_index``.
Lanes per PE: ``NPU <pe>`` (Execution, stream), ``NPU <pe> operators`` (operator
spans, nested in an execution), ``NPU <pe> load`` (dma_h2d) and ``NPU <pe> store``
(dma_d2h). Every other thread's spans go to host lanes named after the thread (the runtime's: dispatch).
``correlation`` is the ``execution_index``, which ties a device span to the host span of the same execution.

Events: Execution and operator spans are device work (KERNEL), Load a copy to the device (COPY, HtoD) and Store one
from it (COPY, DtoH), with bytes when the args carry ``bytes``/``size``, on their PE's device; host spans are SPAN
events on their lanes. `assemble` and its rules make the transfers. Spans are given in order of (start, longest
first).

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
from typing import Any

import numpy as np

from ..errors import TraceFormatError
from ..events import KIND_CODES, NONE, EventColumns, EventKind, Translated
from ..schema import EngineKind, Source
from ..trace import RunInfo, Trace
from .chrome_events import ChromeEvents, convert
from .chrome_generic import add_spans, run_extent
from .source import DEFAULT_CAPS, SizeCaps

FORMAT = "furiosa-trace"
NPU_TID_BASE = 10_000_000
_NPU_ROW = re.compile(r"^NPU\s*(\d+)$")
_NATIVE_NAME = re.compile(r"^npu:(\d+):([\d\-,]+)$")  # native traces: the device pseudo-process npu:<dev>:<pe-range>
_NATIVE = re.compile(r'"npu:\d+:[\d\-,]+"')
_ARGS = ("pe_index", "execution_index", "bytes", "size", "begin_cycle", "end_cycle")  # the args read; ints as columns
# an NPU span by its name: (event, lane suffix, engine kind, copy kind); any other name is an operator
_SPANS = {"Execution": (EventKind.KERNEL, "", EngineKind.STREAM, None), "Load": (EventKind.COPY, " load", EngineKind.DMA_H2D, 1),
          "Store": (EventKind.COPY, " store", EngineKind.DMA_D2H, 2)}  # fmt: skip
_OPERATOR = (EventKind.KERNEL, " operators", EngineKind.OTHER, None)
NO_BYTES = "transfer bytes (Load/Store spans carry no size)"


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

    sliced: the big tables as `Trace.slices`, made as they are written (converting never holds them whole)."""
    return convert(path, translate, caps=caps, sliced=sliced, keep_args=_ARGS, number_args=_ARGS)


def translate(path: Path, ev: ChromeEvents) -> Translated:
    """The events of one collected runtime trace in the one event model."""
    vals, codes = ev.values.values, ev.values.codes
    n = len(ev)
    native = {pid: m for pid, label in ev.process_names.items() if (m := _NATIVE_NAME.match(label.strip()))}
    npu_threads = {key for key, label in ev.thread_names.items() if _NPU_ROW.match(label)}
    col = {c: ev.read(c, 0, n) for c in ("start", "dur", "name", "cat", "pid", "tid", "args")}
    # per value code: a native device process, the NPU category, an NPU row's tid; per lane key: a thread named NPU <pe>
    native_pid = np.zeros(len(vals) + 1, dtype=bool)
    native_pid[[codes[p] for p in native if p in codes]] = True
    npu_code = np.array([type(v) is str and v == "NPU" for v in vals] + [False], dtype=bool)
    npu_tid = np.array([type(v) is int and v >= NPU_TID_BASE for v in vals] + [False], dtype=bool)
    npu_lanes = np.array(sorted((codes[p] << 32) | codes[t] for p, t in npu_threads if p in codes and t in codes), dtype=np.int64)
    lane = (col["pid"].astype(np.int64) << 32) | col["tid"]
    npu = np.isin(lane, npu_lanes) | native_pid[col["pid"]] | npu_code[col["cat"]] | npu_tid[col["tid"]]
    if not npu.any():
        raise TraceFormatError(path, f"no spans on NPU rows (threads named 'NPU <pe>', tid = pe_index + {NPU_TID_BASE}, "
                                     "cat 'NPU', or a process 'npu:<dev>:<pe-range>')")  # fmt: skip
    t0, _ = run_extent(ev)
    order = np.lexsort((np.arange(n), -col["dur"], col["start"]))  # by start, the longest first
    col = {c: v[order] for c, v in col.items()}
    number = {k: ev.numbers[k].read(0, n)[order] for k in _ARGS}
    npu = npu[order]
    arg_codes, arg_at = np.unique(col["args"], return_inverse=True)
    arg_at = arg_at.reshape(-1)
    args = [vals[c] if c >= 0 else {} for c in arg_codes.tolist()]  # per distinct args: what is left after `number`

    execution = number["execution_index"]  # an index that is no int64 stays in the args: no index
    correlation = np.where(execution >= 0, execution, NONE)
    out = EventColumns()

    def part(rows: np.ndarray) -> dict[str, np.ndarray]:
        return {c: v[rows] for c, v in col.items()}

    # host spans: on lanes named after their thread, else "host <cat>" / "host thread <tid>"
    rows = np.flatnonzero(~npu)
    keys, at = np.unique(np.stack([col["pid"][rows], col["tid"][rows], col["cat"][rows]]), axis=1, return_inverse=True)
    names = [ev.thread_names.get((vals[p], vals[t])) or (f"host {vals[c]}" if vals[c] else f"host thread {vals[t]}")
             for p, t, c in keys.T.tolist()]  # fmt: skip
    add_spans(out, EventKind.SPAN, vals, part(rows), t0, correlation=correlation[rows],
              texts={"lane": (names, at.reshape(-1)), "engine_kind": ([EngineKind.DISPATCH.value], np.zeros(len(rows), np.int64))})
    # NPU spans: their PE's row and device, by (pid, tid, args, pe_index)
    rows = np.flatnonzero(npu)
    pe = number["pe_index"][rows]
    keys, at = np.unique(np.stack([col["pid"][rows], col["tid"][rows], arg_at[rows], pe]), axis=1, return_inverse=True)
    at = at.reshape(-1)
    places = [_place(ev, native, vals[p], vals[t], args[a], v) for p, t, a, v in keys.T.tolist()]
    devices = sorted({device for _, device, _ in places}, key=lambda d: (len(d), d))
    device = np.array([devices.index(d) for _, d, _ in places], dtype=np.int64)[at]
    nbytes = np.where(number["bytes"] != NONE, number["bytes"],
                      np.array([-1 if "bytes" in a else NONE for a in args] or [NONE], dtype=np.int64)[arg_at])
    nbytes = np.where(nbytes == NONE, number["size"], nbytes)[rows]  # an args value that is no int64: no size
    nbytes = np.where(nbytes >= 0, nbytes, NONE)
    what = np.array([list(_SPANS).index(v) if type(v) is str and v in _SPANS else len(_SPANS) for v in vals] or [0])
    what = what[col["name"][rows]]
    kinds, suffixes, engine_kinds, copy_kinds = zip(*_SPANS.values(), _OPERATOR, strict=True)
    copy_kind = np.array([NONE if k is None else k for k in copy_kinds], dtype=np.int64)[what]
    nbytes = np.where(copy_kind != NONE, nbytes, NONE)  # a copy's size (device work's own is not read)
    missing = {"operator records and host signals (a runtime profile has no dispatcher events)"}
    if ((copy_kind != NONE) & (nbytes == NONE)).any():
        missing.add(NO_BYTES)
    lanes = [f"{row}{suffix}" for row, _, _ in places for suffix in suffixes]  # per (place, what)
    add_spans(out, np.array([KIND_CODES[k] for k in kinds])[what], vals, part(rows), t0, correlation=correlation[rows],
              device=device, copy_kind=copy_kind, bytes=nbytes,
              texts={"lane": (lanes, at * len(suffixes) + what), "engine_kind": ([k.value for k in engine_kinds], what)})  # fmt: skip
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=FORMAT,
                   devices=["cpu", *devices], missing_signals=sorted(missing),
                   extra={"npu_rows": sorted({name for _, _, name in places}), "events": ev.events})  # fmt: skip
    cycles = _cycles(number, args, arg_at, col["dur"], rows)
    if cycles["spans"]:
        info.extra["npu_cycles"] = cycles
    return Translated(out, info, root_name=path.name.split(".")[0], root_device="npu", device_names=dict(enumerate(devices)))


def _place(ev: ChromeEvents, native: dict[Any, re.Match], pid: Any, tid: Any, args: dict, pe: int) -> tuple[str, str, str]:
    """(row, device, NPU row name) of an NPU span: its PE from its pe_index (else the tid past NPU_TID_BASE, else the
    tid); a native device process names the row after itself and the device by its number."""
    if pe == NONE:
        pe = args.get("pe_index", tid - NPU_TID_BASE if type(tid) is int and tid >= NPU_TID_BASE else tid)
    if pid in native:
        row, device = f"{ev.process_names[pid].strip()} PE {pe}", f"npu:{native[pid].group(1)}"
    else:
        row, device = f"NPU {pe}", f"npu:{pe}"
    return row, device, ev.thread_names.get((pid, tid), row)


def _cycles(number: dict[str, np.ndarray], args: list[dict], arg_at: np.ndarray, dur: np.ndarray,
            rows: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """The NPU spans with both ``begin_cycle`` and ``end_cycle`` ints: how many, their cycles, cycles per us."""
    begin, end = number["begin_cycle"][rows], number["end_cycle"][rows]
    both = (begin != NONE) & (end != NONE)
    spans, cycles, ns = int(both.sum()), int((end[both] - begin[both]).sum()), int(dur[rows][both].sum())
    big = np.array([any(type(a.get(k)) is int for k in ("begin_cycle", "end_cycle")) for a in args] or [False])
    for r in rows[~both & big[arg_at[rows]]].tolist():  # ints past int64 stay in the args
        a = args[arg_at[r]]
        b = int(number["begin_cycle"][r]) if number["begin_cycle"][r] != NONE else a.get("begin_cycle")
        e = int(number["end_cycle"][r]) if number["end_cycle"][r] != NONE else a.get("end_cycle")
        if type(b) is int and type(e) is int:
            spans, cycles, ns = spans + 1, cycles + e - b, ns + int(dur[r])
    return {"spans": spans, "cycles": cycles, "cycles_per_us": round(cycles * 1000 / ns, 3) if ns else None}


__all__ = ["FORMAT", "NPU_TID_BASE", "read_furiosa_trace", "sniff", "translate"]

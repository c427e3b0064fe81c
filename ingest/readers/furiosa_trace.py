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
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..builder import TraceBuilder
from ..errors import TraceFormatError
from ..schema import Direction, EngineKind, Mode, SliceKind, Source
from ..trace import RunInfo, Trace
from ._source import DEFAULT_CAPS, SizeCaps, read_json

FORMAT = "furiosa-trace"
NPU_TID_BASE = 10_000_000
_NPU_ROW = re.compile(r"^NPU\s*(\d+)$")
_LANES = {"Execution": ("", EngineKind.STREAM, SliceKind.COMPUTE), "Load": (" load", EngineKind.DMA_H2D, SliceKind.TRANSFER),
          "Store": (" store", EngineKind.DMA_D2H, SliceKind.TRANSFER)}  # fmt: skip


def sniff(text: str) -> bool:
    """True for a Chrome trace with Furiosa NPU rows (``NPU <pe>`` threads, ``pe_index`` args)."""
    return '"traceEvents"' in text and '"pe_index"' in text and re.search(r'"NPU \d+"', text) is not None


def read_furiosa_trace(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a Furiosa runtime profiler Chrome trace into a Trace (times in ns)."""
    path = Path(path)
    doc = read_json(path, caps)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceFormatError(path, "no 'traceEvents' list: not a Chrome trace")
    threads: dict[tuple[Any, Any], str] = {}
    spans, problems = [], []
    for n, ev in enumerate(events):
        if not isinstance(ev, dict):
            problems.append(f"event {n} is a {type(ev).__name__}, expected an object")
        elif ev.get("ph") == "M" and ev.get("name") == "thread_name" and isinstance(ev.get("args"), dict):
            threads[(ev.get("pid"), ev.get("tid"))] = str(ev["args"].get("name"))
        elif ev.get("ph") == "X":
            ts, dur, name = ev.get("ts"), ev.get("dur", 0), ev.get("name")
            if not (isinstance(ts, (int, float)) and isinstance(dur, (int, float)) and dur >= 0 and isinstance(name, str)):
                problems.append(f"event {n} ({name!r:.40}) needs a numeric 'ts', a non-negative 'dur' and a 'name'")
                continue
            spans.append(ev)
    npu = {key for key, label in threads.items() if _NPU_ROW.match(label)}
    npu |= {(ev.get("pid"), ev.get("tid")) for ev in spans if isinstance(ev.get("tid"), int) and ev["tid"] >= NPU_TID_BASE}
    if not problems and not any((ev.get("pid"), ev.get("tid")) in npu for ev in spans):
        problems.append(f"no spans on NPU rows (threads named 'NPU <pe>', tid = pe_index + {NPU_TID_BASE})")
    if problems:
        raise TraceFormatError(path, problems[:12])
    t0 = min(ev["ts"] for ev in spans)
    missing = set()
    b = TraceBuilder(RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=FORMAT))
    end = max(int(round((ev["ts"] + ev.get("dur", 0) - t0) * 1000)) for ev in spans)
    rid = b.add_region(path.name.split(".")[0], dur_ns=end, mode=Mode.UNKNOWN, device="npu")
    pes = set()
    for ev in sorted(spans, key=lambda e: (e["ts"], -e.get("dur", 0))):
        start = int(round((ev["ts"] - t0) * 1000))
        dur = max(int(round((ev["ts"] + ev.get("dur", 0) - t0) * 1000)) - start, 0)
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        key = (ev.get("pid"), ev.get("tid"))
        execution = args.get("execution_index")
        corr = execution if isinstance(execution, int) else None
        if key not in npu:
            b.engine_slices.append(region_id=rid, engine=threads.get(key, f"host thread {key[1]}"), engine_kind=EngineKind.HOST,
                                   kind=SliceKind.DISPATCH, name=ev["name"], start=start, dur=dur, correlation=corr)  # fmt: skip
            continue
        pe = args.get("pe_index", ev["tid"] - NPU_TID_BASE if isinstance(ev["tid"], int) else key[1])
        pes.add(pe)
        suffix, engine_kind, slice_kind = _LANES.get(ev["name"], (" operators", EngineKind.OTHER, SliceKind.COMPUTE))
        nbytes = args.get("bytes", args.get("size"))
        nbytes = nbytes if isinstance(nbytes, int) and nbytes >= 0 else None
        b.engine_slices.append(region_id=rid, engine=f"NPU {pe}{suffix}", engine_kind=engine_kind, kind=slice_kind,
                               name=ev["name"], start=start, dur=dur, correlation=corr, bytes=nbytes)  # fmt: skip
        if slice_kind is SliceKind.TRANSFER:
            direction = Direction.H2D if ev["name"] == "Load" else Direction.D2H
            if nbytes is None:
                missing.add("transfer bytes (Load/Store spans carry no size)")
            b.transfers.append(region_id=rid, direction=direction, bytes=nbytes or 0, src_device="cpu" if direction is Direction.H2D
                               else f"npu:{pe}", dst_device=f"npu:{pe}" if direction is Direction.H2D else "cpu",
                               start_ns=start, dur_ns=dur, cause="explicit")  # fmt: skip
            b.signals.append(region_id=rid, kind=direction.signal, reason=ev["name"], op_name=ev["name"], count=1,
                             bytes=nbytes or 0, time_ns=start)  # fmt: skip
    info = b.run_info
    info.devices = ["cpu", *(f"npu:{pe}" for pe in sorted(pes, key=str))]
    info.missing_signals = sorted(missing | {"operator records and host signals (a runtime profile has no dispatcher events)"})
    info.extra = {"npu_rows": sorted(threads.get(k, f"tid {k[1]}") for k in npu), "events": len(events)}
    return b.build()


__all__ = ["FORMAT", "read_furiosa_trace", "sniff"]

"""FuriosaAI kernel compiler ``--dump-schedule`` JSON -> engine slices in cycles.

The dump is ``{"instructions": [...], "tensors": [...]}``. An instruction has
``index`` (a number, or a string for synthetic syncs), ``tpe`` (``Main``, ``Sub``,
``Dma...``, ``Core``), ``lifetime {begin, end}`` in cycles, ``contexts``, a
``description`` whose source location follows ``--> path:line``,
``input_tensors``/``output_tensors`` (tensor indices) and a utilisation figure.
A tensor has ``index``, ``name``, ``size`` (bytes), ``address``, ``buffer_type``.

Each instruction becomes one slice on the lane of each of its contexts (the
lane is the context's name; its engine kind from the name: ``Dma`` -> dma_d2d,
device memory <-> on-chip, ``Vector`` -> vector, ``Main``/``Tensor``/``Contraction``
-> matrix, anything else -> other). ``correlation`` is the instruction's index
(string indices get numbers after the largest numeric one); DMA bytes are the
sizes of the tensors an instruction writes (else reads). Dependencies are
implicit: an instruction reading a tensor depends on the last instruction that
wrote it before it began. They are stored as ``depends_on`` (list of producer
correlations, a nullable extra column) and summarised in ``waited_on``: when the
latest producer ended after the lane's previous slice, the slice waited on it
(``transfer`` for a DMA producer, else ``dependency``), which is what the schedule
summary attributes gaps and the critical path to. The makespan is the last cycle.

Tensors are kept for the viewer's memory lanes (Spm, Vrf, Trf, Sram... above the resource lanes, as
Furiosa's Schedule Viewer draws them): ``run_info.extra["tensors"]`` holds ``{"columns": [name, tier,
address, size, begin, end], "rows": [...]}`` -- tier is the ``buffer_type``, the lifetime the tensor's own
``lifetime`` or, without one, from the first instruction that uses it to the last.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..builder import TraceBuilder
from ..errors import TraceFormatError
from ..memory_lanes import TENSOR_COLUMNS
from ..schema import EngineKind, Mode, SliceKind, Source, TimeUnit
from ..trace import RunInfo, Trace
from .source import DEFAULT_CAPS, SizeCaps, read_json

FORMAT = "furiosa-schedule"
KNOWN_INSTRUCTION_KEYS = {"index", "tpe", "lifetime", "contexts", "description", "input_tensors", "output_tensors",
                          "utilization", "utilisation", "_comment"}  # fmt: skip
KNOWN_TOP_KEYS = {"instructions", "tensors", "_comment"}
DEPENDS_ON = pa.field("depends_on", pa.list_(pa.int64()))  # producer correlations (extra column, see FORMAT.md)
CALL_SITE = pa.field("call_site", pa.dictionary(pa.int32(), pa.string()))  # "path:line" (extra column)
_LOCATION = re.compile(r"-->\s*(\S+:\d+)")
_MAX_PROBLEMS = 12


def sniff(text: str) -> bool:
    """True when the start of a JSON document looks like a schedule dump."""
    return text.lstrip()[:1] == "{" and '"instructions"' in text and ('"lifetime"' in text or '"tensors"' in text)


def engine_kind(context: str) -> EngineKind:
    """The engine kind of a schedule context (lane) from its name."""
    low = context.lower()
    if "dma" in low:
        return EngineKind.DMA_D2D
    if "vector" in low:
        return EngineKind.VECTOR
    if any(w in low for w in ("main", "tensor", "contraction", "matrix")):
        return EngineKind.MATRIX
    return EngineKind.OTHER


def read_furiosa_schedule(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert a ``--dump-schedule`` JSON into a Trace of engine slices whose unit is cycles."""
    path = Path(path)
    doc = read_json(path, caps)
    if not isinstance(doc, dict) or not isinstance(doc.get("instructions"), list):
        got = type(doc).__name__ if not isinstance(doc, dict) else f"keys {sorted(doc)[:8]}"
        raise TraceFormatError(path, f"a schedule dump is an object with an 'instructions' list (got {got})")
    problems: list[str] = []
    sizes = _tensor_sizes(doc.get("tensors"), problems)
    instructions = [i for i in (_instruction(n, raw, sizes, problems) for n, raw in enumerate(doc["instructions"])) if i]
    if not instructions and not problems:
        problems.append("'instructions' is empty: nothing to convert")
    if problems:
        more = [f"... and {len(problems) - _MAX_PROBLEMS} more"] if len(problems) > _MAX_PROBLEMS else []
        raise TraceFormatError(path, [*problems[:_MAX_PROBLEMS], *more])
    numeric = [i["index"] for i in instructions if isinstance(i["index"], int)]
    next_id = max(numeric, default=-1) + 1
    for ins in instructions:
        if isinstance(ins["index"], int):
            ins["id"] = ins["index"]
        else:
            ins["id"], next_id = next_id, next_id + 1
    _link(instructions)
    tensors, unplaced = _tensor_rows(doc.get("tensors"), instructions)
    makespan = max(i["end"] for i in instructions)
    contexts = sorted({c for i in instructions for c in i["contexts"]})
    unknown_top = sorted(set(doc) - KNOWN_TOP_KEYS)
    unknown_ins = sorted({k for raw in doc["instructions"] if isinstance(raw, dict) for k in raw} - KNOWN_INSTRUCTION_KEYS)
    info = RunInfo(
        source=Source.CONVERTED, producer="portscope convert", converted_from=FORMAT, time_unit=TimeUnit.CYCLES,
        devices=["npu"], missing_signals=["wall time (a static schedule is in cycles; no clock is given)",
                                          "host-side signals (a compiler schedule has no fallbacks, transfers or compiles)"],
        extra={"makespan_cycles": makespan, "contexts": contexts, "instructions": len(instructions),
               "tensors": {"columns": TENSOR_COLUMNS, "rows": tensors},
               **({"tensors_without_address": unplaced} if unplaced else {}),
               **({"unknown_keys": unknown_top} if unknown_top else {}),
               **({"unknown_instruction_keys": unknown_ins} if unknown_ins else {})},
    )  # fmt: skip
    b = TraceBuilder(info)
    rid = b.add_region(path.name.split(".")[0], mode=Mode.COMPILED, device="npu",
                       tags=json.dumps({"makespan_cycles": str(makespan), "time_unit": "cycles"}))  # fmt: skip
    depends: list[list[int] | None] = []
    sites: list[str | None] = []
    for ins in sorted(instructions, key=lambda i: (i["begin"], i["id"])):
        for context in ins["contexts"]:
            kind = engine_kind(context)
            slice_kind = SliceKind.SYNC if isinstance(ins["index"], str) else (
                SliceKind.TRANSFER if kind is EngineKind.DMA_D2D else SliceKind.COMPUTE)
            b.engine_slices.append(region_id=rid, engine=context, engine_kind=kind, kind=slice_kind, name=ins["name"],
                                   start=ins["begin"], dur=ins["end"] - ins["begin"], correlation=ins["id"],
                                   bytes=ins["bytes"] if kind is EngineKind.DMA_D2D else None,
                                   waited_on=ins["waited_on"].get(context))  # fmt: skip
            depends.append(ins["depends_on"] or None)
            sites.append(ins["site"])
    trace = b.build()
    slices = trace.tables["engine_slices"]
    slices = slices.append_column(DEPENDS_ON, pa.array(depends, DEPENDS_ON.type))
    trace.tables["engine_slices"] = slices.append_column(CALL_SITE, pa.array(sites, pa.string()).dictionary_encode())
    return trace


def _tensor_rows(raw: Any, instructions: list[dict]) -> tuple[list[list], int]:
    """[name, tier, address, size, begin, end] per tensor with an address (lifetime: its own, else from the
    instructions that write and read it), and how many tensors had no address to draw."""
    users: dict[int, list[dict]] = {}
    for ins in instructions:
        for t in (*ins["inputs"], *ins["outputs"]):
            users.setdefault(t, []).append(ins)
    rows, unplaced = [], 0
    for t in raw if isinstance(raw, list) else []:
        index, address, size = (t.get("index"), t.get("address"), t.get("size")) if isinstance(t, dict) else (None,) * 3
        if not (_is_int(index) and _is_int(size)):
            continue  # already reported by _tensor_sizes
        if not _is_int(address) or address < 0:
            unplaced += 1
            continue
        life = t.get("lifetime")
        begin, end = (life.get("begin"), life.get("end")) if isinstance(life, dict) else (None, None)
        if not (_is_int(begin) and _is_int(end) and begin <= end):
            used = users.get(index, [])
            if not used:
                unplaced += 1
                continue
            begin, end = min(i["begin"] for i in used), max(i["end"] for i in used)
        name = t.get("name") if isinstance(t.get("name"), str) else f"tensor {index}"
        tier = t.get("buffer_type") if isinstance(t.get("buffer_type"), str) else "unknown"
        rows.append([name, tier, address, size, begin, end])
    return rows, unplaced


def _tensor_sizes(raw: Any, problems: list[str]) -> dict[int, int]:
    if raw is None:
        problems.append("no 'tensors' list: DMA bytes and dependencies cannot be derived")
        return {}
    if not isinstance(raw, list):
        problems.append(f"'tensors' is a {type(raw).__name__}, expected a list")
        return {}
    sizes = {}
    for n, t in enumerate(raw):
        index, size = (t.get("index"), t.get("size")) if isinstance(t, dict) else (None, None)
        if not _is_int(index) or not _is_int(size) or size < 0:
            problems.append(f"tensors[{n}] needs an integer 'index' and a non-negative integer 'size' (bytes), each at most 2**53")
            continue
        sizes[index] = size
    return sizes


def _instruction(n: int, raw: Any, sizes: dict[int, int], problems: list[str]) -> dict | None:
    where = f"instructions[{n}]"
    if not isinstance(raw, dict):
        problems.append(f"{where} is a {type(raw).__name__}, expected an object")
        return None
    index, life = raw.get("index"), raw.get("lifetime")
    bad = []
    if not (_is_int(index) or isinstance(index, str)):
        bad.append("'index' (a number or a string)")
    begin, end = (life.get("begin"), life.get("end")) if isinstance(life, dict) else (None, None)
    if not (_is_int(begin) and _is_int(end) and 0 <= begin <= end):
        bad.append("'lifetime' {begin, end} in cycles with 0 <= begin <= end <= 2**53")
    contexts = raw.get("contexts")
    if contexts is None:
        contexts = [str(raw.get("tpe") or "unknown")]
    if not (isinstance(contexts, list) and contexts and all(isinstance(c, str) for c in contexts)):
        bad.append("'contexts' (a non-empty list of names)")
    tensors = {}
    for key in ("input_tensors", "output_tensors"):
        ids = raw.get(key, [])
        if not (isinstance(ids, list) and all(_is_int(t) for t in ids)):
            bad.append(f"'{key}' (a list of tensor indices)")
            ids = []
        unknown = [t for t in ids if t not in sizes]
        if unknown and sizes:
            bad.append(f"'{key}' naming tensors that are not in 'tensors' ({unknown[:3]})")
        tensors[key] = ids
    if bad:
        problems.append(f"{where} (index {index!r}) lacks " + "; ".join(bad))
        return None
    description = str(raw.get("description") or "")
    first = next((line.strip() for line in description.splitlines() if line.strip() and "-->" not in line), "")
    site = _LOCATION.search(description)
    written = sum(sizes.get(t, 0) for t in tensors["output_tensors"])
    moved = written or sum(sizes.get(t, 0) for t in tensors["input_tensors"])
    if moved > _MAX_INT:
        problems.append(f"{where} (index {index!r}) moves tensors whose sizes add up past 2**53 bytes")
        return None
    return {
        "index": index, "begin": begin, "end": end, "contexts": list(dict.fromkeys(contexts)),
        "name": first[:120] or f"{raw.get('tpe') or 'instruction'} {index}", "site": site.group(1) if site else None,
        "inputs": tensors["input_tensors"], "outputs": tensors["output_tensors"],
        "bytes": moved,
        "dma": any(engine_kind(c) is EngineKind.DMA_D2D for c in contexts),
    }  # fmt: skip


def _link(instructions: list[dict]) -> None:
    """depends_on (producer ids) and waited_on (per context) of every instruction, from tensor writes and reads."""
    writers: dict[int, list[dict]] = {}
    for ins in instructions:
        for t in ins["outputs"]:
            writers.setdefault(t, []).append(ins)
    lane_end: dict[str, int] = {}
    for ins in sorted(instructions, key=lambda i: (i["begin"], i["id"])):
        producers = []
        for t in ins["inputs"]:
            before = [w for w in writers.get(t, []) if w is not ins and w["end"] <= ins["begin"]]
            candidates = before or [w for w in writers.get(t, []) if w is not ins]
            if candidates:
                producers.append(max(candidates, key=lambda w: (w["end"], w["id"])))
        ins["depends_on"] = sorted({p["id"] for p in producers})
        last = max(producers, key=lambda w: w["end"], default=None)
        ins["waited_on"] = {}
        for context in ins["contexts"]:
            free = lane_end.get(context, 0)
            if last is not None and last["end"] > free and last["end"] <= ins["begin"]:
                ins["waited_on"][context] = "transfer" if last["dma"] else "dependency"
            lane_end[context] = max(free, ins["end"])


_MAX_INT = 2**53  # the largest integer a JSON reader anywhere keeps exact; cycles, sizes and indices stay below it


def _is_int(value: Any) -> bool:
    """An integer (not a bool) a 64-bit column holds with room for sums: |value| <= 2**53."""
    return isinstance(value, int) and not isinstance(value, bool) and -_MAX_INT <= value <= _MAX_INT


__all__ = ["FORMAT", "engine_kind", "read_furiosa_schedule", "sniff"]

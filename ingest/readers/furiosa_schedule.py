"""FuriosaAI kernel compiler ``--dump-schedule`` JSON -> events -> engine slices in cycles.

The dump is ``{"instructions": [...], "tensors": [...]}``. An instruction has
``index`` (a number, or a string for synthetic syncs), ``tpe`` (``Main``, ``Sub``,
``Dma...``, ``Core``), ``lifetime {begin, end}`` in cycles, ``contexts``, a
``description`` whose source location follows ``--> path:line``,
``input_tensors``/``output_tensors`` (tensor indices) and a utilisation figure.
A tensor has ``index``, ``name``, ``size`` (bytes), ``address``, ``buffer_type``.

Events (`events.EventColumns`): each instruction is a SPAN on the lane of each of its contexts (the lane is the
context's name; its engine kind from the name: ``Dma`` -> dma_d2d, device memory <-> on-chip, ``Vector`` ->
vector, ``Main``/``Tensor``/``Contraction`` -> matrix, anything else: none named, drawn as compute on a lane of kind
other), times in cycles, ``correlation`` the instruction's index (string indices get numbers after the largest
numeric one), DMA bytes the sizes of the tensors it writes (else reads), and what the file says of it
(`events.Logged`: its source location, the tensors it reads and writes); one ANNOTATION, the schedule's region
(compiled, no wall time). Dependencies are implicit in the tensors: the ``dataflow`` rule (`rules`) finds them
(``depends_on``, producer correlations, a nullable extra column) and what each slice waited on (``waited_on``:
``transfer`` for a DMA producer, else ``dependency``), which is what the schedule summary attributes gaps and the
critical path to. The makespan is the last cycle.

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

from ..assemble import assemble
from ..errors import TraceFormatError
from ..events import EventColumns, EventKind, Logged, RegionFacts, Translated
from ..memory_lanes import TENSOR_COLUMNS
from ..schema import EngineKind, Mode, SliceKind, Source, TimeUnit
from ..trace import RunInfo, Trace
from .source import DEFAULT_CAPS, SizeCaps, read_json

FORMAT = "furiosa-schedule"
KNOWN_INSTRUCTION_KEYS = {"index", "tpe", "lifetime", "contexts", "description", "input_tensors", "output_tensors",
                          "utilization", "utilisation", "_comment"}  # fmt: skip
KNOWN_TOP_KEYS = {"instructions", "tensors", "_comment"}
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
    out = EventColumns()
    facts = RegionFacts(mode=Mode.COMPILED, tags=json.dumps({"makespan_cycles": str(makespan), "time_unit": "cycles"}),
                        timed=False)  # a schedule in cycles: no wall time  # fmt: skip
    out.add(EventKind.ANNOTATION, path.name.split(".")[0], "npu", None, 0, makespan, region_facts=out.region_facts(facts))
    for ins in sorted(instructions, key=lambda i: (i["begin"], i["id"])):
        said = out.log(Logged(call_site=ins["site"], reads=tuple(ins["inputs"]), writes=tuple(ins["outputs"])))
        for context in ins["contexts"]:
            kind = engine_kind(context)
            out.add(EventKind.SPAN, ins["name"], "npu", context, ins["begin"], ins["end"] - ins["begin"],
                    correlation=ins["id"], bytes=ins["bytes"] if kind is EngineKind.DMA_D2D else None, lane=context,
                    engine_kind=kind.value if kind is not EngineKind.OTHER else None, logged=said,
                    drawn_as=SliceKind.SYNC.value if isinstance(ins["index"], str) else None)  # fmt: skip
    return assemble(Translated(out, info, root_name=None, root_device="npu"))


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
    }  # fmt: skip


_MAX_INT = 2**53  # the largest integer a JSON reader anywhere keeps exact; cycles, sizes and indices stay below it


def _is_int(value: Any) -> bool:
    """An integer (not a bool) a 64-bit column holds with room for sums: |value| <= 2**53."""
    return isinstance(value, int) and not isinstance(value, bool) and -_MAX_INT <= value <= _MAX_INT


__all__ = ["FORMAT", "engine_kind", "read_furiosa_schedule", "sniff"]

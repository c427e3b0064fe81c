"""The dataflow rule: what each instruction of a static schedule read from and what its engine idled on.

The rule's statement is in `rules`; it fills `Findings.depends` and `Findings.waited` (`TRANSFER_WAIT`,
`DEPENDENCY_WAIT`).
"""

from __future__ import annotations

from .events import NONE, EventKind
from .linked import EventRule, Findings, Linked

TRANSFER_WAIT, DEPENDENCY_WAIT = "transfer", "dependency"  # what an engine of a schedule idled on


def _dataflow(linked: Linked, out: Findings) -> None:
    """A static schedule's dependencies and waits (module docstring: dataflow); an instruction is the events of one
    correlation id (one per engine it ran on)."""
    if not any(x.reads or x.writes for x in linked.logs):
        return
    a = linked.a
    instructions: dict[int, dict] = {}
    for row, x in linked.logged(EventKind.SPAN):  # a schedule's spans: its instructions, all of them on the lanes
        corr = int(a["correlation"][row])
        key = corr if corr != NONE else -1 - row
        begin = int(a["start_ns"][row])
        ins = instructions.setdefault(key, {"key": key, "rows": [], "begin": begin, "end": begin + int(a["dur_ns"][row]),
                                            "reads": x.reads, "writes": x.writes, "copy": False})  # fmt: skip
        ins["rows"].append(row)
        ins["copy"] |= (linked.texts[a["engine_kind"][row]] or "").startswith("dma")
    writers: dict[int, list[dict]] = {}
    for ins in instructions.values():
        for t in ins["writes"]:
            writers.setdefault(t, []).append(ins)
    lane_end: dict[int, int] = {}
    for ins in sorted(instructions.values(), key=lambda i: (i["begin"], i["key"])):
        producers = []
        for t in ins["reads"]:
            others = [w for w in writers.get(t, []) if w is not ins]
            candidates = [w for w in others if w["end"] <= ins["begin"]] or others
            if candidates:
                producers.append(max(candidates, key=lambda w: (w["end"], w["key"])))
        depends = tuple(sorted({p["key"] for p in producers if p["key"] >= 0}))
        last = max(producers, key=lambda w: w["end"], default=None)
        for row in ins["rows"]:
            if depends:
                out.depends[row] = depends
            lane = int(a["thread"][row])
            free = lane_end.get(lane, 0)
            if last is not None and free < last["end"] <= ins["begin"]:
                out.waited[row] = TRANSFER_WAIT if last["copy"] else DEPENDENCY_WAIT
            lane_end[lane] = max(free, ins["end"])



DATAFLOW_RULE = EventRule("dataflow", "a static schedule: what each instruction read from, and what its engine idled "
                          "on before it", (), _dataflow)

__all__ = ["DATAFLOW_RULE", "DEPENDENCY_WAIT", "TRANSFER_WAIT"]

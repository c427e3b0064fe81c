"""Counted, untimed and scheduled events (a dump's counters, a profile's totals, a compiler schedule) through the
linker, the rules and assemble: tiny hand-written events, every expected figure counted by hand."""

from __future__ import annotations

from portscope.ingest.assemble import assemble
from portscope.ingest.events import EventColumns, EventKind, Logged, RegionFacts, Translated
from portscope.ingest.rules import BOUNCE_RECORD, COUNTED_FALLBACK_RECORD, COUNTED_RECOMPILE_RECORD
from portscope.ingest.schema import Mode, Phase
from portscope.ingest.trace import RunInfo


def _regions(out: EventColumns) -> None:
    """Two regions, no root: "cold" [0, 100) (eager, cold, a stated peak of 5 B, tags) and "warm" [100, 150)
    with no wall time of its own (written 0)."""
    cold = out.region_facts(RegionFacts(mode=Mode.EAGER, phase=Phase.COLD, peak_memory_bytes=5, tags='{"a": 1}'))
    warm = out.region_facts(RegionFacts(mode=Mode.EAGER, phase=Phase.WARM, timed=False))
    out.add(EventKind.ANNOTATION, "cold", "dump", None, 0, 100, region_facts=cold)
    out.add(EventKind.ANNOTATION, "warm", "dump", None, 100, 50, region_facts=warm)


def test_counted_untimed_events_in_a_list_of_regions() -> None:
    out = EventColumns()
    _regions(out)
    untimed = out.log(Logged(timed=False))
    # cold: 3 device->host copies of 10 B in all (4 + 3 + 3), one 0-call host->device (no transfer row)
    out.add(EventKind.COPY, "v2h", "dump", "dump", 0, copy_kind=2, bytes=10, count=3, logged=untimed)
    # warm: an operator type placed 7 times on the AI CPU, one 2 times on an AI core (no signal)
    out.add(EventKind.PLACEMENT, "Cast", "dump", "dump", 100, unit="AI_CPU", device=0, count=7, logged=untimed)
    out.add(EventKind.PLACEMENT, "MatMul", "dump", "dump", 100, unit="AI_CORE", device=0, count=2, logged=untimed)
    trace = assemble(Translated(out, RunInfo(), root_name=None, root_device="rbln"))
    regions = trace["regions"].to_pydict()
    assert regions["name"] == ["cold", "warm"] and regions["parent_id"] == [None, None]
    assert regions["start_ns"] == [0, 100] and regions["dur_ns"] == [100, 0]
    assert regions["mode"] == ["eager", "eager"] and regions["phase"] == ["cold", "warm"]
    assert regions["peak_memory_bytes"] == [5, None] and regions["tags"] == ['{"a": 1}', None]
    t = trace["transfers"].to_pydict()
    assert t["direction"] == ["d2h"] * 3 and t["bytes"] == [4, 3, 3] and t["region_id"] == [0, 0, 0]
    assert t["start_ns"] == [None] * 3 and t["dur_ns"] == [None] * 3
    s = trace["signals"].to_pydict()
    assert list(zip(s["kind"], s["op_name"], s["count"], s["bytes"], s["region_id"], s["time_ns"], strict=True)) == [
        ("transfer/d2h", "v2h", 3, 10, 0, None), ("dispatch/cpu_fallback", "Cast", 7, 0, 1, None)]
    assert trace["engine_slices"].num_rows == 0  # untimed: not drawn


def test_a_dumps_bounces_fallbacks_and_recompiles() -> None:
    out = EventColumns()
    _regions(out)

    def counted(kind: EventKind, name: str | None, count: int, record: str, **fields: object) -> None:
        reason, fix = fields.pop("reason", None), fields.pop("fix", None)
        said = out.log(Logged(record=record, reason=reason, fix=fix, timed=False))  # type: ignore[arg-type]
        out.add(kind, name, "dump", "dump", 0, count=count, logged=said, **fields)

    counted(EventKind.PLACEMENT, "copy_d2d_host_bounce", 2, BOUNCE_RECORD, device=-1, bytes=64, fix="cast once")
    counted(EventKind.PLACEMENT, "v2v_batch_to_per_entry", 4, BOUNCE_RECORD, device=-1, bytes=8)  # bookkeeping: none
    counted(EventKind.PLACEMENT, "mystery_site", 1, BOUNCE_RECORD, device=-1, bytes=0)  # an unknown site: other
    counted(EventKind.PLACEMENT, "aten::neg", 5, COUNTED_FALLBACK_RECORD, device=-1, reason="dtype-not-fp16", fix="fp16")
    counted(EventKind.PLACEMENT, None, 1, COUNTED_FALLBACK_RECORD, device=-1, reason="not attributed to an operator")
    counted(EventKind.COMPILE, "aten::mm", 2, COUNTED_RECOMPILE_RECORD)
    trace = assemble(Translated(out, RunInfo(), root_name=None, root_device="rbln"))
    s = trace["signals"].to_pydict()
    got = sorted(zip(s["kind"], s["reason"], s["op_name"], s["count"], s["bytes"], s["note"], strict=True), key=str)
    assert got == sorted([
        ("host_bounce/dtype_cast", "copy_d2d_host_bounce", None, 2, 64, "cast once"),
        ("host_bounce/other", "mystery_site", None, 1, 0, None),
        ("dispatch/cpu_fallback", "dtype-not-fp16", "aten::neg", 5, 0, "fp16"),
        ("dispatch/cpu_fallback", "not attributed to an operator", None, 1, 0, None),
        ("dispatch/recompile", None, "aten::mm", 2, 0, None)], key=str)  # fmt: skip
    assert set(s["region_id"]) == {0} and trace["compiles"].num_rows == 0  # counts, not single compiles


def test_a_schedules_dependencies_and_waits() -> None:
    # Cycles. load [0, 100) on Dma writes tensor 1; mm [150, 250) on Main reads 1, writes 2; act [260, 270) on
    # Vector reads 2; add [300, 310) on Main reads 2. mm waited on the load (ended 100, after Main's nothing, before
    # 150): transfer; act on mm (ended 250 > Vector's 0, <= 260): dependency; add: Main was busy until 250 itself.
    out = EventColumns()
    facts = out.region_facts(RegionFacts(mode=Mode.COMPILED, timed=False))
    out.add(EventKind.ANNOTATION, "schedule", "npu", None, 0, 310, region_facts=facts)
    for name, lane, kind, start, end, corr, reads, writes in [
        ("load", "Dma", "dma_d2d", 0, 100, 0, (), (1,)), ("mm", "Main", "matrix", 150, 250, 1, (1,), (2,)),
        ("act", "Vector", "vector", 260, 270, 2, (2,), ()), ("add", "Main", "matrix", 300, 310, 3, (2,), ())]:  # fmt: skip
        said = out.log(Logged(call_site=f"m.py:{corr}", reads=reads, writes=writes))
        out.add(EventKind.SPAN, name, "npu", lane, start, end - start, correlation=corr, lane=lane, engine_kind=kind,
                bytes=4096 if kind == "dma_d2d" else None, logged=said)  # fmt: skip
    trace = assemble(Translated(out, RunInfo(), root_name=None, root_device="npu"))
    rows = {r["name"]: r for r in trace["engine_slices"].to_pylist()}
    assert {n: (r["waited_on"], r["depends_on"]) for n, r in rows.items()} == {
        "load": (None, None), "mm": ("transfer", [0]), "act": ("dependency", [1]), "add": (None, [1])}
    assert rows["load"]["bytes"] == 4096 and rows["mm"]["bytes"] is None and rows["act"]["call_site"] == "m.py:2"
    assert trace["regions"].to_pydict()["dur_ns"] == [0] and trace["signals"].num_rows == 0

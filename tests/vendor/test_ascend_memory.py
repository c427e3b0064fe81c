"""torch_npu / msprof memory tables (memory_record.csv, operator_memory.csv): the memory lanes, peaks and region
figures they convert into, worked out by hand in the comments (1 MiB = 1,048,576 B: the files' KB are 1024 B)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest.assemble import assemble
from portscope.ingest.convert import detect, load_any
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.events import EventKind, Translated
from portscope.ingest.memory import allocator_lanes, region_memory
from portscope.ingest.readers import memory_table
from portscope.ingest.readers.ascend_memory import (
    OPERATOR_FORMAT,
    RECORD_FORMAT,
    allocator_component,
    read_memory_record,
    read_operator_memory,
    translate_operator,
    translate_record,
)
from portscope.ingest.trace import Trace, read_trace

MIB = 1 << 20

# torch_npu: PTA is the lane (the framework's allocator); APP, GE and PTA+GE only figures. PTA's times from its
# first (…306.491 us, a TAB inside the quotes as torch_npu writes some cells): 0, 3_509, 13_759 ns; totals 1 MiB,
# 3.5 MiB, 2 MiB: the lane's own bytes are none (nothing before it), +2.5 MiB, -1.5 MiB. Reserved 2, 4, 4 MiB.
RECORD = (
    "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n"
    "APP,1704161511420300.000,,100.0,,,NPU:0\n"
    'PTA,"1704161511420306.491\t",1.0,2.0,1.0,187650,NPU:0\n'
    "PTA,1704161511420310.000,3.5,4.0,3.5,187650,NPU:0\n"
    "GE,1704161511420311.000,8.0,8.0,,,NPU:0\n"
    "PTA+GE,1704161511420311.000,11.5,12.0,,,NPU:0\n"
    "PTA,1704161511420320.250,2.0,4.0,2.0,187650,NPU:0\n"
)
# msprof: GE only, two devices, KB. From t0 = 100.5 us: npu:0 at 0, 1_500, 3_500 ns with 1, 3, 0 MiB; npu:1 at 500,
# 2_750 with 0.5, 2.5 MiB. Reserved 2, 4, 4 MiB and 2, 4 MiB.
MSPROF_RECORD = (
    "Device_id,Component,Timestamp(us),Total Allocated(KB),Total Reserved(KB),Device\n"
    "0,GE,100.5,1024,2048,NPU:0\n1,GE,101,512,2048,NPU:1\n0,GE,102,3072,4096,NPU:0\n"
    "1,GE,103.25,2560,4096,NPU:1\n0,GE,104,0,4096,NPU:0\n"
)
# torch_npu: t0 = …300.000 us. Row 3 (negative size, no name, allocation cells empty): a 512 KiB block allocated
# before the collection, released at 0 ns leaving 0 MiB. aten::empty: +1 MiB at 6_491 (total 1 MiB), released at
# 16_491 (total 0.5 MiB); aten::mm: +0.5 MiB at 8_000 (total 1.5 MiB), never released in the collection.
# Lane: 0.5 MiB before the first event (its total 0 minus its -0.5 MiB), then 0, 1, 1.5, 0.5 MiB.
OPERATOR = (
    "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),"
    "Allocation Total Allocated(MB),Allocation Total Reserved(MB),Allocation Total Active(MB),Release Total Allocated(MB),"
    "Release Total Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type\n"
    'aten::empty,1024,"1704161511420306.491\t","1704161511420316.491\t",,10.0,,1.0,2.0,1.0,0.5,2.0,0.5,187650,NPU:0\n'
    "aten::mm,512,1704161511420308.000,,,,,1.5,2.0,1.5,,,,187650,NPU:0\n"
    ",-512,,1704161511420300.000,,,,,,,0.0,2.0,,187650,NPU:0\n"
)
# msprof (no Release Time: Allocation Time + Duration). A 1 MiB block from before the collection is released at
# 11 us (negative size, its one time). From t0 = 10 us: MatMul +2 MiB at 0 (3 MiB), the old block -1 MiB at 1_000
# (2 MiB), Add +1 MiB at 2_000 (3 MiB), MatMul -2 MiB at 5_000 (1 MiB). Lane: 1 MiB before, 3, 2, 3, 1 MiB.
MSPROF_OPERATOR = (
    "Device_id,Name,Size(KB),Allocation Time(us),Duration(us),Allocation Total Allocated(KB),"
    "Allocation Total Reserved(KB),Release Total Allocated(KB),Release Total Reserved(KB),Device\n"
    "0,MatMul,2048,10,5,3072,4096,1024,4096,NPU:0\n0,,-1024,11,,,,2048,4096,NPU:0\n0,Add,1024,12,,3072,4096,,,NPU:0\n"
)


def _file(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _lane(trace: Trace, engine: str, name: str) -> list[tuple[int, int, int]]:
    slices = trace["engine_slices"].to_pylist()
    return [(s["start"], s["dur"], s["bytes"]) for s in slices if s["engine"] == engine and s["name"] == name]


def _devices(trace: Trace, region_id: int = 0) -> list[dict]:
    return region_memory(trace, region_id).devices.to_dict("records")


def test_memory_record_lane_holds_the_allocator(tmp_path: Path) -> None:
    path = _file(tmp_path, RECORD, "memory_record.csv")
    assert detect(path) == RECORD_FORMAT
    trace = load_any(path)
    assert trace.run_info.converted_from == RECORD_FORMAT and trace.run_info.devices == ["cpu", "npu:0"]
    assert _lane(trace, "memory npu:0", "allocated") == [(0, 3_509, MIB), (3_509, 10_250, 3_670_016), (13_759, 0, 2 * MIB)]
    assert _lane(trace, "memory npu:0", "reserved") == [(0, 3_509, 2 * MIB), (3_509, 10_250, 4 * MIB), (13_759, 0, 4 * MIB)]
    assert trace["regions"].column("peak_memory_bytes").to_pylist() == [3_670_016]
    # the first record's 1 MiB has no total before it: one allocation, the +2.5 MiB
    assert _devices(trace) == [{"device": "npu:0", "peak_bytes": 3_670_016, "live_at_exit_bytes": 2 * MIB, "allocations": 1,
                                "allocated_bytes": 2_621_440, "peak_reserved_bytes": 4 * MIB}]  # fmt: skip
    events = translate_record(path).events.table().to_pylist()
    assert [(e["kind"], e["start_ns"], e["bytes"], e["total_allocated"], e["device"]) for e in events] == [
        ("memory", 0, None, MIB, 0), ("memory", 3_509, 2_621_440, 3_670_016, 0), ("memory", 13_759, -1_572_864, 2 * MIB, 0)]
    components = {(c["component"], c["device"]): c for c in trace.run_info.extra["memory_components"]}
    assert {k: (c["records"], c["peak_allocated_bytes"], c["peak_reserved_bytes"], c["on_lane"]) for k, c in components.items()} == {
        ("APP", 0): (1, None, 100 * MIB, False), ("PTA", 0): (3, 3_670_016, 4 * MIB, True),
        ("GE", 0): (1, 8 * MIB, 8 * MIB, False), ("PTA+GE", 0): (1, 12_058_624, 12 * MIB, False)}  # fmt: skip
    assert any("'APP', 'GE', 'PTA+GE'" in m for m in trace.run_info.missing_signals)


def test_msprof_memory_record_a_lane_per_device(tmp_path: Path) -> None:
    trace = load_any(_file(tmp_path, MSPROF_RECORD, "memory_record_0.csv"))
    assert [lane.device for lane in allocator_lanes(trace)] == ["npu:0", "npu:1"]
    assert _lane(trace, "memory npu:0", "allocated") == [(0, 1_500, MIB), (1_500, 2_000, 3 * MIB), (3_500, 0, 0)]
    assert _lane(trace, "memory npu:1", "allocated") == [(500, 2_250, MIB // 2), (2_750, 750, 2_621_440)]
    assert trace["regions"].column("peak_memory_bytes").to_pylist() == [3 * MIB]  # the greatest of either device's
    assert _devices(trace) == [
        {"device": "npu:0", "peak_bytes": 3 * MIB, "live_at_exit_bytes": 0, "allocations": 1, "allocated_bytes": 2 * MIB,
         "peak_reserved_bytes": 4 * MIB},
        {"device": "npu:1", "peak_bytes": 2_621_440, "live_at_exit_bytes": 2_621_440, "allocations": 1,
         "allocated_bytes": 2 * MIB, "peak_reserved_bytes": 4 * MIB}]  # fmt: skip


def test_bom_crlf_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "memory_record.csv.gz"
    path.write_bytes(gzip.compress(("\ufeff" + RECORD.replace("\n", "\r\n")).encode()))
    assert detect(path) == RECORD_FORMAT
    trace = load_any(path)
    assert _lane(trace, "memory npu:0", "allocated") == [(0, 3_509, MIB), (3_509, 10_250, 3_670_016), (13_759, 0, 2 * MIB)]


def test_units_come_from_each_header(tmp_path: Path) -> None:
    # 0.5 GiB then 1.25 GiB at 0 and 500 ns on npu:2; reserved in bytes
    text = "Component,Timestamp(ns),Total Allocated(GB),Total Reserved(B),Device Type\nPTA,1000,0.5,1073741824,NPU:2\n" \
           "PTA,1500,1.25,2147483648,NPU:2\n"  # fmt: skip
    trace = read_memory_record(_file(tmp_path, text, "m.csv"))
    assert trace["regions"].column("device").to_pylist() == ["npu:2"]
    assert _lane(trace, "memory npu:2", "allocated") == [(0, 500, 1 << 29), (500, 0, 1_342_177_280)]
    assert _lane(trace, "memory npu:2", "reserved") == [(0, 500, 1 << 30), (500, 0, 1 << 31)]


@pytest.mark.parametrize(("components", "chosen"), [(["APP", "GE", "PTA"], "PTA"), (["APP", "GE"], "GE"),
                                                    (["APP", "PTA+GE"], "PTA+GE"), (["WORKSPACE", "X"], "WORKSPACE")])  # fmt: skip
def test_the_allocator_component(components: list[str], chosen: str) -> None:
    assert allocator_component(components) == chosen  # type: ignore[arg-type]


def test_operator_memory_allocations_and_releases(tmp_path: Path) -> None:
    path = _file(tmp_path, OPERATOR, "operator_memory.csv")
    assert detect(path) == OPERATOR_FORMAT
    trace = load_any(path)
    assert _lane(trace, "memory npu:0", "allocated") == [(0, 0, MIB // 2), (0, 6_491, 0), (6_491, 1_509, MIB),
                                                         (8_000, 8_491, 1_572_864), (16_491, 0, MIB // 2)]  # fmt: skip
    assert trace["regions"].column("peak_memory_bytes").to_pylist() == [1_572_864]
    assert _devices(trace) == [{"device": "npu:0", "peak_bytes": 1_572_864, "live_at_exit_bytes": MIB // 2, "allocations": 2,
                                "allocated_bytes": 1_572_864, "peak_reserved_bytes": 2 * MIB}]  # fmt: skip
    events = sorted(translate_operator(path).events.table().to_pylist(), key=lambda e: e["start_ns"])
    assert [(e["name"], e["start_ns"], e["bytes"], e["total_allocated"]) for e in events] == [
        (None, 0, -(MIB // 2), 0), ("aten::empty", 6_491, MIB, MIB), ("aten::mm", 8_000, MIB // 2, 1_572_864),
        ("aten::empty", 16_491, -MIB, MIB // 2)]  # fmt: skip
    assert trace["ops"].num_rows == 0  # no invented operator timings
    assert trace.run_info.extra["operator_memory"] == [
        {"name": "aten::empty", "blocks": 1, "allocated_bytes": MIB, "releases": 1},
        {"name": "aten::mm", "blocks": 1, "allocated_bytes": MIB // 2, "releases": 0},
        {"name": None, "blocks": 0, "allocated_bytes": 0, "releases": 1}]  # fmt: skip
    missing = trace.run_info.missing_signals
    assert "allocations outside the collection: 1 (allocation cells empty or negative)" in missing
    assert "releases outside the collection: 1 (release cells empty or negative)" in missing


def test_msprof_operator_memory_release_from_duration(tmp_path: Path) -> None:
    trace = read_operator_memory(_file(tmp_path, MSPROF_OPERATOR, "operator_memory_0.csv"))
    assert _lane(trace, "memory npu:0", "allocated") == [(0, 0, MIB), (0, 1_000, 3 * MIB), (1_000, 1_000, 2 * MIB),
                                                         (2_000, 3_000, 3 * MIB), (5_000, 0, MIB)]  # fmt: skip
    assert _devices(trace) == [{"device": "npu:0", "peak_bytes": 3 * MIB, "live_at_exit_bytes": MIB, "allocations": 2,
                                "allocated_bytes": 3 * MIB, "peak_reserved_bytes": 4 * MIB}]  # fmt: skip


def _kineto(tmp_path: Path) -> Path:
    """The msprof operator_memory events as Kineto [memory] instants, with the annotations of the test below."""

    def memory(ts: float, nbytes: int, total: int) -> dict:
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                "args": {"Bytes": nbytes, "Total Allocated": total, "Total Reserved": 4 * MIB, "Device Type": 1, "Device Id": 0}}  # fmt: skip

    events = [{"ph": "X", "cat": "user_annotation", "name": "whole", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
              {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 10.5, "dur": 3.0},
              memory(10.0, 2 * MIB, 3 * MIB), memory(11.0, -MIB, 2 * MIB), memory(12.0, MIB, 3 * MIB), memory(15.0, -2 * MIB, MIB)]  # fmt: skip
    return _file(tmp_path, json.dumps({"schemaVersion": 1, "traceEvents": events}), "kineto.json")


def test_same_memory_tables_as_kineto(tmp_path: Path) -> None:
    translated = translate_operator(_file(tmp_path, MSPROF_OPERATOR, "operator_memory.csv"))
    for name, start, dur in (("whole", 0, 5_000), ("step", 500, 3_000)):  # the Kineto file's annotations, from 10 us
        translated.events.add(EventKind.ANNOTATION, name, 1, 1, start, dur)
    ascend = assemble(Translated(translated.events, translated.run_info, "x", "npu:0", device_names={0: "npu:0"}))
    kineto = load_any(_kineto(tmp_path))
    # step [500, 3_500] ns holds the release at 1_000 (2 MiB) and Add's +1 MiB at 2_000 (3 MiB)
    for trace in (ascend, kineto):
        regions = {r["name"]: r for r in trace["regions"].to_pylist()}
        assert (regions["whole"]["peak_memory_bytes"], regions["step"]["peak_memory_bytes"]) == (3 * MIB, 3 * MIB)
        step = _devices(trace, regions["step"]["region_id"])[0]
        assert (step["peak_bytes"], step["live_at_exit_bytes"], step["allocations"], step["allocated_bytes"]) == (3 * MIB, 3 * MIB, 1, MIB)
    lanes = [[(s["name"], s["start"], s["dur"], s["bytes"]) for s in trace["engine_slices"].to_pylist() if s["engine"] == engine]
             for trace, engine in ((ascend, "memory npu:0"), (kineto, "memory cuda:0"))]  # fmt: skip
    assert len(lanes[0]) == 9 and lanes[0] == lanes[1]  # 5 allocated (a leading one) and 4 reserved slices


def test_report_memory_shows_the_peaks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.arrow"
    assert main(["convert", str(_file(tmp_path, RECORD, "memory_record.csv")), "-o", str(out)]) == 0
    assert read_trace(out).run_info.converted_from == RECORD_FORMAT
    capsys.readouterr()
    assert main(["report", "--memory", "--json", str(out)]) == 0
    (region,) = json.loads(capsys.readouterr().out)["regions"]
    assert (region["region"], region["devices"][0]["peak_bytes"]) == ("memory_record.csv", 3_670_016)
    assert main(["report", "--memory", str(out)]) == 0
    assert "npu:0          3.7 MB        2.1 MB            1     2.6 MB         4.2 MB" in capsys.readouterr().out


def test_npu_module_mem_is_not_a_memory_record(tmp_path: Path) -> None:
    path = _file(tmp_path, "Device_id,Component,Timestamp(us),Total Reserved(KB),Device\n0,HCCL,1,2,NPU:0\n", "npu_module_mem.csv")
    with pytest.raises(TraceFormatError, match="unrecognised"):
        detect(path)


HEAD = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n"
OP_HEAD = "Name,Size(KB),Allocation Time(us),Release Time(us),Allocation Total Allocated(MB),Device Type\n"


@pytest.mark.parametrize(("fmt", "text", "problems"), [
    (RECORD_FORMAT, "Component,Total Allocated(MB)\nPTA,1\n", ["the header lacks the column 'timestamp'"]),
    (OPERATOR_FORMAT, "Name,Allocation Time(us)\nx,1\n", ["the header lacks the column 'size'",
                                                          "the header lacks the column 'allocation total allocated'"]),
    (RECORD_FORMAT, HEAD.replace("(MB)", "(TB)", 1) + "PTA,1,2,3,NPU:0\n",
     ["the column 'Total Allocated(TB)' gives the unit 'TB': a size in one of b, kb, kib, mb, mib, gb, gib"]),
    (RECORD_FORMAT, HEAD.replace("(us)", "") + "PTA,1,2,3,NPU:0\n",
     ["the column 'Timestamp' gives no unit: a time in one of ns, us, µs, ms"]),
    (RECORD_FORMAT, HEAD + "PTA,1,2,3,NPU:0\nPTA,2,lots,3,NPU:0\nPTA,x,1,nan,NPU:0\n",
     ["2 of 3 rows are malformed", "line 3: Total Allocated(MB) is 'lots', not a number",
      "line 4: Timestamp(us) is 'x', not a number", "line 4: Total Reserved(MB) is 'nan', not a number"]),
    (RECORD_FORMAT, HEAD + "PTA,1,2,3\nPTA,1e30,2,3,NPU:0\nPTA,1,2,3,GPU\n",
     ["3 of 3 rows are malformed", "line 2: 4 cells, the header has 5", "line 3: Timestamp(us) '1e30' is out of range",
      "line 4: the device 'GPU' is neither NPU:<index>, CPU nor an index"]),
    (OPERATOR_FORMAT, OP_HEAD + "a,,1,2,3,NPU:0\n", ["1 of 1 rows are malformed", "line 2: no Size(KB)"]),
    (RECORD_FORMAT, HEAD, ["the table has a header but no rows: nothing to convert"]),
    (RECORD_FORMAT, HEAD + "PTA,,1,2,NPU:0\nPTA,-5,1,2,NPU:0\n",
     ["none of its 2 rows has a time and a total allocated: nothing to convert"]),
])  # fmt: skip
def test_bad_input_one_error_naming_file_and_problems(tmp_path: Path, fmt: str, text: str, problems: list[str]) -> None:
    path = _file(tmp_path, text, "bad.csv")
    with pytest.raises(TraceFormatError) as info:
        load_any(path, format=fmt)
    assert info.value.path == str(path)
    assert [p for p in info.value.problems if not p.startswith("(the header has")] == problems


def test_not_utf8_names_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_bytes(HEAD.encode() + b"PTA,1,\xff,2,NPU:0\n")  # the header's 75 bytes, then "PTA,1," and the bad one
    with pytest.raises(TraceFormatError, match=r"m\.csv: not UTF-8 text \(invalid byte at offset 81\)"):
        read_memory_record(path)


def test_read_in_small_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = "".join(f"{('PTA', 'GE', 'APP')[i % 3]},{i},{i % 7},8,NPU:{i % 2}\n" for i in range(40))
    path = _file(tmp_path, HEAD + rows, "m.csv")
    whole = read_memory_record(path)
    monkeypatch.setattr(memory_table, "BLOCK_BYTES", 1)  # four header lines a block: a dozen rows
    small = read_memory_record(path)
    assert small["engine_slices"].equals(whole["engine_slices"]) and small.run_info.extra == whole.run_info.extra
    assert whole["engine_slices"].num_rows == 2 * 14  # PTA's 14 rows (i = 0, 3, ... 39), allocated and reserved
    bad = _file(tmp_path, HEAD + rows + "PTA,41,x,8,NPU:0\nPTA,42\nPTA,43,2,y,NPU:0\n", "bad.csv")
    with pytest.raises(TraceFormatError) as info:
        read_memory_record(bad)
    assert info.value.problems == ["3 of 43 rows are malformed", "line 42: Total Allocated(MB) is 'x', not a number",
                                   "line 43: 2 cells, the header has 5", "line 44: Total Reserved(MB) is 'y', not a number"]  # fmt: skip

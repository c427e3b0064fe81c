"""Kineto traces as other tools rewrite them: spans as B/E pairs, numbers as floats, an older instant phase, a byte order
mark. Each expected figure is counted by hand from the events written below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.convert import load_any
from portscope.ingest.errors import TraceFormatError
from portscope.ingest.readers import chrome_stream


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _mem(ts: float, total: object, device_type: object = 1, device_id: object = 0, ph: str = "i") -> dict:
    return {"ph": ph, "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Bytes": 100, "Total Allocated": total, "Device Type": device_type, "Device Id": device_id}}


# One step [0, 100): aten::to [10, 30) copies 4096 bytes host->device (cudaMemcpyAsync [12, 20), its copy on stream 7);
# aten::item [40, 60) waits in cudaStreamSynchronize [45, 55) after a 4-byte device->host copy (cudaMemcpyAsync
# [42, 44)); aten::mm [70, 80) launches a kernel. Expected: 1 h2d of 4096, 1 d2h of 4, 1 sync at aten::item, 3 ops.
BASE = [
    _x("user_annotation", "step", 0, 100),
    _x("cpu_op", "aten::to", 10, 20), _x("cuda_runtime", "cudaMemcpyAsync", 12, 8, correlation=1),
    _x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 15, 4, tid=7, pid=0, device=0, stream=7, correlation=1,
       bytes=4096),
    _x("cpu_op", "aten::item", 40, 20), _x("cuda_runtime", "cudaMemcpyAsync", 42, 2, correlation=2),
    _x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 43, 1, tid=7, pid=0, device=0, stream=7, correlation=2, bytes=4),
    _x("cuda_runtime", "cudaStreamSynchronize", 45, 10),
    _x("cpu_op", "aten::mm", 70, 10), _x("cuda_runtime", "cudaLaunchKernel", 71, 2, correlation=3),
    _x("kernel", "gemm", 74, 5, tid=7, pid=0, device=0, stream=7, correlation=3),
]  # fmt: skip


def _write(path: Path, events: list[dict], prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1).encode())
    return path


def _figures(path: Path) -> tuple[int, list[tuple[str, int]], list[tuple[str, str]]]:
    trace = load_any(path)
    t, s = trace["transfers"].to_pydict(), trace["signals"].to_pydict()
    syncs = sorted((o, r) for k, o, r in zip(s["kind"], s["op_name"], s["reason"], strict=True) if k == "sync")
    return trace["ops"].num_rows, sorted(zip(t["direction"], t["bytes"], strict=True)), syncs


EXPECTED = (3, [("d2h", 4), ("h2d", 4096)], [("aten::item", "item")])


def _as_begin_end(events: list[dict]) -> list[dict]:
    """Each X event as a B event (its args) and an E event at its end (no name, no args), in time order."""
    out = []
    for ev in events:
        begin = {k: v for k, v in ev.items() if k != "dur"} | {"ph": "B"}
        out += [(ev["ts"], 1, begin), (ev["ts"] + ev["dur"], 0, {"ph": "E", "pid": ev["pid"], "tid": ev["tid"],
                                                                 "ts": ev["ts"] + ev["dur"]})]
    return [ev for _, _, ev in sorted(out, key=lambda t: (t[0], t[1]))]  # an end before a begin at the same time


def test_the_hand_written_trace_gives_the_figures_counted_by_hand(tmp_path: Path) -> None:
    assert _figures(_write(tmp_path / "x.json", BASE)) == EXPECTED


# a metadata event whose "dur" is text: its slice is read as dicts (the reader's general path), not as typed events
AS_DICTS = {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "dur": "n/a", "args": {"name": "main"}}


@pytest.mark.parametrize(("chunk", "general"), [(None, False), (300, False), (None, True)])
def test_spans_written_as_begin_end_pairs_read_as_their_x_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 chunk: int | None, general: bool) -> None:
    if chunk:  # pairs split across slices of the streamed file
        monkeypatch.setattr(chrome_stream, "CHUNK_BYTES", chunk)
    path = _write(tmp_path / "be.json", [AS_DICTS] * general + _as_begin_end(BASE))
    assert _figures(path) == EXPECTED
    assert not any("B/E" in m for m in load_any(path).run_info.missing_signals)


@pytest.mark.parametrize("general", [False, True])
def test_an_end_written_before_its_begin_pairs_by_time(tmp_path: Path, general: bool) -> None:
    # the step's E (at 100 µs) written first in the file, before every B (a tool that merged per-thread buffers):
    # paired with the step's B by time, the figures as before, nothing unpaired
    events = _as_begin_end(BASE)
    step_end = max(i for i, ev in enumerate(events) if ev["ph"] == "E" and ev["ts"] == 100)
    events = [events[step_end], *events[:step_end], *events[step_end + 1 :]]
    path = _write(tmp_path / "early_end.json", [AS_DICTS] * general + events)
    assert _figures(path) == EXPECTED
    trace = load_any(path)
    assert not any("B/E" in m for m in trace.run_info.missing_signals)
    regions = trace["regions"].to_pydict()
    assert dict(zip(regions["name"], regions["dur_ns"], strict=True))["step"] == 100_000


def test_begin_end_events_without_their_pair_are_said_not_read(tmp_path: Path) -> None:
    # an E on a thread with nothing open, and a B never ended: two events not read, said so; the rest as before
    lone = [{"ph": "E", "pid": 1, "tid": 3, "ts": 5}, {"ph": "B", "cat": "cpu_op", "name": "aten::add", "pid": 1,
                                                      "tid": 4, "ts": 90, "args": {}}]  # fmt: skip
    path = _write(tmp_path / "lone.json", [*_as_begin_end(BASE), *lone])
    assert _figures(path) == EXPECTED
    said = [m for m in load_any(path).run_info.missing_signals if "B/E" in m]
    assert said == ["spans of 2 begin/end (B/E) events without their pair (not read)"]


def test_memory_numbers_written_as_floats_and_the_older_instant_phase(tmp_path: Path) -> None:
    # totals 1000.0 then 1500.0 on cuda:0 (Device Type 1.0, Device Id 0.0) inside the step; the second in phase "I"
    path = _write(tmp_path / "mem.json", [*BASE, _mem(20, 1000.0, 1.0, 0.0), _mem(50, 1500.0, 1.0, 0.0, ph="I")])
    regions = load_any(path)["regions"].to_pydict()
    assert dict(zip(regions["name"], regions["peak_memory_bytes"], strict=True)) == {"mem.json": 1500, "step": 1500}


def test_memory_events_without_running_totals_are_said_to_lack_them(tmp_path: Path) -> None:
    events = [*BASE, *({k: v for k, v in m.items()} | {"args": {"Bytes": 100, "Device Type": 1, "Device Id": 0}}
                       for m in (_mem(20, 0), _mem(50, 0)))]  # fmt: skip
    info = load_any(_write(tmp_path / "old_mem.json", events)).run_info
    assert "memory peaks (its 2 [memory] events carry no 'Total Allocated')" in info.missing_signals
    assert not any(m.startswith("memory (recorded without") for m in info.missing_signals)


def test_a_trace_led_by_a_utf8_byte_order_mark_converts(tmp_path: Path) -> None:
    assert _figures(_write(tmp_path / "bom.json", BASE, prefix=b"\xef\xbb\xbf")) == EXPECTED


def test_correlation_ids_written_as_text_or_floats_on_one_side_still_link(tmp_path: Path) -> None:
    # the calls keep their int ids; the copies say "1" and 2.0: each copy still has its call (and no call is a copy
    # of its own that launched nothing, which would count a third transfer of unknown direction)
    events = [dict(ev, args=dict(ev["args"], correlation={1: "1", 2: 2.0}.get(ev["args"].get("correlation"),
                                                                                   ev["args"].get("correlation"))))
              if ev["cat"] == "gpu_memcpy" else ev for ev in BASE]  # fmt: skip
    assert [ev["args"]["correlation"] for ev in events if ev["cat"] == "gpu_memcpy"] == ["1", 2.0]
    assert _figures(_write(tmp_path / "ids.json", events)) == EXPECTED


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_trace_python_wrote_with_nan_or_infinity_converts(tmp_path: Path, value: float) -> None:
    # Python's json.dump writes NaN / Infinity (not JSON); here in an args field no rule reads, in the step's range
    events = [dict(ev, args=dict(ev["args"], score=value)) if ev["name"] == "step" else ev for ev in BASE]
    path = _write(tmp_path / "nan.json", events)
    assert b"NaN" in path.read_bytes() or b"Infinity" in path.read_bytes()
    assert _figures(path) == EXPECTED


def test_an_integer_past_64_bits_beside_an_infinity_is_still_refused(tmp_path: Path) -> None:
    # the slower reading of NaN / Infinity must not let through what the fast one refuses (found by fuzzing)
    path = tmp_path / "big.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, '
                    '"tid": -9223372036854775809, "ts": Infinity, "dur": 0.0, "args": {}}]}')
    with pytest.raises(TraceFormatError, match="big.json"):
        load_any(path)


@pytest.mark.parametrize("general", [False, True])  # the typed decoder's path, or the dicts' (AS_DICTS in the slice)
def test_device_numbers_written_as_floats_name_the_device_by_its_integer(tmp_path: Path, general: bool) -> None:
    # a tool that writes every number as a float: "device": 0.0 (and on the dicts' path, where a float pid is read,
    # "pid": 0.0 too); a device 0.5 is no device number: read as absent, the row's pid (0) names it
    rows = [dict(ev, args=dict(ev["args"], device=0.0), pid=0.0 if general else 0) if ev["cat"] == "gpu_memcpy"
            else dict(ev, args=dict(ev["args"], device=0.5)) if ev["cat"] == "kernel" else ev for ev in BASE]  # fmt: skip
    path = _write(tmp_path / "float_dev.json", [AS_DICTS] * general + rows)
    trace = load_any(path)
    assert trace.run_info.devices == ["cpu", "cuda:0"]
    regions = trace["regions"].to_pydict()
    assert dict(zip(regions["name"], regions["device"], strict=True))["float_dev.json"] == "cuda:0"
    assert _figures(path) == EXPECTED


@pytest.mark.parametrize("general", [False, True])
def test_device_rows_naming_no_device_or_a_digit_string_are_device_work(tmp_path: Path, general: bool) -> None:
    # the copies name no device and no process (pid, device removed); the kernel's device is the text "0": all three
    # are cuda:0's work (not the host's), and the two unnamed rows are said
    rows = [{k: v for k, v in dict(ev, args={k: v for k, v in ev["args"].items() if k != "device"}).items() if k != "pid"}
            if ev["cat"] == "gpu_memcpy" else dict(ev, args=dict(ev["args"], device="0")) if ev["cat"] == "kernel"
            else ev for ev in BASE]  # fmt: skip
    path = _write(tmp_path / "no_dev.json", [AS_DICTS] * general + rows)
    trace = load_any(path)
    assert trace.run_info.devices == ["cpu", "cuda:0"]
    assert trace["ops"].column("device").to_pylist() == ["cuda:0"] * 3  # each op launched work on cuda:0
    assert "device numbers of 2 device events (no device, no process named: read as device 0)" in trace.run_info.missing_signals
    assert _figures(path) == EXPECTED


def test_copies_some_of_which_carry_no_readable_size_are_counted(tmp_path: Path) -> None:
    # the d2h copy's bytes are 1e30 (past int64: no size); the h2d copy keeps its 4096
    rows = [dict(ev, args=dict(ev["args"], bytes=1e30)) if ev["name"].startswith("Memcpy DtoH") else ev for ev in BASE]
    trace = load_any(_write(tmp_path / "sizes.json", rows))
    assert "transfer bytes of 1 of 2 copies (their memcpy events carry no size, or one past 2^63)" in trace.run_info.missing_signals
    t = trace["transfers"].to_pydict()
    assert sorted(zip(t["direction"], t["bytes"], strict=True)) == [("d2h", 0), ("h2d", 4096)]  # 0: no size (FORMAT.md)

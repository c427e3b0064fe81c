"""Generic Chrome JSON as strangers' tools write it: a bare array left unclosed by a process that was killed, and
'B'/'E' events written out of time order. Inputs and expected rows written by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.errors import TraceFormatError
from portscope.ingest.readers import chrome_events, chrome_stream
from portscope.ingest.readers.chrome_events import collect
from portscope.ingest.readers.chrome_generic import read_chrome

WHOLE = ('[{"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 120, "dur": 30},\n'
         ' {"ph": "X", "name": "w2", "pid": 1, "tid": 1, "ts": 160, "dur": 30}')  # fmt: skip
SLICES = [("work", 0, 30_000), ("w2", 40_000, 30_000)]  # t0 = 120 us
DROPPED = ("1 event cut mid-way at the end of the file (the JSON array is not closed: the recording stopped "
           "mid-write): dropped")  # fmt: skip


def _slices(path: Path) -> tuple[list[tuple[str, int, int]], list[str]]:
    trace = read_chrome(path)
    rows = sorted((s["name"], s["start"], s["dur"]) for s in trace["engine_slices"].to_pylist())
    return sorted(rows, key=lambda r: r[1]), [m for m in trace.run_info.missing_signals if "cut" in m]


@pytest.mark.parametrize("chunk", [None, 64])  # 64: the file read in pieces (a big file's path)
@pytest.mark.parametrize(("end", "said"), [
    (",\n", []),  # what a killed writer leaves: each event followed by its comma
    ("", []),  # no ']' and no comma
    (',\n {"ph": "X", "name": "w3", "pid": 1, "ti', [DROPPED]),  # the last event cut mid-way
    (',\n {"ph": "X", "name": "w3 }, {\\"x', [DROPPED]),  # cut inside a string that looks like event starts
    (',\n {"ph": "X", "name": "w3", "args": {"list": [1, 2]', [DROPPED]),  # cut where a ']' ends the file
])  # fmt: skip
def test_an_unclosed_array_reads_its_whole_events_and_says_a_cut_one_was_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int | None, end: str, said: list[str]) -> None:  # fmt: skip
    if chunk:
        monkeypatch.setattr(chrome_stream, "CHUNK_BYTES", chunk)
    path = tmp_path / "killed.json"
    path.write_text(WHOLE + end)
    assert _slices(path) == (SLICES, said)


def test_a_closed_array_says_nothing_was_cut(tmp_path: Path) -> None:
    path = tmp_path / "closed.json"
    path.write_text(WHOLE + "]")
    assert _slices(path) == (SLICES, [])


def test_an_object_cut_short_is_still_refused(tmp_path: Path) -> None:
    # only the array format's ']' is optional: a Kineto (object) file cut short is refused, naming the file
    path = tmp_path / "cut_kineto.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [\n  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, '
                    '"tid": 1, "ts": 10, "dur": 5, "args": {}},\n  {"ph": "X", "cat": "cpu_op", "na')
    with pytest.raises(TraceFormatError, match=r"cut_kineto\.json: not valid JSON"):
        read_chrome(path)


def _be(ph: str, ts: int, name: str = "", tid: int = 1, **extra: object) -> dict:
    return {"ph": ph, "name": name, "pid": 1, "tid": tid, "ts": ts, **extra}


def test_an_end_written_before_its_begin_pairs_by_time(tmp_path: Path) -> None:
    path = tmp_path / "e_before_b.json"
    path.write_text(json.dumps([_be("E", 200, "step"), _be("B", 100, "step"),
                                {"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 120, "dur": 30}]))  # fmt: skip
    trace = read_chrome(path)
    rows = sorted((s["engine"], s["name"], s["start"], s["dur"]) for s in trace["engine_slices"].to_pylist())
    assert rows == [("pid 1 / tid 1", "step", 0, 100_000), ("pid 1 / tid 1", "work", 20_000, 30_000)]  # t0 = 100 us
    assert trace.run_info.extra["unmatched_begins"] == 0


# tid 1 out of order (sends the file to the pairing by time); tid 2 in order, with an end and a begin at 400 us:
# in file order the end closes "a" first, then "b" opens (a stable sort keeps them so); one "c" never ended
OUT_OF_ORDER = [_be("B", 100, "outer"), _be("E", 300), _be("E", 250), _be("B", 200, "inner"),
                _be("B", 300, "a", tid=2), _be("E", 400, tid=2), _be("B", 400, "b", tid=2), _be("E", 500, tid=2),
                _be("B", 600, "c", tid=2)]  # fmt: skip


def test_pairs_by_time_keep_file_order_at_equal_times(tmp_path: Path) -> None:
    path = tmp_path / "merged.json"
    path.write_text(json.dumps(OUT_OF_ORDER))
    trace = read_chrome(path)
    rows = sorted((s["engine"], s["name"], s["start"], s["dur"]) for s in trace["engine_slices"].to_pylist())
    assert rows == [("pid 1 / tid 1", "inner", 100_000, 50_000), ("pid 1 / tid 1", "outer", 0, 200_000),
                    ("pid 1 / tid 2", "a", 200_000, 100_000), ("pid 1 / tid 2", "b", 300_000, 100_000)]  # fmt: skip
    assert trace.run_info.extra["unmatched_begins"] == 1


def test_an_end_without_any_begin_is_still_refused_when_pairing_by_time(tmp_path: Path) -> None:
    path = tmp_path / "lone.json"
    path.write_text(json.dumps([*OUT_OF_ORDER, _be("E", 50, "lone", tid=3)]))
    with pytest.raises(TraceFormatError, match=r"event 9 \('lone'\): an 'E' without a matching 'B' on its thread"):
        read_chrome(path)


def test_pairs_by_time_keep_their_args_when_spilled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the spans a reader keeps args of (a number column too), paired after the last batch, columns spilled by 2 rows
    monkeypatch.setattr(chrome_events, "HOLD_ROWS", 2)
    events = [_be("E", 30), _be("B", 10, "s", args={"k": 7, "t": "x"}), _be("E", 20, tid=2),
              _be("B", 5, "u", tid=2, args={"k": 8}), {"ph": "X", "name": "w", "pid": 1, "tid": 3, "ts": 1, "dur": 1}]
    path = tmp_path / "args.json"
    path.write_text(json.dumps(events))
    ev = collect(path, keep_args=("k", "t"), number_args=("k",))
    try:
        n = len(ev)
        rows = [(ev.text(int(ev.read("name", 0, n)[i])), int(ev.read("start", 0, n)[i]), int(ev.read("dur", 0, n)[i]),
                 int(ev.numbers["k"].read(0, n)[i]), int(ev.read("args", 0, n)[i])) for i in range(n)]  # fmt: skip
        rows = [(name, start, dur, k, ev.text(a) if a >= 0 else None) for name, start, dur, k, a in rows]
    finally:
        ev.close()
    assert sorted(rows) == [("s", 10_000, 20_000, 7, {"t": "x"}), ("u", 5_000, 15_000, 8, None),
                            ("w", 1_000, 1_000, chrome_events.NO_NUMBER, None)]  # fmt: skip

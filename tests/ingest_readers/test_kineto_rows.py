"""GPU Kineto traces in less memory: runtime calls and device work kept as columns, read back as the tuples they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.readers.kineto import read_kineto
from portscope.ingest.readers.kineto_rows import DEVICE_FIELDS, RUNTIME_FIELDS, RowColumns
from portscope.ingest.readers.kineto_stream import collect_file

# One thread: operator "aten::mm" [0, 10) launches a kernel (runtime call [2, 3), correlation 7) and
# "aten::copy_" [20, 30) a host-to-device copy of 64 bytes (runtime call [21, 22), correlation 8);
# a runtime call outside any operator [40, 41) with correlation 9 launches a memset on stream 9.
EVENTS = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
     "args": {"correlation": 7, "External id": 3}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 20, "dur": 10},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 21, "dur": 1,
     "args": {"correlation": 8, "External id": 4}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 1, "ts": 40, "dur": 1,
     "args": {"correlation": 9}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 4,
     "args": {"device": 0, "stream": 7, "correlation": 7}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 23, "dur": 2,
     "args": {"device": 0, "stream": 7, "correlation": 8, "bytes": 64}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 9, "ts": 42, "dur": 1,
     "args": {"device": 0, "stream": 9, "correlation": 9, "bytes": 32}},
]


def test_rows_read_back_as_the_tuples_appended() -> None:
    rows = RowColumns(RUNTIME_FIELDS)
    appended = [
        (2.0, 1.0, "cudaLaunchKernel", 1, 1, 7, 3, None, None),
        (21.5, 0.25, "cudaLaunchKernel", "p", 1, None, 2**63 - 1, 64, 1),
        (40.0, 1.0, "x", 1, True, "c7", -(2**63), [1], None),  # values no column holds as is: kept aside
    ]
    for row in appended:
        rows.append(row)
    assert len(rows) == 3 and rows == appended and list(rows) == appended
    assert rows[1] == (21.5, 0.25, "cudaLaunchKernel", "p", 1, None, 2**63 - 1, 64, 1)
    assert rows[-1][4] is True and rows[-1][5] == "c7" and rows[-1][6] == -(2**63) and rows[-1][7] == [1]
    with pytest.raises(IndexError):
        rows[3]
    device = RowColumns(DEVICE_FIELDS)
    device.append((5.0, 4.0, "kernel", "gemm", {"a": 1}, 7, 7, None))  # an unhashable device id
    assert device == [(5.0, 4.0, "kernel", "gemm", {"a": 1}, 7, 7, None)]
    assert rows != device


def test_a_gpu_trace_is_collected_as_columns(tmp_path: Path) -> None:
    source = tmp_path / "gpu.json"
    source.write_text(json.dumps({"schemaVersion": 1, "traceEvents": EVENTS}))
    events, lanes = collect_file(source)
    assert lanes is None and isinstance(events.runtime, RowColumns) and isinstance(events.device, RowColumns)
    assert list(events.runtime) == [
        (2.0, 1.0, "cudaLaunchKernel", 1, 1, 7, 3, None, None),
        (21.0, 1.0, "cudaMemcpyAsync", 1, 1, 8, 4, None, None),
        (40.0, 1.0, "cudaMemsetAsync", 1, 1, 9, None, None, None),
    ]
    assert list(events.device) == [
        (5.0, 4.0, "kernel", "gemm", 0, 7, 7, None),
        (23.0, 2.0, "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 8, 64),
        (42.0, 1.0, "gpu_memset", "Memset (Device)", 0, 9, 9, 32),
    ]

    trace = read_kineto(source, sliced=True)
    ops = trace["ops"].to_pydict()
    assert ops["name"] == ["aten::mm", "aten::copy_"] and ops["placement"] == ["device", "device"]
    calls = trace["runtime_calls"].to_pydict()
    assert calls["op_id"] == [0, 1, None] and calls["correlation"] == [7, 8, 9]
    assert calls["start_ns"] == [2000, 21000, 40000]
    lanes_ = trace["engine_slices"].to_pydict()
    device_rows = [(e, n, s, d, o, c) for e, n, s, d, o, c in zip(lanes_["engine"], lanes_["name"], lanes_["start"], lanes_["dur"],
                                                                 lanes_["op_id"], lanes_["correlation"], strict=True) if e != "host"]  # fmt: skip
    assert device_rows == [
        ("stream 7", "gemm", 5000, 4000, 0, 7),
        ("DMA h2d", "Memcpy HtoD (Pageable -> Device)", 23000, 2000, 1, 8),
        ("stream 9", "Memset (Device)", 42000, 1000, None, 9),
    ]
    transfers = trace["transfers"].to_pydict()
    assert transfers["bytes"] == [64] and transfers["op_id"] == [1] and transfers["direction"] == ["h2d"]


def test_signature_cache_is_bounded_and_keeps_the_shapes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from portscope.ingest.readers import kineto_stream

    # older Kineto's numbered fields are cut from the keys; a per-call number no key cuts ("Call id", made up) makes
    # every op's key its own
    def op(i: int, dims: list) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5,
                "args": {"External id": i, "Profiler Event Index": i, "Call id": i, "Input Dims": dims,
                         "Input type": ["float"] * len(dims)}}  # fmt: skip

    monkeypatch.setattr(kineto_stream, "_SIGNATURE_KEYS", 1)
    collector = kineto_stream.Collector(tmp_path / "old.json", {})
    for events in ([op(0, [[2, 3]]), op(1, [[4]])], [op(2, [[2, 3]]), op(3, [])]):  # two slices of the events array
        collector.add_typed(collector.decode(json.dumps(events).encode()))
        assert len(collector._signatures) == 2  # the second slice found 2 (> 1) keys and started afresh: not 4
    ops = collector.finish().ops
    # float32 [2, 3]: 24 bytes; [4]: 16 bytes; none: 0
    assert [(o[6], o[9]) for o in ops] == [("2x3", 24), ("4", 16), ("2x3", 24), ("", 0)]


def test_builder_encodes_text_columns_in_order_of_first_appearance() -> None:
    from portscope.ingest.builder import TableBuilder
    from portscope.ingest.errors import ColumnValueError

    lanes = TableBuilder("engine_slices")
    for engine, name in [("stream 7", "gemm"), ("DMA h2d", "copy"), ("stream 7", "relu"), ("stream 7", "gemm")]:
        lanes.append(engine=engine, engine_kind="stream", kind="compute", name=name, start=0, dur=1)
    table = lanes.build()
    engine, name, module = (table.column(c).chunk(0) for c in ("engine", "name", "module"))
    assert engine.dictionary.to_pylist() == ["stream 7", "DMA h2d"] and engine.indices.to_pylist() == [0, 1, 0, 0]
    assert name.dictionary.to_pylist() == ["gemm", "copy", "relu"] and name.indices.to_pylist() == [0, 1, 2, 0]
    assert module.null_count == 4 and module.dictionary.to_pylist() == []
    wrong = TableBuilder("engine_slices")
    wrong.append(engine=7, engine_kind="stream", kind="compute", name="k", start=0, dur=1)  # a lane name not text
    with pytest.raises(ColumnValueError, match=r"engine_slices\.engine"):
        wrong.build()


def test_rows_spill_past_a_slice_and_read_back_in_order() -> None:
    rows = RowColumns(RUNTIME_FIELDS[:8], spill_rows=2)
    appended = [
        (1.0, 2.0, "cudaLaunchKernel", 1, 1, 10, 3, None),
        (3.5, 1.0, "cudaMemcpyAsync", 1, 2, 11, None, 64),
        (5.0, 0.5, "cudaLaunchKernel", 1, 1, "x", 4, 2**64),  # an id that is not an int64, a size too big: kept aside
        (6.0, 0.5, ["unhashable"], 1, 1, None, None, 8),
        (7.0, 1.5, "cudaStreamSynchronize", 1, 2, 12, 5, None),
    ]
    for row in appended:
        rows.append(row)
    assert len(rows) == 5 and rows._spilled_rows == 4  # two slices of 2 written out, one row held
    assert list(rows) == appended  # iteration reads the slices back without loading them
    firsts = [(lo, part[0].tolist()) for lo, part in rows.chunks(3)]
    assert firsts == [(0, [1.0, 3.5]), (2, [5.0, 6.0]), (4, [7.0])]  # no chunk crosses a slice
    assert rows[2] == appended[2] and rows[-1] == appended[-1]  # indexing loads them back first
    assert rows._spilled_rows == 0 and list(rows) == appended


def test_rows_extended_by_columns_read_back_as_the_tuples_given() -> None:
    """extend() takes columns and gives the rows append() would: None, big and odd ids, unhashable values."""
    plain = [(2.0, 1.0, "cudaLaunchKernel", 1, 1, 7, 3, None, None),
             (21.5, 0.25, "cudaMemcpyAsync", 1, 2, 8, 4, 64, 1)]
    odd = [(30.0, 1.0, "cudaLaunchKernel", "p", 1, "x17", 2**63 - 1, None, None),  # a string correlation: aside
           (31.0, 1.0, ["not", "hashable"], 1, 1, -(2**63), None, None, None)]  # the int64 that reads as None: aside
    for rows in (plain, plain * 2, plain + odd):
        by_columns = RowColumns(RUNTIME_FIELDS, spill_rows=3)  # 4 rows: one slice spilled
        by_columns.extend([list(column) for column in zip(*rows, strict=True)])
        assert list(by_columns) == rows
        assert [by_columns[i] for i in range(len(rows))] == rows

"""The streaming Kineto reader: typed slices and the general path keep the same events and word the same errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscope.ingest.errors import TraceFormatError
from portscope.ingest.readers.chrome_json import ChromeDocument
from portscope.ingest.readers.kineto import collect
from portscope.ingest.readers.kineto_signatures import signature_key, signature_keys
from portscope.ingest.readers.kineto_stream import collect_file
from portscope.ingest.readers.source import read_bytes

KINETO_ARGS = (b'{\n      "External id": 2,"Record function id": 0, "Input type": ["float"], '
               b'"Input Dims": [[2, 3]], "Ev Idx": 1\n    }')  # fmt: skip


def test_signature_key_cuts_only_the_numbered_fields() -> None:
    assert signature_key(KINETO_ARGS) == b'"Record function id": 0, "Input type": ["float"], "Input Dims": [[2, 3]]'
    assert signature_key(KINETO_ARGS.replace(b": 2,", b": 77,").replace(b": 1\n", b": 9\n")) == signature_key(KINETO_ARGS)
    assert signature_key(b'{"External id": 3, "Input Dims": [[1]]}') == b' "Input Dims": [[1]]}'  # other spacing, no Ev Idx
    assert signature_key(b'{"a": 1, "External id": 3}') == b'{"a": 1, }'  # not first (an older layout): cut where it is
    older = b'{"Trace name": "PyTorch Profiler", "External id": 1, "Profiler Event Index": 0, "Input Dims": [[2]]}'
    assert signature_key(older) == signature_key(older.replace(b": 1,", b": 8,").replace(b": 0,", b": 5,"))
    assert signature_key(b'{"External id": "x", "Input Dims": [[1]]}').startswith(b'{"External id": "x"')


def test_signature_keys_of_a_slice_in_one_pass() -> None:
    # an older Kineto's slice (its first args not in Kineto's own layout): every numbered field cut, wherever it is
    older = [b'{"Trace name": "PyTorch Profiler", "External id": 1,\n "Profiler Event Index": 0, "Input Dims": [[2]]}',
             b'{"Trace name": "PyTorch Profiler", "External id": 2,\n "Profiler Event Index": 1, "Input Dims": [[3]]}',
             KINETO_ARGS]  # fmt: skip
    # (a numbered field, Record function id too, goes with its number, the whitespace after it and its comma; the
    # whitespace before the next field stays)
    assert signature_keys(older) == [b'{"Trace name": "PyTorch Profiler", \n  "Input Dims": [[2]]}',
                                     b'{"Trace name": "PyTorch Profiler", \n  "Input Dims": [[3]]}',
                                     b'{\n       "Input type": ["float"], "Input Dims": [[2, 3]], }']  # fmt: skip
    # a slice led by Kineto's own layout: each its own quick key
    assert signature_keys([KINETO_ARGS, older[0]]) == [b'"Record function id": 0, "Input type": ["float"], "Input Dims": [[2, 3]]',
                                                       b'{"Trace name": "PyTorch Profiler", \n  "Input Dims": [[2]]}']  # fmt: skip
    assert signature_keys([]) == []


def _write(path: Path, events: list) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "t"}, indent=1))
    return path


@pytest.mark.parametrize("float_pid", [False, True], ids=["typed", "refused-by-typed"])
def test_odd_types_read_alike_on_both_paths(tmp_path: Path, float_pid: bool) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": "host", "tid": 7, "ts": 10, "dur": 5,
         "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "c10::Half"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 11.5, "args": [1, 2]},  # args not an object
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 12.25, "dur": 0.5},  # no args
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 13, "dur": 2,
         "args": {"correlation": 4, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 1,
         "args": {"correlation": 4, "External id": 2}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::x", "pid": 1.5 if float_pid else 1, "tid": 1, "ts": 14, "dur": 1},
    ]  # a float pid: the typed decoder refuses the slice, the general path reads it
    path = _write(tmp_path / "odd.json", events)
    streamed, _ = collect_file(path)
    general = collect(path, ChromeDocument(path, read_bytes(path)))
    assert list(streamed.ops) == list(general.ops)
    assert streamed.ops[0][2:] == ("aten::mm", "host", 7, None, "2x3;3x4", None, "float32;float16", 2 * 3 * 4 + 3 * 4 * 2)
    assert streamed.ops[1][6:] == (None, None, None, 0) and streamed.ops[3][3] == (1.5 if float_pid else 1)
    assert streamed.device == general.device == [(13.0, 2.0, "kernel", "k", 0, 7, 4, None)]
    assert streamed.runtime == general.runtime and streamed.metadata == general.metadata == {"schemaVersion": 1, "traceName": "t"}
    assert (streamed.t_min, streamed.t_max, streamed.events) == (10, 15, 6)



@pytest.mark.parametrize("list_args", [False, True], ids=["typed", "refused-by-typed"])
def test_runtime_and_device_args_read_alike_on_both_paths(tmp_path: Path, list_args: bool) -> None:
    """The typed path decodes runtime calls' and device rows' args in one call per slice, only the fields read;
    an explicit null reads as absent on both paths; args that are not an object send the slice to the general path."""
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 20, "dur": 4,
         "args": {"correlation": 9, "External id": 3, "bytes": 4096, "kind": 1, "cbid": 41, "stream": [1]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", "pid": 1, "tid": 1, "ts": 30, "dur": 2,
         "args": {"correlation": 10, "bytes": None, "size": "512", "kind": 2.0}},  # null bytes: the size
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 21, "dur": 3,
         "args": {"device": None, "stream": {"x": 1}, "correlation": 9, "bytes": 4096, "memory bandwidth (GB/s)": 1.5}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 31, "dur": 1,
         "args": [1] if list_args else {"device": 1, "stream": "s2", "correlation": "c", "bytes": -4}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 32, "dur": 5},
    ]  # (a null device or a stream of another JSON type: the row's pid / tid)
    path = _write(tmp_path / "args.json", events)
    streamed, _ = collect_file(path)
    general = collect(path, ChromeDocument(path, read_bytes(path)))
    assert streamed.runtime == general.runtime == [(20.0, 4.0, "cudaMemcpyAsync", 1, 1, 9, 3, 4096, 1),
                                                   (30.0, 2.0, "hipMemcpyWithStream", 1, 1, 10, None, 512, 2),
                                                   (32.0, 5.0, "cudaDeviceSynchronize", 1, 1, None, None, None, None)]
    kernel = (31.0, 1.0, "kernel", "k", 0, 7, None, None) if list_args else (31.0, 1.0, "kernel", "k", 1, "s2", "c", None)
    assert streamed.device == general.device == [(21.0, 3.0, "gpu_memcpy", "Memcpy HtoD", 0, 7, 9, 4096), kernel]


def test_bad_events_are_worded_as_the_general_path_words_them(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
              {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 2, "dur": -5},
              {"ph": "X", "cat": "cpu_op", "name": "nots", "pid": 1, "tid": 1, "dur": 1}]  # fmt: skip
    path = _write(tmp_path / "bad.json", events)
    with pytest.raises(TraceFormatError) as streamed:
        collect_file(path)
    with pytest.raises(TraceFormatError) as general:
        collect(path, ChromeDocument(path, read_bytes(path)))
    assert str(streamed.value) == str(general.value)
    assert "2 of 3 events are malformed" in str(streamed.value) and "'dur' is negative (-5)" in str(streamed.value)
    assert "event 2 ('nots'): 'ts' is missing" in str(streamed.value)


def test_scale_bench_repeats_a_profile_with_shifted_times_and_ids(tmp_path: Path) -> None:
    """bench/scale_bench.py's synthetic trace: copies back to back, each past the last one's end and ids."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("scale_bench", Path(__file__).parents[2] / "bench" / "scale_bench.py")
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    base = tmp_path / "base.json"
    base.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n'
                    '  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100.500, "dur": 10.250,\n'
                    '   "args": {"External id": 7, "Input Dims": [[2, 2]], "Input type": ["float"]}},\n'
                    '  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 150.000, "dur": 20.000,\n'
                    '   "args": {"External id": 8}}\n'
                    '  ],\n  "traceName": "base"\n}\n')  # fmt: skip
    out = tmp_path / "three.json"
    copies, events = bench.repeat_trace(base, out, 3 * base.stat().st_size)
    assert (copies, events) == (3, 6)
    doc = json.loads(out.read_text())
    # span: last ts (150) - first ts (100) + longest dur (20, integer part) + 1000 = 1070 us; ids step 8 + 1 = 9
    assert [e["ts"] for e in doc["traceEvents"]] == [100.5, 150.0, 1170.5, 1220.0, 2240.5, 2290.0]
    assert [e["args"]["External id"] for e in doc["traceEvents"]] == [7, 8, 16, 17, 25, 26]
    assert doc["traceName"] == "base" and doc["traceEvents"][4]["args"]["Input Dims"] == [[2, 2]]
    streamed, _ = collect_file(out)
    assert len(streamed.ops) == 6 and streamed.ops.signatures.count(streamed.ops.signatures[1]) == 1

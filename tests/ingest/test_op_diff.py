"""The operator diff (ingest/op_diff.py): sets, counts, times and call sites written by hand from tiny Kineto
traces; the real CUDA pair against the figures HolisticTraceAnalysis' TraceDiff.ops_diff gives; `diff --ops`."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from kineto_pair import CONTROL, TEST, convert

from portscope.app.cli import main
from portscope.ingest import read_trace, write_trace
from portscope.ingest.op_diff import OP_COLUMNS, SITE_COLUMNS, OpChange, OpDiff, change_sets, op_diff
from portscope.ingest.op_diff_cli import format_op_diff
from portscope.ingest.readers import read_kineto
from portscope.ingest.region_tree import region_ids, top_level_ids

SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "kineto"


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return convert(tmp_path, "control", CONTROL), convert(tmp_path, "test", TEST)


def _step_diff(pair: tuple[Path, Path]):  # noqa: ANN202
    a, b = (read_trace(p) for p in pair)
    return op_diff(a, region_ids(a, "ProfilerStep#1")[0], b, region_ids(b, "ProfilerStep#1")[0])


def test_runtime_calls_kept(pair: tuple[Path, Path]) -> None:
    calls = read_trace(pair[1])["runtime_calls"].to_pydict()
    assert [str(n) for n in calls["name"]] == ["cudaGraphLaunch", "cudaLaunchKernel"]
    assert calls["correlation"] == [200, 201]
    assert calls["start_ns"] == [6000, 71000] and calls["dur_ns"] == [2000, 2000]
    assert calls["op_id"] == [0, 1]  # inside CompiledFunction, then inside aten::add


def test_sets_counts_and_times(pair: tuple[Path, Path]) -> None:
    diff = _step_diff(pair)
    assert change_sets(diff.ops) == {
        OpChange.ADDED: ["CompiledFunction", "cudaGraphLaunch", "gemm_b"],
        OpChange.DELETED: ["aten::mm", "gemm_a"],
        OpChange.INCREASED: ["aten::relu"],
        OpChange.DECREASED: ["aten::add", "cudaLaunchKernel"],
        OpChange.UNCHANGED: ["ProfilerStep#1", "add_kernel"],
    }
    rows = {(r["kind"], r["name"]): r for r in diff.ops.to_dict("records")}
    assert len(rows) == 10
    assert {k: (r["a_count"], r["b_count"], r["a_ns"], r["b_ns"], r["change"]) for k, r in rows.items()} == {
        ("annotation", "ProfilerStep#1"): (1, 1, 100_000, 100_000, "unchanged"),
        ("operator", "aten::mm"): (1, 0, 10_000, 0, "deleted"),
        ("operator", "aten::add"): (2, 1, 20_000, 10_000, "decreased"),
        ("operator", "aten::relu"): (1, 2, 5_000, 10_000, "increased"),
        ("operator", "CompiledFunction"): (0, 1, 0, 60_000, "added"),
        ("runtime", "cudaLaunchKernel"): (3, 1, 6_000, 2_000, "decreased"),
        ("runtime", "cudaGraphLaunch"): (0, 1, 0, 2_000, "added"),
        ("kernel", "gemm_a"): (1, 0, 4_000, 0, "deleted"),
        ("kernel", "gemm_b"): (0, 1, 0, 4_000, "added"),
        ("kernel", "add_kernel"): (2, 2, 8_000, 8_000, "unchanged"),
    }
    # added first, then deleted, increased, decreased, unchanged; by |Δ count| then |Δ time| inside a set
    assert list(diff.ops["change"]) == ["added"] * 3 + ["deleted"] * 2 + ["increased"] + ["decreased"] * 2 + ["unchanged"] * 2
    assert list(diff.ops["name"][3:5]) == ["aten::mm", "gemm_a"]  # both -1; mm lost 10 us, gemm_a 4 us
    assert list(diff.ops["name"][6:8]) == ["cudaLaunchKernel", "aten::add"]  # -2 before -1
    assert diff.unlaunched == (0, 1)  # stale_kernel: its launch is not in B's trace


def test_call_site_alignment(pair: tuple[Path, Path]) -> None:
    sites = _step_diff(pair).sites
    got = {(r["name"], r["call_site"]): (r["a_count"], r["b_count"]) for r in sites.to_dict("records")}
    assert got == {
        ("aten::mm", "model.py:12 (forward)"): (1, 0),
        ("CompiledFunction", "model.py:12 (forward)"): (0, 1),
        ("aten::add", "model.py:20 (forward)"): (2, 1),
        ("aten::relu", "model.py:20 (forward)"): (1, 2),
        ("cudaLaunchKernel", "model.py:12 (forward)"): (1, 0),
        ("cudaLaunchKernel", "model.py:20 (forward)"): (2, 1),
        ("cudaGraphLaunch", "model.py:12 (forward)"): (0, 1),
        ("gemm_a", "model.py:12 (forward)"): (1, 0),
        ("gemm_b", "model.py:12 (forward)"): (0, 1),
        ("add_kernel", "model.py:12 (forward)"): (0, 1),  # unchanged in count, moved from line 20 into the graph
        ("add_kernel", "model.py:20 (forward)"): (2, 1),
    }
    assert list(sites["delta"].abs())[:1] == [1] and "ProfilerStep#1" not in set(sites["name"])


def test_whole_runs_and_no_runtime_calls(pair: tuple[Path, Path]) -> None:
    a, b = (read_trace(p) for p in pair)
    diff = op_diff(a, top_level_ids(a)[0], b, top_level_ids(b)[0])
    rows = {r["name"]: (r["a_count"], r["b_count"]) for r in diff.ops.to_dict("records")}
    assert rows["aten::zeros"] == (1, 0)  # outside the step, inside the run
    assert "control" not in rows and "test" not in rows  # a top-level region is the run, not an annotation
    assert "stale_kernel" not in rows
    # a trace without runtime calls (converted before they were kept): device work counts where the trace puts it
    b.tables["runtime_calls"] = b["runtime_calls"].slice(0, 0)
    diff = op_diff(a, top_level_ids(a)[0], b, top_level_ids(b)[0])
    rows = {r["name"]: (r["a_count"], r["b_count"]) for r in diff.ops.to_dict("records")}
    assert rows["stale_kernel"] == (0, 1) and rows["cudaLaunchKernel"] == (3, 0) and diff.unlaunched == (0, 0)


def test_diff_cli_ops(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = (str(p) for p in pair)
    assert main(["diff", a, b, "--region-a", "ProfilerStep#1", "--region-b", "ProfilerStep#1", "--ops"]) == 0
    out = capsys.readouterr().out
    assert "HTA's sets (by name alone): 10 names: added 3, deleted 2, increased 1, decreased 2, unchanged 2\n" in out
    assert "by kind and name" not in out  # no name is of two kinds here
    assert "1 device slices of B's trace were launched before it began" in out
    lines = out.splitlines()
    hta = next(i for i, line in enumerate(lines) if line.startswith("every operator, runtime call"))
    at = next(i for i, line in enumerate(lines) if i > hta and line.rstrip().endswith("  aten::add"))
    assert lines[at].split()[:4] == ["operator", "2", "1", "-1"]
    assert lines[at + 1].split() == ["2", "1", "-1", "at", "model.py:20", "(forward)"]
    assert main(["diff", a, b, "--region-a", "ProfilerStep#1", "--region-b", "ProfilerStep#1", "--ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["op_diff"]
    assert data["sets"]["added"] == ["CompiledFunction", "cudaGraphLaunch", "gemm_b"]
    assert data["unlaunched"] == {"a": 0, "b": 1} and len(data["names"]) == 10 and len(data["call_sites"]) == 11
    assert main(["diff", a, b]) == 0 and "HTA's sets" not in capsys.readouterr().out  # only with --ops


def test_real_pair_matches_hta(tmp_path: Path) -> None:
    """HTA 0.5's TraceDiff.ops_diff(LabeledTrace(control), LabeledTrace(test)) on these files (first iteration,
    ProfilerStep#1009, both devices) gives 32 added, 138 deleted, 35 increased, 65 decreased, 162 unchanged."""
    sources = [SHARED / f"cuda_diff_{side}.json.gz" for side in ("control", "test")]
    if not all(p.exists() for p in sources):
        pytest.skip(f"{SHARED} is absent")
    a, b = (read_trace(write_trace(read_kineto(p), tmp_path / f"{p.name}.arrow")) for p in sources)
    diff = op_diff(a, region_ids(a, "ProfilerStep#1009")[0], b, region_ids(b, "ProfilerStep#1009")[0])
    sets = change_sets(diff.ops)
    assert {c.value: len(v) for c, v in sets.items()} == {"added": 32, "deleted": 138, "increased": 35,
                                                          "decreased": 65, "unchanged": 162}  # fmt: skip
    assert {"cudaGraphLaunch", "CompiledFunction", "CompiledFunctionBackward"} <= set(sets[OpChange.ADDED])
    rows = diff.ops.set_index("name")
    # HTA's compare_traces on the same pair: cudaLaunchKernel 1428 -> 811 calls, 9391 -> 6446 us
    assert rows.loc["cudaLaunchKernel", ["a_count", "b_count", "a_ns", "b_ns"]].tolist() == [1428, 811, 9_391_000, 6_446_000]
    assert diff.unlaunched == (0, 614)


def test_a_file_written_before_runtime_calls_reads_and_diffs(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """A trace converted before the runtime_calls table existed (no member, not in the manifest) reads with none."""
    old = tmp_path / "old.arrow"
    with zipfile.ZipFile(pair[1]) as zf, zipfile.ZipFile(old, "w", zipfile.ZIP_STORED) as out:
        manifest = json.loads(zf.read("manifest.json"))
        del manifest["tables"]["runtime_calls"]
        out.writestr("manifest.json", json.dumps(manifest))
        for name in zf.namelist():
            if name not in ("manifest.json", "runtime_calls.arrow"):
                out.writestr(name, zf.read(name))
    a, b = read_trace(pair[0]), read_trace(old)
    assert b["runtime_calls"].num_rows == 0 and b["ops"].num_rows == 4
    diff = op_diff(a, region_ids(a, "ProfilerStep#1")[0], b, region_ids(b, "ProfilerStep#1")[0])
    rows = {r["name"]: (r["a_count"], r["b_count"]) for r in diff.ops.to_dict("records")}
    assert rows["cudaLaunchKernel"] == (3, 0) and "cudaGraphLaunch" not in rows
    assert rows["stale_kernel"] == (0, 1) and rows["add_kernel"] == (2, 2)  # device work where the trace put it


def test_text_of_a_name_of_two_kinds() -> None:
    """aten::mm an operator in A only and a (predicted) kernel in B only: one unchanged name for HTA, two rows here."""
    ops = pd.DataFrame([["added", "kernel", "aten::mm", 0, 3, 3, 0, 5000, 5000],
                        ["deleted", "operator", "aten::mm", 3, 0, -3, 9000, 0, -9000]], columns=OP_COLUMNS)
    sites = pd.DataFrame([["operator", "aten::mm", f"model.py:{n} (f)", 1, 0, -1] for n in range(1, 5)], columns=SITE_COLUMNS)
    lines = format_op_diff(OpDiff(ops=ops, sites=sites, unlaunched=(0, 0)), top=10).splitlines()
    assert lines[1].endswith("HTA's sets (by name alone): 1 names: added 0, deleted 0, increased 0, decreased 0, unchanged 1")
    assert lines[2] == "  by kind and name (the rows below): 2 rows: added 1, deleted 1, increased 0, decreased 0, unchanged 0"
    deleted = lines[lines.index("deleted (1, top 10):") + 2:]
    assert deleted[0].split() == ["operator", "3", "0", "-3", "9.0", "0.0", "aten::mm"]
    assert [line.split()[-2] for line in deleted[1:4]] == ["model.py:1", "model.py:2", "model.py:3"]
    assert deleted[4].strip() == "... and 1 more call sites"


def test_call_sites_found_by_op_id_when_ids_do_not_start_at_zero(pair: tuple[Path, Path]) -> None:
    """Operator ids 100, 101, ... (a recording may number them so): the same call sites as with 0, 1, ..."""
    import pyarrow as pa
    import pyarrow.compute as pc

    a, b = (read_trace(p) for p in pair)
    before = _step_diff(pair).sites
    for trace in (a, b):
        for name in ("ops", "runtime_calls", "engine_slices"):
            table = trace[name]
            at = table.schema.get_field_index("op_id")
            trace.tables[name] = table.set_column(at, table.schema.field(at), pc.add(table.column("op_id"), pa.scalar(100, pa.int64())))
    after = op_diff(a, region_ids(a, "ProfilerStep#1")[0], b, region_ids(b, "ProfilerStep#1")[0]).sites
    assert len(after) == 11 and after.equals(before)

"""The scripts of bench/ keep running as the code they measure changes: each run here at a small size.

Their figures are recorded in docs/performance.md and docs/huge-traces.md from full-size runs; a bench that dies on
a renamed function or column is found here, not when someone next needs its figures. Each runs in a subprocess,
as its docstring says to run it, on inputs small enough for a few seconds; the test checks that it succeeded and
that its output holds the figures it reports, with the counts the small input implies. Timings are not asserted
(benchmarks measure them; a test cannot on a shared machine).

Not here: bench/viewer_bench.py (tests/app/test_viewer_bench_runs.py), bench/corpus.py (tests/test_corpus_bench.py),
bench/ddp_ranks.py (tests/ingest/test_ranks_recorded.py, test_ranks_pipeline.py), bench/fuzz_long.py
(tests/hardening/test_fuzz_atheris.py); bench/aot_graph_bench.py (an inductor compile: tens of seconds),
bench/calibrate_bench.py (three transformers models recorded and predicted) and bench/page_open_bench.py (a
browser) are run by hand.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from portscope.ingest import load_any, read_trace, schema

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
FIXTURES = ROOT / "tests" / "fixtures"
SAMPLES = ROOT / "sample_traces"
ALEXNET = FIXTURES / "kineto" / "cuda_alexnet_small.json.gz"  # a small CUDA Kineto export
RANK0 = FIXTURES / "kineto" / "hta_sampled_2ranks" / "sampled_rank-0.json.gz"  # a rank trace with distributedInfo
TABLE_COUNTS = re.compile(r"(\d+) regions, (\d+) ops, (\d+) signals, (\d+) transfers, (\d+) compiles, (\d+) engine_slices")
COUNTED = ("regions", "ops", "signals", "transfers", "compiles", "engine_slices")


def bench(script: str, *args: object, codes: tuple[int, ...] = (0,), timeout: float = 300) -> str:
    """Run bench/<script> with `args` as its docstring says; its stdout (the exit status one of `codes`)."""
    done = subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)  # fmt: skip
    assert done.returncode in codes, f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def counts(line: str) -> dict[str, int]:
    """The table sizes of `portscope convert`'s summary line."""
    match = TABLE_COUNTS.search(line)
    assert match, line
    return dict(zip(COUNTED, map(int, match.groups()), strict=True))


def events_in(path: Path) -> int:
    """Events of a Chrome/Kineto trace as the benches count them (its `"ph":` keys)."""
    raw = path.read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).count(b'"ph":')


def needs(*modules: str) -> None:
    """Skip unless `modules` are installed (torch and transformers are the `profile` extra), without importing them."""
    for name in modules:
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_audit_deps(tmp_path: Path) -> None:
    db = tmp_path / "osv"
    db.mkdir()
    ranges = [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.5"}]}]
    for name, package, extra in (("HIT-1", "demo", {}), ("WITHDRAWN-1", "demo", {"withdrawn": "2026-02-01"}),
                                 ("OTHER-1", "not-pinned", {})):  # fmt: skip
        doc = {"id": name, "modified": f"2026-01-0{len(extra) + 1}T00:00:00Z", "aliases": [f"CVE-{name}"],
               "summary": f"{name} summary", "affected": [{"package": {"ecosystem": "PyPI", "name": package},
                                                           "ranges": ranges}], **extra}  # fmt: skip
        (db / f"{name}.json").write_text(json.dumps(doc))
    lock = tmp_path / "lock.txt"
    lock.write_text("# pins\nDemo==1.2\nsafe==3.0\n")
    out = bench("audit_deps.py", "--db", db, "--lock", lock, "--also", "extra==0.1", "--json", tmp_path / "a.json",
                codes=(1,))  # fmt: skip  # 1: findings
    lines = out.splitlines()
    assert lines[0] == "3 pinned packages against 3 advisories (newest modified 2026-01-02T00:00:00Z): 1 findings"
    assert lines[1].split() == ["demo==1.2", "HIT-1", "(CVE-HIT-1)", "fixed", "in", "1.5", "HIT-1", "summary"]
    figures = json.loads((tmp_path / "a.json").read_text())
    assert (figures["packages"], figures["advisories"], [f["advisory"] for f in figures["findings"]]) == (3, 3, ["HIT-1"])


@pytest.mark.parametrize("table", ["regions", "signals"])
def test_builder_bench(table: str) -> None:
    out = bench("builder_bench.py", "--rows", 20000, 40000, "--table", table)
    match = re.fullmatch(rf"{table}: (\d+) / (\d+) bytes a row at 20000 / 40000 rows; (-?\d+) bytes a row between them",
                         out.strip())  # fmt: skip
    assert match, out
    assert int(match[1]) > 0 and int(match[2]) > 0  # 20,000 rows held grow the process


def test_cli_bench() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "cli_bench.py"), "--repeat", "1"], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["command", "best", "median"], done.stderr[-2000:]
    names = [re.split(r"\s{2,}", line.strip())[0] for line in lines[1:4]]
    assert names == ["python -c pass", "portscope --help", "portscope report llama_fp16-npu_forward.arrow"]
    verdict = re.fullmatch(r"target: start-up <= 0.35 s more than a bare interpreter \(best of 1\): (met|MISSED)", lines[4])
    assert verdict, lines[4]
    assert done.returncode == (0 if verdict[1] == "met" else 1)  # the exit status says the verdict; no timing asserted


def test_first_page_bench(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "run.arrow").write_bytes((SAMPLES / "llama_fp16-npu_forward.arrow").read_bytes())
    out = bench("first_page_bench.py", tmp_path / "runs")
    match = re.fullmatch(r"run ([0-9a-f]{16}): first page [\d.]+ s \(listed [\d.]+, run_row [\d.]+; reads (.+); "
                         r"content hash ([\d. +]+|none)\)", out.strip())  # fmt: skip
    assert match, out
    assert re.fullmatch(r"[\d.]+( \(mapped, not validated again\))?( \+ [\d.]+( \(mapped, not validated again\))?)*", match[2])


def _stage_labels(out: str) -> list[str]:
    return [m[1] for m in re.finditer(r"^\s*[\d.]+s (.+?)\s+rss\s+[\d.]+ MB", out, re.MULTILINE)]


def _written_tables(labels: list[str]) -> list[str]:
    return [label for label in labels if label.startswith("table ")]


def test_kineto_stages(tmp_path: Path) -> None:
    out = bench("kineto_stages.py", ALEXNET, tmp_path / "out.arrow")
    labels = _stage_labels(out)
    assert labels[:4] == ["start (imports)", "read", "translated", "assembled (linked, rules, tables)"]
    assert _written_tables(labels) == [f"table {i} written" for i in range(1, len(schema.TABLES) + 1)]
    assert labels[-1] == "written"
    run = read_trace(tmp_path / "out.arrow")
    assert counts(out) == {name: run.num_rows(name) for name in COUNTED}
    assert "converted from kineto" in out and run.num_rows("ops") > 0


def _bench_module(name: str):  # noqa: ANN202 - bench/ is not a package: load a script as a module
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_kernel_stages(tmp_path: Path) -> None:
    kernels = _bench_module("chrome_scale_bench").make_kernel_details(tmp_path / "kernel_details.csv", 0.0005)
    out = bench("kernel_stages.py", tmp_path / "kernel_details.csv", tmp_path / "out.arrow")
    labels = _stage_labels(out)
    assert labels[:4] == ["start (imports)", "translated (read, events made)", "linked", "rules"]
    planned = labels[4 : labels.index("table 1 written")]
    assert set(planned) == set(_bench_module("kernel_stages").PLANNED)  # every planned table of the assembly marked
    assert _written_tables(labels) == [f"table {i} written" for i in range(1, len(schema.TABLES) + 1)]
    assert labels[-1] == "written"
    figures = counts(out)
    assert "converted from ascend-kernels" in out and figures["ops"] == figures["engine_slices"] == kernels == 10_000


def test_link_join_bench() -> None:
    out = bench("link_join_bench.py", "--sizes", 1000, 3000, "--repeated")  # the bench asserts both joins agree
    sizes = re.findall(r"^\s*([\d,]+) launches: sort-merge [\d.]+ s, DuckDB [\d.]+ s \(its import [\d.]+ s\)$", out, re.MULTILINE)
    assert sizes == ["1,000", "3,000"], out


def test_ipc_delta_bench(tmp_path: Path) -> None:
    out = bench("ipc_delta_bench.py", "--names", 6000, "--batches", 3, "--dir", tmp_path)
    one, deltas = out.splitlines()
    assert re.fullmatch(r"one: open \+ first batch [\d.]+ s, dictionary 6000 names, heap \+\d+ MB, 1 dictionary batches "
                        r"\(0 deltas\), every batch right: True", one), one  # fmt: skip
    assert re.fullmatch(r"deltas: open \+ first batch [\d.]+ s, dictionary \d+ names, heap \+\d+ MB, 3 dictionary batches "
                        r"\(2 deltas\), every batch right: True", deltas), deltas  # fmt: skip
    assert list(tmp_path.iterdir()) == []  # its files removed


def test_format_bench(tmp_path: Path) -> None:
    out = bench("format_bench.py", "--ops", 3000, "--report-ops", 1000, "--json", tmp_path / "f.json")
    written = re.findall(r"^write 3,000 ops \((\w+)\): [\d.]+ s = [\d.]+M ops/s \(\d+ MB, fsync included\)$", out, re.MULTILINE)
    assert written == ["uncompressed", "lz4", "zstd"], out
    assert re.search(r"^load \+ report of a 1,000-op trace: [\d.]+ s$", out, re.MULTILINE), out
    figures = json.loads((tmp_path / "f.json").read_text())
    assert set(figures) == {"write_ops_per_s_uncompressed", "write_ops_per_s_lz4", "write_ops_per_s_zstd", "load_and_report_1m_s"}


def test_convert_floor(tmp_path: Path) -> None:
    out = bench("convert_floor.py", ALEXNET, "--json", tmp_path / "rows.json")
    [row] = json.loads((tmp_path / "rows.json").read_text())
    assert row["file"] == ALEXNET.name and row["events"] == events_in(ALEXNET)
    assert all(row[k] > 0 for k in ("floor_s", "convert_s", "ratio", "convert_in_process_s", "ratio_in_process"))
    assert out.splitlines()[1].split()[:3] == [ALEXNET.name, f"{row['mb']}", f"{row['events']:,}"]


def test_chrome_scale_bench(tmp_path: Path) -> None:
    out = bench("chrome_scale_bench.py", "--kind", "chrome", "npu", "kernels", "mobilint", "furiosa", "--sizes", 0.0005,
                "--dir", tmp_path)  # fmt: skip
    made = {Path(m[1]).name.split("_")[0]: int(m[2]) for m in re.finditer(r"^made (\S+) \((\d+) (?:events|operators)\)$", out, re.MULTILINE)}
    runs = {m[1]: (m[2], counts(m[0])) for m in re.finditer(r"^(\w+) [\d.]+ GB: [\d.]+ s, peak RSS .* \| \S+: converted from ([\w-]+): .*$",
                                                              out, re.MULTILINE)}  # fmt: skip
    assert list(made) == list(runs) == ["chrome", "npu", "kernels", "mobilint", "furiosa"], out
    assert {kind: fmt for kind, (fmt, _) in runs.items()} == {"chrome": "chrome", "npu": "ascend-trace", "kernels": "ascend-kernels",
                                                              "mobilint": "mobilint-trace", "furiosa": "furiosa-trace"}  # fmt: skip
    # a generic Chrome step: 41 events (9 threads of 2 X spans, a B/E pair and every third an instant; a flow pair),
    # 30 slices (the flow is not one)
    assert made["chrome"] % 41 == 0 and runs["chrome"][1]["engine_slices"] == made["chrome"] // 41 * 30
    assert runs["npu"][1]["ops"] == made["npu"]  # one operator a group of the trace view
    assert runs["kernels"][1]["ops"] == runs["kernels"][1]["engine_slices"] == made["kernels"]
    assert runs["mobilint"][1]["engine_slices"] > 0 and runs["furiosa"][1]["engine_slices"] > 0
    assert list(tmp_path.iterdir()) == []  # inputs and outputs removed without --keep


def test_npu_kineto_scale(tmp_path: Path) -> None:
    out = bench("npu_kineto_scale.py", "--sizes", 0.0005, "--dir", tmp_path)
    events = int(re.search(r"^made \S+ \(([\d,]+) events\)$", out, re.MULTILINE)[1].replace(",", ""))
    line = re.search(r"^npu-kineto [\d.]+ GB: .* \| \S+: converted from kineto: .*$", out, re.MULTILINE)
    assert line, out
    # a step: its ProfilerStep annotation and 200 repeats of 10 events, each 2 operators and one copy; 7 metadata
    steps, rest = divmod(events - 7, 1 + 200 * 10)
    figures = counts(line[0])
    assert rest == 0 and (figures["ops"], figures["transfers"]) == (2 * 200 * steps, 200 * steps)


def test_npu_trace_bench() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "npu_trace_bench.py"), "--mb", "0.3"], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    operators = int(re.search(r"^trace: \d+ MB, (\d+) operators$", done.stdout, re.MULTILINE)[1])
    result = re.search(r"^ascend-trace: [\d.]+ s, (\d+) ops, (\d+) slices, (\d+) signals, peak RSS \d+ MB = ([\d.]+)x the file "
                       r"\(.*\); cap 3.0x$", done.stdout, re.MULTILINE)  # fmt: skip
    assert result, done.stdout + done.stderr[-2000:]
    assert int(result[1]) == operators and int(result[2]) >= operators
    assert done.returncode == (0 if float(result[4]) <= 3.0 else 1)  # a file this small is below the interpreter's size


def test_op_diff_bench() -> None:
    out = bench("op_diff_bench.py")  # the bundled CUDA pair
    lines = out.splitlines()
    pair = re.fullmatch(r"pair: cuda_diff_control.arrow / cuda_diff_test.arrow; ProfilerStep#1009 sets: (\{.*\})", lines[0])
    assert pair, out
    sets = ast.literal_eval(pair[1])
    assert set(sets) <= {"added", "deleted", "increased", "decreased", "unchanged"} and sum(sets.values()) > 0
    labels = [re.split(r"\s{2,}", line)[0] for line in lines[1:5]]
    assert labels == ["signal diff (baseline)", "op diff, first step pair", "op diff, whole runs", "port diff, whole runs"]
    assert re.fullmatch(r"target <= 1 s: (met|NOT met) \(min of 7 runs, trace reading included\)", lines[5])


def test_schedule_bench() -> None:
    out = bench("schedule_bench.py", 2000)
    assert re.search(r"^scheduled 2,000 ops -> [\d,]+ slices in [\d.]+ s wall, [\d.]+ s CPU", out, re.MULTILINE), out
    assert re.search(r"^op table [\d.]+ MB, schedule [\d.]+ MB: [\d.]+x \(\d+ B/op\)$", out, re.MULTILINE), out
    assert re.search(r"^(PASS|FAIL) \(limits: < 5 s CPU, < 2x the op table\)$", out, re.MULTILINE), out


def test_schedule_diff_bench() -> None:
    out = bench("schedule_diff_bench.py", "--slices", 2000, "--repeat", 1)
    assert re.search(r"^2,000 slices per schedule: diff [\d.]+ s \(critical path [\d,]+ / [\d,]+ slices\)$", out, re.MULTILINE), out
    drawn = re.findall(r"aligned timeline ([AB]): [\d.]+ s \(([\d,]+) bars drawn\)", out)
    assert [side for side, _ in drawn] == ["A", "B"] and all(int(n.replace(",", "")) > 0 for _, n in drawn)
    busy = ast.literal_eval(re.search(r"busy: (\[.*\])", out)[1])
    # 500 tiles: each a 60 ns load and store on the DMA engines in A (30 ns in B), a 40 ns product, a 20 ns vector op
    assert sorted(busy) == [("DMA d2h", 30_000, 15_000), ("DMA h2d", 30_000, 15_000), ("matrix", 20_000, 20_000),
                            ("vector", 10_000, 10_000)]  # fmt: skip


def test_sql_bench(tmp_path: Path) -> None:
    out = bench("sql_bench.py", "--runs", 2, "--mb", 1, "--dir", tmp_path)  # the bench asserts SQL and pandas agree
    tops = {m[1]: ast.literal_eval(m[2]) for m in re.finditer(r"^([\w-]+)\s+[\d.]+ s.*peak RSS\s+\d+ MB  top (\[.*\])$", out, re.MULTILINE)}
    assert list(tops) == ["open", "duckdb", "duckdb-kernels", "pandas", "duckdb-again", "pandas-again"], out
    assert re.search(r"^group by operator over 2 runs: portscope sql .* same answer;", out, re.MULTILINE), out
    [(name, calls, _)] = tops["duckdb"]
    ops = read_trace(tmp_path / "run-000.arrow")["ops"].column("name").to_pylist()
    assert calls == 2 * ops.count(name)  # two copies of one run


def test_upload_bench() -> None:
    out = bench("upload_bench.py", "--events", 20000, "--port", free_port())
    assert re.search(r"^uploaded \d+ MB in [\d.]+ s \(\d+ MB/s, validated and stored\); run page 200 in [\d.]+ s$", out, re.MULTILINE), out
    assert re.search(r"^peak RSS: server [\d.]+ GB, conversion process [\d.]+ GB$", out, re.MULTILINE), out


def test_load_bench(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in ("llama_fp16-npu_forward.arrow", "ascend_kernel_details_591.arrow"):
        (traces / name).write_bytes((SAMPLES / name).read_bytes())
    out = bench("load_bench.py", "--clients", 2, "--seconds", 0.5, "--workers", 1, "--rounds", 2, "--traces", traces,
                "--json", tmp_path / "load.json")  # fmt: skip  # exit 0: no request failed
    figures = json.loads((tmp_path / "load.json").read_text())
    assert [(r["errors"], r["requests"] > 0) for r in figures["rounds"]] == [(0, True), (0, True)], out
    assert set(figures["rounds"][-1]["by_kind_p95_ms"]) == {"GET /", "GET /run/<id>", "page content /run/<id>", "timeline zoom",
                                                            "GET /api/run/<id>", "GET /api/runs", "upload"}  # fmt: skip


def test_scale_bench(tmp_path: Path) -> None:
    out = bench("scale_bench.py", "--base", ALEXNET, "--sizes", 0.001, "--hta-python", tmp_path / "no-hta", "--work", tmp_path,
                "--json", tmp_path / "rows.json")  # fmt: skip
    [row] = json.loads((tmp_path / "rows.json").read_text())
    assert row["events"] == row["copies"] * events_in(ALEXNET)
    base = load_any(ALEXNET)
    assert int(row["viewer"]["engine_slices"]) == row["copies"] * base.num_rows("engine_slices")  # the viewer's figures
    assert "HTA: not run" in out and re.search(rf"^\| [\d.]+ GB \| {row['events']:,} \| ", out, re.MULTILINE), out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.json"]  # the synthetic files removed


def test_ranks_bench(tmp_path: Path) -> None:
    out = bench("ranks_bench.py", "--base", RANK0, "--ranks", 2, "--mb", 1, "--work", tmp_path, "--json", tmp_path / "r.json")
    figures = json.loads((tmp_path / "r.json").read_text())
    head = re.search(r"^2 ranks x \d+ MB \((\d+) copies of sampled_rank-0.json.gz, ([\d,]+) events each;", out, re.MULTILINE)
    assert head, out
    assert figures["ranks"] == 2 and figures["events_per_rank"] == int(head[2].replace(",", "")) == int(head[1]) * events_in(RANK0)
    assert re.search(r"run.arrow: 2 ranks \(0: rank0.json, 1: rank1.json\): ", out), out
    assert figures["workers_seen"] >= 1 and figures["run_bytes"] > 0


def test_rank_report_bench() -> None:
    out = bench("rank_report_bench.py", "--base", RANK0, "--ranks", 2, "--mb", 1)
    assert re.search(r"^2 ranks x 1 MB: [\d,]+ operators, [\d,]+ engine slices, [\d,]+ regions$", out, re.MULTILINE), out
    figures = re.search(r"^rank_steps: [\d.]+ s \((\d+) rank-steps\); collectives: [\d.]+ s \((\d+) matched, (\d+) arrivals\); "
                        r"ranks_report_data: [\d.]+ s; peak RSS [\d,]+ MB$", out, re.MULTILINE)  # fmt: skip
    assert figures, out
    steps, matched, arrivals = map(int, figures.groups())
    assert steps > 0 and steps % 2 == 0  # each step on both ranks
    assert matched > 0 and arrivals == 2 * matched  # each collective arrives from both ranks


def test_convert_bench(tmp_path: Path) -> None:
    trace = tmp_path / "alexnet.json"
    trace.write_bytes(gzip.decompress(ALEXNET.read_bytes()))
    out = bench("convert_bench.py", "--trace", trace, "--hta-python", tmp_path / "no-hta")
    assert re.search(rf"^trace: \d+ MB, {events_in(trace)} events$", out, re.MULTILINE), out
    ops = re.search(r"^portscope: [\d.]+ s, (\d+) ops, peak RSS \d+ MB", out, re.MULTILINE)
    assert ops and int(ops[1]) == load_any(trace).num_rows("ops"), out
    assert "HTA: skipped" in out


@pytest.mark.slow
def test_residency_bench(tmp_path: Path) -> None:
    needs("torch", "transformers")
    out = bench("residency_bench.py", "--regions", 10, "--json", tmp_path / "r.json")
    match = re.fullmatch(r"RSS after 10 regions [\d.]+ MB, after 10: [\d.]+ MB \(growth [+-][\d.]+ MB\); "
                         r"tracked storages per region: (\d+) -> (\d+)", out.strip())  # fmt: skip
    assert match, out
    assert set(json.loads((tmp_path / "r.json").read_text())) == {"rss_10_mb", "rss_end_mb", "growth_mb"}


@pytest.mark.slow
def test_overhead_bench(tmp_path: Path) -> None:
    needs("torch", "transformers")
    out = bench("overhead_bench.py", "--repeats", 1, "--layers", 1, "--hidden", 64, "--seq", 8, "--json", tmp_path / "o.json")
    figures = json.loads((tmp_path / "o.json").read_text())
    modes = ["unprofiled", "do-nothing dispatch mode", "explain", "explain(python path)", "explain(with_stack)",
             "explain(memory=True)", "explain(target=fp16-npu)", "torch.profiler(record_shapes)"]  # fmt: skip
    assert figures["operators"] > 0 and [m for m in figures if m not in ("operators", "native")] == modes
    assert figures["unprofiled"]["ratio"] == 1.0
    assert out.startswith(f"{figures['operators']} operators per forward; ")
    assert [re.split(r"\s{2,}", line)[0] for line in out.splitlines()[1:9]] == modes

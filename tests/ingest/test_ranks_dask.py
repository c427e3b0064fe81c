"""Multi-rank conversion on Dask distributed (`convert --dask`): the same run as `--jobs 2`, table by table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_ranks import BASE, kineto, write

from portscope.app.cli import main
from portscope.ingest import read_trace
from portscope.ingest.errors import TraceFormatError, UsageError
from portscope.ingest.ranks import convert_ranks

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as c:
        yield c


def ranks_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "traces"
    write(folder, "r0.json", kineto(0))
    write(folder, "r1.json", kineto(1, step=150.0, gemm=90.0, base=BASE + 1_000_000))
    write(folder, "r2.json", kineto(2, base=BASE + 3_000))
    return folder


def test_dask_run_equals_the_jobs_run(tmp_path: Path, cluster) -> None:
    folder = ranks_folder(tmp_path)
    _, jobs_id = convert_ranks(folder, tmp_path / "jobs.arrow", jobs=2)
    _, dask_id = convert_ranks(folder, tmp_path / "dask.arrow", dask=cluster.scheduler_address)
    assert dask_id == jobs_id  # the run's content hash
    a, b = read_trace(tmp_path / "jobs.arrow"), read_trace(tmp_path / "dask.arrow")
    assert a.run_info == b.run_info
    for name in ("regions", "ops", "signals", "transfers", "compiles", "engine_slices", "runtime_calls", "frames", "stacks"):
        assert a[name].equals(b[name]), name
    assert [r["rank"] for r in b.run_info.extra["ranks"]] == [0, 1, 2]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".portscope-ranks-")]  # the workers' files removed


def test_a_rank_that_cannot_be_read_is_named_on_dask(tmp_path: Path, cluster) -> None:
    folder = ranks_folder(tmp_path)
    (folder / "r1.json").write_text('{"traceEvents": [{"ph": "X"')  # cut short
    with pytest.raises(TraceFormatError) as err:
        convert_ranks(folder, tmp_path / "run.arrow", dask=cluster.scheduler_address)
    assert "r1.json: " in str(err.value) and not (tmp_path / "run.arrow").exists()


def test_convert_command_with_a_scheduler(tmp_path: Path, cluster, capsys: pytest.CaptureFixture[str]) -> None:
    folder = ranks_folder(tmp_path)
    assert main(["convert", str(folder), "-o", str(tmp_path / "run.arrow"), "--dask", cluster.scheduler_address]) == 0
    assert "3 ranks (0: r0.json, 1: r1.json, 2: r2.json)" in capsys.readouterr().out


def test_dask_on_one_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = write(tmp_path, "one.json", kineto(0, world=1))
    assert main(["convert", str(one), "-o", str(tmp_path / "run.arrow"), "--dask", "local"]) == 2
    assert "--dask applies to multi-rank runs only" in capsys.readouterr().err


def test_no_scheduler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from portscope.ingest import ranks_dask

    monkeypatch.setattr(ranks_dask, "CONNECT_TIMEOUT_S", 1.0)
    folder = ranks_folder(tmp_path)
    with pytest.raises(UsageError, match="no Dask scheduler answered"):
        convert_ranks(folder, tmp_path / "run.arrow", dask="tcp://127.0.0.1:1")


def test_cli_local_cluster_and_lazy_import(tmp_path: Path) -> None:
    # `--dask local` in a real process (the worker processes re-import the main module: the console script's guard)
    folder = ranks_folder(tmp_path)
    done = subprocess.run([sys.executable, "-m", "portscope.app.cli", "convert", str(folder), "-o",
                           str(tmp_path / "run.arrow"), "--dask", "local", "--jobs", "2"],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    _, jobs_id = convert_ranks(folder, tmp_path / "jobs.arrow", jobs=1)
    assert read_trace(tmp_path / "run.arrow")["ops"].equals(read_trace(tmp_path / "jobs.arrow")["ops"])
    lazy = subprocess.run([sys.executable, "-c", "import sys, portscope.app.cli, portscope.ingest.convert_cli, "
                           "portscope.ingest.ranks; print(any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules))"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert lazy.stdout.strip() == "False"


def test_results_the_merge_cannot_see_are_one_clear_error(tmp_path: Path, cluster) -> None:
    from portscope.ingest.ranks_dask import map_on_dask

    paths = [str(tmp_path / "r0.json"), str(tmp_path / "r1.json")]
    outs = [str(tmp_path / "gone" / "a.arrow"), str(tmp_path / "gone" / "b.arrow")]
    with pytest.raises(TraceFormatError) as err:  # as if each worker wrote to a disk of its own
        map_on_dask(cluster.scheduler_address, lambda path, out: {"distributed": None}, paths, outs)
    assert "r0.json: converted, but its result" in str(err.value) and "shared with the Dask workers" in str(err.value)

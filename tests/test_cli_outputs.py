"""Every command that writes a file the user names: a folder that is not there, a folder given for a file, or a
folder that takes no new file is one line naming the path, exit status 2, no traceback and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from portscope.app import cli

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_traces"
KINETO = REPO / "tests" / "fixtures" / "kineto"
MEASURED = SAMPLES / "llama_cpu_measured.arrow"  # calibrate wants measured times
NUMERICS = SAMPLES / "llama_fp16-npu_eager_vs_compiled.arrow"  # has numerics to record tolerances from


def _commands(out: str, script: str = "script.py") -> dict[str, list[str]]:
    """Each command line that writes the file `out`, every other input valid: the write is all that can fail
    (`record` runs `script`)."""
    return {
        "convert": ["convert", str(KINETO / "cuda_alexnet_small.json.gz"), "-o", out],
        "convert ranks": ["convert", str(KINETO / "hta_sampled_2ranks"), "-o", out, "--jobs", "1"],
        "export --chrome": ["export", "--chrome", str(MEASURED), "-o", out],
        "sql parquet": ["sql", "select count(*) from ops", str(MEASURED), "--format", "parquet", "-o", out],
        "sql arrow": ["sql", "select count(*) from ops", str(MEASURED), "--format", "arrow", "-o", out],
        "sql csv": ["sql", "select count(*) from ops", str(MEASURED), "--format", "csv", "-o", out],
        "check --record-numerics": ["check", "--record-numerics", out, str(NUMERICS)],
        "targets calibrate": ["targets", "calibrate", str(MEASURED), "-o", out],
        "record": ["record", "-o", out, "--", "python", script],
        "compare-modes": ["compare-modes", "-o", out],
        "validate": ["validate", "-o", out],
        "plan": ["plan", "--model", str(REPO / "tests" / "fixtures" / "model_configs" / "qwen3-0.6b.json"), "-o", out],
    }


COMMANDS = list(_commands("x"))


@pytest.fixture(autouse=True)
def _torch_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outputs are checked before any command runs: the torch commands fail the same where torch is missing."""
    monkeypatch.setattr(cli, "torch_available", lambda: True)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("name", COMMANDS)
def test_a_missing_output_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    out = tmp_path / "nodir" / "out.file"
    script = tmp_path / "script.py"
    script.write_text("print('ran')\n")
    before = _files(tmp_path)
    command = _commands(str(out), str(script))[name]
    assert cli.main(command) == 2
    subcommand = command[0]
    assert _one_line(capsys) == f"portscope {subcommand}: {out}: the folder {tmp_path / 'nodir'} does not exist"
    assert _files(tmp_path) == before  # no folder made, no partial file


@pytest.mark.parametrize("name", ["convert", "export --chrome", "sql parquet", "targets calibrate"])
def test_a_folder_given_for_the_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    (tmp_path / "here").mkdir()
    command = _commands(str(tmp_path / "here"))[name]
    assert cli.main(command) == 2
    assert _one_line(capsys) == f"portscope {command[0]}: {tmp_path / 'here'}: is a folder; give the name of the file to write"
    assert _files(tmp_path) == ["here"]


def test_a_file_given_for_the_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.txt").write_text("")
    out = tmp_path / "a.txt" / "x.arrow"
    assert cli.main(_commands(str(out))["convert"]) == 2
    assert _one_line(capsys) == f"portscope convert: {out}: {tmp_path / 'a.txt'} is not a folder"


def _takes_no_file(folder: str) -> bool:
    try:
        fd, probe = tempfile.mkstemp(dir=folder)
    except OSError:
        return True
    os.close(fd)
    os.unlink(probe)
    return False


@pytest.mark.skipif(not (os.path.isdir("/proc") and _takes_no_file("/proc")), reason="needs a /proc that takes no file")
@pytest.mark.parametrize("name", ["convert", "convert ranks", "export --chrome", "sql csv", "check --record-numerics"])
def test_a_folder_that_takes_no_file_is_one_line(capsys: pytest.CaptureFixture[str], name: str) -> None:
    command = _commands("/proc/portscope-test.out")[name]
    assert cli.main(command) == 2
    assert _one_line(capsys) == f"portscope {command[0]}: /proc/portscope-test.out: cannot create files in the folder /proc"


@pytest.mark.parametrize("command", [["export", "--parquet", "{out}", str(MEASURED)], ["demo", "-o", "{out}"],
                                     ["view", "--store", "{out}", "--no-browser"]])
def test_an_output_folder_under_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   command: list[str]) -> None:
    """These make their folder with its parents; a file on the way is the one thing that stops them."""
    (tmp_path / "a.txt").write_text("")
    out = tmp_path / "a.txt" / "b" / "c"
    assert cli.main([str(out) if arg == "{out}" else arg for arg in command]) == 2
    assert _one_line(capsys) == f"portscope {command[0]}: {out}: {tmp_path / 'a.txt'} is not a folder"
    assert _files(tmp_path) == ["a.txt"]


def test_export_parquet_still_makes_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "new" / "deep"
    assert cli.main(["export", "--parquet", str(out), str(MEASURED)]) == 0
    assert (out / "ops").is_dir() and f"{out}: 1 runs" in capsys.readouterr().out


def test_a_relative_output_in_the_working_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sql", "select 1 as one", str(MEASURED), "--format", "csv", "-o", "q.csv"]) == 0
    assert (tmp_path / "q.csv").read_text() == "one\n1\n"
    assert _files(tmp_path) == ["q.csv"]  # the check's probe file is gone


def test_the_installed_command_prints_no_traceback(tmp_path: Path) -> None:
    out = tmp_path / "nodir" / "x.arrow"
    done = subprocess.run([sys.executable, "-m", "portscope.app.cli", "convert", str(KINETO / "cuda_alexnet_small.json.gz"),
                           "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == f"portscope convert: {out}: the folder {tmp_path / 'nodir'} does not exist\n"
    assert done.stdout == "" and _files(tmp_path) == []

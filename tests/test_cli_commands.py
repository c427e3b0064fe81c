"""The `portscope` parser: every command listed once, loaded only when chosen, torch asked for by name."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from portscope.app import cli


def test_every_listed_command_is_registered_by_its_module() -> None:
    registered: dict[str, str] = {}
    for module in dict.fromkeys(c.module for c in cli.COMMANDS.values()):
        action = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(cli.Subcommands(action))
        registered.update(dict.fromkeys(action.choices, module))
    assert registered == {name: c.module for name, c in cli.COMMANDS.items()}


def test_only_the_chosen_command_module_is_imported() -> None:
    code = ("import sys; from portscope.app.cli import build_parser; build_parser('report'); "
            "print(sorted(m for m in sys.modules if m.startswith('portscope.') and m.endswith('_cli')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['portscope.ingest.report_cli']"


def test_help_imports_no_command_module_nor_pyarrow() -> None:
    code = ("import sys, contextlib, io\nfrom portscope.app.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    try: main(['--help'])\n    except SystemExit: pass\n"
            "print(sorted(m for m in ('pyarrow', 'pandas', 'torch', 'dash', 'portscope.ingest.report_cli') if m in sys.modules))\n"
            "print('validate' in out.getvalue() and 'convert' in out.getvalue())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "True"]


@pytest.mark.parametrize("command", [["record", "--", "python", "x.py"], ["demo"], ["compare-modes"], ["validate"]])
def test_torch_commands_without_torch_exit_2_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    monkeypatch.setattr(cli, "torch_available", lambda: False)
    assert cli.main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"portscope {command[0]}: needs torch") and "pip install" in err[0]


def test_targets_needs_no_torch(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "torch_available", lambda: False)
    assert cli.main(["targets"]) == 0
    assert "fp16-npu" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["frobnicate"])
    assert exit_.value.code == 2 and "invalid choice: 'frobnicate'" in capsys.readouterr().err


def _in_a_fresh_process(argv: list[str], watched: tuple[str, ...]) -> tuple[int, list[str], str]:
    """(exit status, which of the `watched` modules were imported, what was printed) of `portscope ARGV` run in a
    fresh interpreter."""
    code = ("import sys, contextlib, io, json\nfrom portscope.app.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    code = main({argv!r})\n"
            f"print(json.dumps([code, sorted(m for m in {watched!r} if m in sys.modules), out.getvalue()]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    status, loaded, printed = json.loads(done.stdout)
    return status, loaded, printed


def test_report_loads_no_heavy_module() -> None:
    """`portscope report` answers in well under a second because it imports none of these (each costs
    70 ms to seconds; bench/cli_bench.py measures the whole start-up)."""
    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "llama_fp16-npu_forward.arrow"
    status, loaded, printed = _in_a_fresh_process(["report", str(sample)],
                                                  ("torch", "pandas", "pyarrow.compute", "dash", "plotly", "flask"))
    assert (status, loaded) == (0, []) and "dispatch/cpu_fallback" in printed


def test_converting_one_file_loads_neither_the_exporter_nor_the_ranks(tmp_path: Path) -> None:
    """`portscope convert FILE` imports neither `export`'s writer (which imports pyarrow.compute, ~25 ms) nor the
    multi-rank modules (~11 ms): a one-file conversion is not a multi-rank run."""
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, '
                     '"ts": 10, "dur": 5}]}')
    status, loaded, _ = _in_a_fresh_process(["convert", str(trace), "-o", str(tmp_path / "t.arrow")],
                                            ("pyarrow.compute", "portscope.ingest.export_chrome", "portscope.ingest.ranks"))
    assert (status, loaded) == (0, [])
    assert (tmp_path / "t.arrow").stat().st_size > 0


def test_output_cut_short_by_the_reader_is_no_traceback() -> None:
    """`portscope sql ... | head -1`: the pipe closes while rows are written; one exit status, nothing on stderr."""
    sample = Path(__file__).parents[1] / "sample_traces" / "bert_small_h100.arrow"
    code = ("import sys; from portscope.app.cli import main; "
            f"sys.exit(main(['sql', '--format', 'csv', 'select * from ops', {str(sample)!r}]))")
    done = subprocess.run(f"{sys.executable} -c \"{code}\" | head -1", shell=True, capture_output=True, text=True,
                          executable="/bin/bash")
    assert done.stdout.startswith("run,op_id,region_id,name,")
    assert done.stderr == ""

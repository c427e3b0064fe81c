"""Pickles are refused at the boundary with a message naming the format (PyTorch memory snapshots are pickles;
torch.save archives hold one): nothing is ever unpickled."""

from __future__ import annotations

import gzip
import pickle
import zipfile
from pathlib import Path

import pytest

from portscope.app.cli import main
from portscope.ingest.convert import load_any
from portscope.ingest.errors import TraceFormatError


class Boom:
    def __reduce__(self) -> tuple:  # unpickling this would run print: it must never happen
        return (print, ("UNPICKLED",))


@pytest.fixture(autouse=True)
def no_unpickling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("something unpickled a file")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_a_memory_snapshot_pickle_is_refused(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps({"segments": [Boom()], "device_traces": []}, protocol=protocol))
    with pytest.raises(TraceFormatError, match="a Python pickle .*PyTorch memory snapshot.* never unpickles"):
        load_any(path)


def test_a_gzipped_pickle_and_a_torch_save_archive_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gz = tmp_path / "snapshot.pickle.gz"
    gz.write_bytes(gzip.compress(pickle.dumps([Boom()], protocol=4)))
    with pytest.raises(TraceFormatError, match="a Python pickle"):
        load_any(gz)
    archive = tmp_path / "model.pt"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("model/data.pkl", pickle.dumps(Boom(), protocol=2))
    with pytest.raises(TraceFormatError, match=r"torch\.save archive"):
        load_any(archive)
    assert main(["convert", str(archive), "-o", str(tmp_path / "out.arrow")]) != 0
    assert "UNPICKLED" not in capsys.readouterr().out and not (tmp_path / "out.arrow").exists()

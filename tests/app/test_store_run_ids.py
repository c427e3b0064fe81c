"""The store opens a run converted by `write_run` without hashing it again, and never names a file by an id
computed for other bytes (ingest/run_ids.py)."""

from __future__ import annotations

import os
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from portscope.app.config import ViewerConfig
from portscope.app.server import create_app
from portscope.ingest.trace import Trace, read_trace, write_run, write_trace


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths of the traces whose content hash was computed (Trace.content_hash counted)."""
    calls: list[str] = []
    real = Trace.content_hash

    def counted(self: Trace) -> str:
        calls.append(Path(self.path or "?").name)
        return real(self)

    monkeypatch.setattr(Trace, "content_hash", counted)
    return calls


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(file name, validated) of every trace the store read."""
    import portscope.app.store as store_module

    calls: list[tuple[str, bool]] = []
    real = store_module.read_trace

    def counted(path: Path, *, validate: bool = True) -> Trace:
        calls.append((Path(path).name, validate))
        return real(path, validate=validate)

    monkeypatch.setattr(store_module, "read_trace", counted)
    return calls


def _listed(folder: Path, store: Path) -> dict[str, str]:
    """{file name: run id} as a fresh store (its own cache) lists the folder."""
    app = create_app(ViewerConfig(trace_paths=(folder,), store_dir=store))
    with app.server.test_request_context("/"):
        runs, problems = app.server.extensions["portscope"].store.listed()
    assert problems == []
    return {path.name: run_id for run_id, path in runs}


def test_a_converted_run_opens_without_hashing(tmp_path: Path, demo_paths: dict[str, Path], hashes: list[str],
                                               reads: list[tuple[str, bool]]) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    eager, compiled = read_trace(demo_paths["eager"]), read_trace(demo_paths["compiled"])
    eager_id, compiled_id = eager.content_hash(), compiled.content_hash()
    hashes.clear()
    assert write_run(eager, folder / "a.arrow") == eager_id  # as `portscope convert` writes it
    write_trace(compiled, folder / "b.arrow")  # written without its id
    assert _listed(folder, tmp_path / "store1") == {"a.arrow": eager_id, "b.arrow": compiled_id}
    assert hashes == ["b.arrow"]  # only the file whose id nobody had computed
    assert reads == [("a.arrow", False), ("b.arrow", True)]  # and only that one validated in full
    assert _listed(folder, tmp_path / "store2") == {"a.arrow": eager_id, "b.arrow": compiled_id}
    assert hashes == ["b.arrow"]  # another store, its own cache: both ids known now
    assert reads[2:] == [("a.arrow", False), ("b.arrow", False)]


def test_another_file_put_in_place_is_hashed_again(tmp_path: Path, demo_paths: dict[str, Path], hashes: list[str],
                                                   reads: list[tuple[str, bool]]) -> None:
    folder, other = tmp_path / "traces", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    first, second = read_trace(demo_paths["eager"]), read_trace(demo_paths["eager"])
    first.run_info.command, second.run_info.command = "run one", "run two"  # same size, other bytes, other id
    target = folder / "run.arrow"
    first_id = write_run(first, target)
    second_id = write_run(second, other / "run.arrow")
    assert first_id != second_id and target.stat().st_size == (other / "run.arrow").stat().st_size
    st = target.stat()
    time.sleep(0.05)  # file times move in clock ticks
    shutil.copyfile(other / "run.arrow", target)  # the other bytes into the same file (same inode, same size) ...
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... with the old mtime set back
    assert (target.stat().st_ino, target.stat().st_size, target.stat().st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    hashes.clear()
    assert _listed(folder, tmp_path / "store") == {"run.arrow": second_id}
    assert hashes == ["run.arrow"] and reads == [("run.arrow", True)]  # hashed and validated again


def test_portscope_convert_remembers_the_run_id(tmp_path: Path, hashes: list[str]) -> None:
    from portscope.app.cli import main
    from portscope.ingest import run_ids

    folder = tmp_path / "traces"
    folder.mkdir()
    out = folder / "alexnet.arrow"
    source = Path(__file__).parents[1] / "fixtures" / "kineto" / "cuda_alexnet_small.json.gz"
    assert main(["convert", str(source), "-o", str(out)]) == 0
    assert hashes == []  # hashed as it was written, not after
    run_id = run_ids.recall(run_ids.file_key(out))
    assert run_id is not None and run_id == read_trace(out).content_hash()
    hashes.clear()
    assert _listed(folder, tmp_path / "store") == {"alexnet.arrow": run_id} and hashes == []


def test_a_remembered_file_changed_in_place_is_validated_and_refused(tmp_path: Path, demo_paths: dict[str, Path],
                                                                     reads: list[tuple[str, bool]]) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    target = folder / "run.arrow"
    write_run(read_trace(demo_paths["eager"]), target)
    st = target.stat()
    raw = bytearray(target.read_bytes())
    with zipfile.ZipFile(target) as zf:
        info = zf.getinfo("ops.arrow")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra)  # the ops member's data
    raw[at + 8 : at + info.file_size - 8] = bytes(info.file_size - 16)  # its Arrow messages zeroed, size kept
    time.sleep(0.05)
    target.write_bytes(bytes(raw))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    app = create_app(ViewerConfig(trace_paths=(folder,), store_dir=tmp_path / "store"))
    with app.server.test_request_context("/"):
        runs, problems = app.server.extensions["portscope"].store.listed()
    assert runs == [] and len(problems) == 1 and "ops" in problems[0] and reads == [("run.arrow", True)]

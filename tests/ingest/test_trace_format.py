"""The trace format: exact round trip, atomic writes, and one clear error for every kind of broken file."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest
from fulltrace import full_trace

from portscope.ingest import TraceFormatError, read_trace, write_trace
from portscope.ingest.container import ALIGN
from portscope.ingest.schema import TABLES

BROKEN = Path(__file__).resolve().parent.parent / "broken_traces"


def test_round_trip_is_exact(tmp_path: Path) -> None:
    trace = full_trace()
    path = write_trace(trace, tmp_path / "run.arrow")
    back = read_trace(path)
    assert back.run_info == trace.run_info
    for name in TABLES:
        assert trace[name].num_rows > 0, name
        assert back[name].equals(trace[name]), name
    assert back.content_hash() == trace.content_hash()


def test_members_are_stored_and_aligned(tmp_path: Path) -> None:
    path = write_trace(full_trace(), tmp_path / "run.arrow")
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert names[0] == "manifest.json"
        assert {f"{t}.arrow" for t in TABLES} <= set(names)
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            n, m = int.from_bytes(raw[info.header_offset + 26:][:2], "little"), int.from_bytes(raw[info.header_offset + 28:][:2], "little")
            assert (info.header_offset + 30 + n + m) % ALIGN == 0, info.filename
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["format"] == "portscope-trace" and manifest["version"] == 1


def test_a_trace_zipped_again_with_deflate_reads_the_same(tmp_path: Path) -> None:
    """`unzip run.arrow; zip -r again.arrow *`: members deflated, not stored: read, every table equal."""
    trace = full_trace()
    path = write_trace(trace, tmp_path / "run.arrow")
    again = tmp_path / "again.arrow"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(again, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    back = read_trace(again)
    assert back.run_info == trace.run_info
    assert all(back[n].equals(trace[n]) for n in TABLES)


def test_a_deflated_member_that_is_corrupt_is_named(tmp_path: Path) -> None:
    path = write_trace(full_trace(), tmp_path / "run.arrow")
    again = tmp_path / "again.arrow"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(again, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    raw = bytearray(again.read_bytes())
    with zipfile.ZipFile(again) as zf:
        info = zf.getinfo("ops.arrow")
    at = info.header_offset + 30 + len("ops.arrow") + len(info.extra) + info.compress_size // 2
    raw[at : at + 8] = bytes(8)  # zeros in the middle of the deflated stream
    again.write_bytes(bytes(raw))
    with pytest.raises(TraceFormatError, match=r"(?s)again\.arrow.*member 'ops\.arrow' is compressed and cannot be read"):
        read_trace(again)


def test_compressed_members_past_the_memory_limit_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import portscope.ingest.container as container

    path = write_trace(full_trace(), tmp_path / "run.arrow")
    again = tmp_path / "again.arrow"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(again, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    monkeypatch.setattr(container, "INFLATE_LIMIT", 1000)
    with pytest.raises(TraceFormatError, match=r"again\.arrow: its compressed members would take 0.0 GB of memory \(at most 0.0 GB\)"):
        read_trace(again)


def test_zstd_round_trip(tmp_path: Path) -> None:
    trace = full_trace()
    back = read_trace(write_trace(trace, tmp_path / "z.arrow", compression="zstd"))
    assert all(back[n].equals(trace[n]) for n in TABLES)


def test_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_trace(full_trace(), tmp_path / "run.arrow")
    before = path.read_bytes()
    import portscope.ingest.container as container

    def boom(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise OSError("disk full")

    monkeypatch.setattr(container.os, "fsync", boom)
    with pytest.raises(OSError):
        write_trace(full_trace(), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.arrow"]  # no temporary left behind


def test_writer_refuses_invalid_tables(tmp_path: Path) -> None:
    trace = full_trace()
    trace.tables["ops"] = trace["ops"].set_column(4, "dur_ns", pa.array([-1, 5], pa.int64()))
    with pytest.raises(TraceFormatError, match="negative 'dur_ns'"):
        write_trace(trace, tmp_path / "bad.arrow")
    assert not (tmp_path / "bad.arrow").exists()


# ---- broken files: each must give its own clear error ----------------------------------------

CASES = json.loads((BROKEN / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_broken_file_gives_a_clear_error(name: str) -> None:
    path = BROKEN / name
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    for expected in CASES[name]:
        assert expected in message, f"{name}: {expected!r} not in {message!r}"


def test_every_problem_is_listed_at_once() -> None:
    with pytest.raises(TraceFormatError) as info:
        read_trace(BROKEN / "several_problems.arrow")
    assert len(info.value.problems) >= 3


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="no such file"):
        read_trace(tmp_path / "nope.arrow")
    with pytest.raises(TraceFormatError, match="directory"):
        read_trace(tmp_path)


def test_a_file_written_before_the_plan_table_reads_with_an_empty_plan(tmp_path: Path) -> None:
    """Tables added within version 1 (schema.ADDED_TABLES) may be absent; any other missing table is an error."""
    path = write_trace(full_trace(), tmp_path / "run.arrow")
    old = tmp_path / "old.arrow"
    with zipfile.ZipFile(path) as zf, zipfile.ZipFile(old, "w", zipfile.ZIP_STORED) as out:
        manifest = json.loads(zf.read("manifest.json"))
        del manifest["tables"]["plan"]
        out.writestr("manifest.json", json.dumps(manifest))
        for name in zf.namelist():
            if name not in ("manifest.json", "plan.arrow"):
                out.writestr(name, zf.read(name))
    back = read_trace(old)
    assert back["plan"].num_rows == 0 and back["ops"].num_rows == 2
    no_plan = full_trace()
    no_plan.tables["plan"] = no_plan["plan"].slice(0, 0)
    assert back.content_hash() == no_plan.content_hash()
    # declared in the manifest but absent: a cut file, not an old one
    with zipfile.ZipFile(path) as zf, zipfile.ZipFile(tmp_path / "cut.arrow", "w", zipfile.ZIP_STORED) as out:
        for name in zf.namelist():
            if name != "plan.arrow":
                out.writestr(name, zf.read(name))
    with pytest.raises(TraceFormatError, match="table 'plan' is missing"):
        read_trace(tmp_path / "cut.arrow")

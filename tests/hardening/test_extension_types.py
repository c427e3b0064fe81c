"""An uploaded trace carrying Arrow extension types (the CVE-2023-47248 route) never runs code."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from portscope.ingest import read_trace, write_trace
from portscope.ingest.errors import TraceFormatError

from .conftest import upload


class _Touch:
    """Unpickling this creates a file: the proof that something was deserialised as code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return (Path.touch, (self.marker,))


class _Hostile(pa.ExtensionType):
    """An extension type whose serialised form is a pickle (what pyarrow < 14.0.1 unpickled on read)."""

    def __init__(self, name: str, payload: bytes) -> None:
        self.payload = payload
        super().__init__(pa.int64(), name)

    def __arrow_ext_serialize__(self) -> bytes:
        return self.payload

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> _Hostile:
        raise AssertionError("a reader deserialised an extension type")


def _hostile_trace(source: Path, out: Path, marker: Path, name: str) -> Path:
    trace = read_trace(source)
    ops = trace.tables["ops"]
    ext = _Hostile(name, pickle.dumps(_Touch(marker)))
    column = pa.ExtensionArray.from_storage(ext, pa.array(range(ops.num_rows), pa.int64()))
    trace.tables["ops"] = ops.append_column(pa.field("payload", ext), column)
    trace.tables["regions"] = trace.tables["regions"].append_column(
        pa.field("payload", ext), pa.ExtensionArray.from_storage(ext, pa.array(range(trace.tables["regions"].num_rows), pa.int64()))
    )
    return write_trace(trace, out)


@pytest.mark.parametrize("name", ["arrow.py_extension_type", "portscope.hostile"])
def test_an_extension_column_is_read_as_plain_storage_or_refused(demo_paths: dict[str, Path], tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    path = _hostile_trace(demo_paths["eager"], tmp_path / "hostile.arrow", marker, name)
    try:
        trace = read_trace(path)
    except TraceFormatError:
        pass
    else:
        for table in trace.tables.values():
            assert not any(isinstance(f.type, pa.ExtensionType) for f in table.schema)
    assert not marker.exists()
    pickle.loads(pickle.dumps(_Touch(marker)))  # control: the payload is live when something does unpickle it
    assert marker.exists()


def test_an_uploaded_extension_type_runs_nothing(make_app, demo_paths: dict[str, Path], tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = _hostile_trace(demo_paths["eager"], tmp_path / "hostile.arrow", marker, "arrow.py_extension_type")
    app = make_app()
    with app.server.test_client() as c:
        answer = upload(c, path)
        assert answer.status_code in (200, 422), answer.get_json()
        if answer.status_code == 200:
            rid = answer.get_json()["run_id"]
            assert c.get(f"/api/run/{rid}").status_code == 200
            assert c.get(f"/run/{rid}").status_code == 200
    assert not marker.exists()

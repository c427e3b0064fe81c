"""The assembler's sliced tables (made a slice at a time, per-event columns parked on disk) equal its whole ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from portscope.ingest import assemble, link_nesting
from portscope.ingest.convert import load_any
from portscope.ingest.trace import read_trace, write_trace

HERE = Path(__file__).resolve().parents[1]
FILES = [HERE / "fixtures/kineto/rocm_mi250_small.json.gz", HERE / "fixtures/kineto/cuda_alexnet_small.json.gz",
         HERE / "vendor/fixtures/npu_kineto_eager.json", HERE / "vendor/fixtures/ascend_trace_view.json",
         HERE / "fixtures/kineto/mtia_inference.json.gz"]  # annotations that overlap without nesting  # fmt: skip


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_sliced_and_parked_tables_equal_the_whole_ones(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = load_any(path)
    monkeypatch.setattr(assemble, "SLICE_ROWS", 3)  # many batches, and every per-event column parked on disk
    monkeypatch.setattr(link_nesting, "CHUNK_ROWS", 4)  # nesting searched a few rows at a time, the open ones carried
    out = write_trace(load_any(path, sliced=True), tmp_path / "sliced.arrow")
    sliced = read_trace(out)
    assert whole["ops"].num_rows + whole["engine_slices"].num_rows > 6
    for name in ("ops", "engine_slices", "signals", "transfers", "regions", "runtime_calls", "compiles"):
        assert sliced[name].to_pylist() == whole[name].to_pylist(), name
    assert sliced.content_hash() == whole.content_hash()

"""kernel_details.csv names coded block by block (issue 19): repeated across blocks, hashes that collide, rows out
of start order. Expected rows written by hand from the table below."""

from __future__ import annotations

from pathlib import Path

import pytest

from portscope.ingest.readers import _chrome_slices, _kernel_columns, _kernel_names, _kernel_order
from portscope.ingest.readers.ascend_csv import read_kernel_details

# file order B A B C A "C": by start A(10) B(20) B(30) C(40) A(50) C(60); "C" is C once its quotes are cleaned.
# The formats column (not read) makes a row longer than a third of a block: several blocks.
_F = ";".join(["FORMAT_ND"] * 10)
KERNELS = (
    "Name,Type,Accelerator Core,Start Time(us),Duration(us),Input Formats\n"
    f"B,,AI_CORE,30,1,{_F}\nA,Add,AI_CORE,10,1,{_F}\nB,,AI_CORE,20,1,{_F}\nC,,AI_CPU,40,2,{_F}\n"
    f'A,Add,AI_CORE,50,1,{_F}\n"C",,AI_CPU,60,3,{_F}\n'
)


@pytest.mark.parametrize("collide", [False, True])
def test_kernel_names_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collide: bool) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(KERNELS)
    monkeypatch.setattr(_kernel_columns, "_BLOCK_BYTES", 40)  # a block: 4x the header line (two or three rows)
    blocks = []
    add = _kernel_names.NameCoder.add
    monkeypatch.setattr(_kernel_names.NameCoder, "add", lambda self, words, local: blocks.append(words) or add(self, words, local))
    monkeypatch.setattr(_chrome_slices, "SLICE_ROWS", 4)
    monkeypatch.setattr(_kernel_columns, "_HOLD", 2)  # entries' hashes and ends: 2 in memory, the rest on disk
    monkeypatch.setattr(_kernel_names, "SWEEP_ROWS", 2)  # entries swept 2 at a time (a hash's run carried across)
    monkeypatch.setattr(_kernel_names, "TEXT_WINDOW", 1)  # names' text read one name at a time
    monkeypatch.setattr(_kernel_order, "RUN_ROWS", 2)  # the sort by hash: runs of 2 entries, merged 3 at a time
    monkeypatch.setattr(_kernel_order, "MERGE_ROWS", 3)
    if collide:  # every name of one hash: told apart by their text
        monkeypatch.setattr(_kernel_names, "hash", lambda _: 7, raising=False)
    for sliced in (False, True):
        blocks.clear()
        trace = read_kernel_details(path, sliced=sliced)
        if sliced:
            engine_slices = [r for b in trace.slices["engine_slices"].batches() for r in b.to_pylist()]
            ops = [r for b in trace.slices["ops"].batches() for r in b.to_pylist()]
        else:
            engine_slices, ops = trace.tables["engine_slices"].to_pylist(), trace.tables["ops"].to_pylist()
            names = trace.tables["engine_slices"]["name"].combine_chunks()
            assert names.dictionary.to_pylist() == ["A", "B", "C"]  # in order of first start, not of the file
            assert names.indices.to_pylist() == [0, 1, 1, 2, 0, 2]
        assert [(s["name"], s["start"], s["dur"], s["kind"]) for s in engine_slices] == [
            ("A", 0, 1000, "compute"), ("B", 10_000, 1000, "compute"), ("B", 20_000, 1000, "compute"),
            ("C", 30_000, 2000, "fallback"), ("A", 40_000, 1000, "compute"), ("C", 50_000, 3000, "fallback")]  # fmt: skip
        assert [o["name"] for o in ops] == ["Add", "B", "B", "C", "Add", "C"]  # Type, or Name where it has none
        signals = ([r for b in trace.slices["signals"].batches() for r in b.to_pylist()] if "signals" in trace.slices
                   else trace.tables["signals"].to_pylist())  # fmt: skip
        assert [(s["op_name"], s["op_id"], s["time_ns"]) for s in signals] == [("C", 3, 30_000), ("C", 5, 50_000)]
        assert len(blocks) >= 2 and set(blocks[0]) & {w for b in blocks[1:] for w in b}  # a name met again in a later block

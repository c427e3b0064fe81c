"""kernel_details' name coder on disk (issue 19): blocks' names as entries, codes by a sort of (hash, entry) and a
sweep, with every knob tiny. Expected codes and dictionaries written by hand from the blocks below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from portscope.ingest.readers import _kernel_names, _kernel_order
from portscope.ingest.spill import DiskColumn

# three CSV blocks: (their distinct names in order of first appearance, per kernel its name's position)
BLOCKS = [(["b", "a"], [0, 1, 0]), (["a", "cc"], [1, 0, 0]), (["b", "dd", "cc", "é"], [0, 1, 2, 3, 1])]
# entries 0 b, 1 a | 2 a, 3 cc | 4 b, 5 dd, 6 cc, 7 é; names by first appearance: b a cc dd é
KERNEL_ENTRIES = [0, 1, 0, 3, 2, 2, 4, 5, 6, 7, 5]
KERNEL_CODES = [0, 1, 0, 2, 1, 1, 0, 3, 2, 4, 3]


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kernel_names, "SWEEP_ROWS", 2)  # entries swept 2 at a time: runs of a hash carried across
    monkeypatch.setattr(_kernel_names, "TEXT_WINDOW", 3)  # names' text read 3 bytes at a time
    monkeypatch.setattr(_kernel_order, "RUN_ROWS", 2)
    monkeypatch.setattr(_kernel_order, "MERGE_ROWS", 3)


def _coded(tmp_path: Path, blocks: list[tuple[list[str], list[int]]]) -> tuple[list[int], list[int], list[str]]:
    coder = _kernel_names.NameCoder(tmp_path / "kernel_details.csv", hold=2)
    name = DiskColumn("i", 2)
    for words, local in blocks:
        name.extend(coder.add(words, np.array(local, dtype=np.int32)))
    entries = name.read(0, len(name)).tolist()
    codes, words = coder.finish(name)
    assert codes.on_disk >= len(codes) - 2  # at most `hold` codes in memory
    return entries, codes.read(0, len(codes)).tolist(), words.to_pylist()


@pytest.mark.parametrize("hashing", ["python", "by length", "one for all"])
def test_names_coded_in_order_of_first_appearance(tmp_path: Path, tiny: None, monkeypatch: pytest.MonkeyPatch,
                                                  hashing: str) -> None:  # fmt: skip
    if hashing == "by length":  # b, a, é of one hash (é is 2 bytes, but 1 character); cc and dd of another
        monkeypatch.setattr(_kernel_names, "hash", len, raising=False)
    elif hashing == "one for all":  # every name of one hash: a run longer than a sweep, told apart by text
        monkeypatch.setattr(_kernel_names, "hash", lambda _: 7, raising=False)
    entries, codes, words = _coded(tmp_path, BLOCKS)
    assert entries == KERNEL_ENTRIES
    assert codes == KERNEL_CODES
    assert words == ["b", "a", "cc", "dd", "é"]


def test_every_name_its_own_keeps_the_entries(tmp_path: Path, tiny: None) -> None:
    entries, codes, words = _coded(tmp_path, [(["x", "y"], [1, 0, 1]), (["z"], [0, 0])])
    assert entries == codes == [1, 0, 1, 2, 2]
    assert words == ["x", "y", "z"]


def test_a_name_in_every_block(tmp_path: Path, tiny: None) -> None:
    blocks = [(["k", f"n{i}"], [1, 0]) for i in range(5)]  # entries k at 0, 2, 4, 6, 8: one run of a hash across sweeps
    entries, codes, words = _coded(tmp_path, blocks)
    assert entries == [1, 0, 3, 2, 5, 4, 7, 6, 9, 8]
    assert codes == [1, 0, 2, 0, 3, 0, 4, 0, 5, 0]
    assert words == ["k", "n0", "n1", "n2", "n3", "n4"]

"""kernel_details' kernel names coded on disk (issue 19): nothing held per distinct name while the table is read.

While reading, each CSV block's distinct names become *entries* (numbered in file order; within a block in order
of first appearance): per entry its hash and the end of its UTF-8 text go to `DiskColumn`s, the text to a
temporary file, and each kernel keeps its entry number. Once read, the entries are sorted by (hash, entry) on
disk (`_kernel_order.sort_by_start`) and swept a chunk at a time: within a run of one hash, entries whose text
equals an earlier entry's (compared by text: hashes may collide) point to the first of them, their *head*.
Heads numbered in entry order are the names' codes in order of first appearance in the file, as before; the
kernels' entry numbers are mapped to them by windowed gathers, and the dictionary is the heads' text in order.
What is resident: one chunk of entries, the (rare) text of one run of a hash, and the dictionary at the end.

A dictionary of more than `DICT_MAX_BYTES` (4-byte offsets and text of the distinct names) is not built: the codes
are made alike, and `DiskNames` keeps the names on disk (the entries' text file, each code's head entry), from which
a column of plain strings is gathered batch by batch (`DiskNames.texts`): what is resident is one batch's names,
whatever the number of distinct names.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from ..errors import TraceFormatError
from ..spill import DiskColumn, release_memory
from ._kernel_order import sort_by_start

SWEEP_ROWS = 1 << 18  # entries sorted, merged and swept at a time once the table is read (tests make it tiny)
TEXT_WINDOW = 16 << 20  # bytes of the names' text read at a time when entries of one hash are compared
_MAX_CODES = 2**31  # codes and entry numbers are int32
DICT_MAX_BYTES = 128 << 20  # a bigger dictionary of distinct names is not built: plain strings (`DiskNames`; tests make it tiny)
GAP_BYTES = 64 << 10  # names' texts this close together on disk are read in one read (the bytes between skipped)


class NameCoder:
    """Names of a kernel_details.csv, block by block: `add` gives each kernel an entry number, `finish` the codes."""

    def __init__(self, path: Path, hold: int) -> None:
        self.path, self.hold = path, hold
        self.hashes = DiskColumn("q", hold)  # per entry: hash of its name
        self.ends = DiskColumn("q", hold)  # per entry: where its text ends in `text`
        self.text = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 (lives as long as the coder)
        self.size = 0

    def add(self, words: list[str], local: np.ndarray) -> np.ndarray:
        """Entry numbers (int32) of a block's kernels: `words` the block's distinct names in order of first
        appearance, `local` per kernel its name's position in `words`."""
        first = len(self.hashes)
        if first + len(words) >= _MAX_CODES:
            raise TraceFormatError(self.path, f"more than {_MAX_CODES} kernel names (counted per block)")
        self.hashes.extend(np.fromiter((hash(w) for w in words), dtype=np.int64, count=len(words)))
        text = [w.encode("utf-8") for w in words]
        self.ends.extend(self.size + np.cumsum(np.fromiter(map(len, text), dtype=np.int64, count=len(text))))
        data = b"".join(text)
        del text
        if self.text.write(data) != len(data):
            raise OSError("the temporary file of kernel names took a short write")
        self.size += len(data)
        return (np.asarray(local, dtype=np.int64) + first).astype(np.int32)

    def finish(self, name: DiskColumn) -> tuple[DiskColumn, pa.Array | DiskNames]:
        """(The kernels' name codes in order of first appearance, the dictionary of names in code order) from
        `name`, the kernels' entry numbers (closed when new codes replace it). The coder is spent. A dictionary of
        more than `DICT_MAX_BYTES` is given as `DiskNames` (the names on disk, by code) instead."""
        n = len(self.hashes)
        entry = DiskColumn("q", self.hold)
        for lo in range(0, n, SWEEP_ROWS):
            entry.extend(np.arange(lo, min(lo + SWEEP_ROWS, n), dtype=np.int64))
        by_hash = sort_by_start({"start": self.hashes, "entry": entry}, hold=self.hold, run_rows=SWEEP_ROWS,
                                merge_rows=SWEEP_ROWS)  # closes both; a few MB held (their text compared in Python)
        later, head, repeated = self._repeats(by_hash["start"], by_hash["entry"])
        by_hash["start"].close()
        by_hash["entry"].close()
        release_memory()
        if len(later):
            moved = sort_by_start({"start": later, "head": head}, hold=self.hold, run_rows=SWEEP_ROWS, merge_rows=SWEEP_ROWS)
            later, head = moved["start"], moved["head"]
        count = n - len(later)
        plain = 4 * (count + 1) + self.size - repeated > DICT_MAX_BYTES
        codes, words, heads = self._codes(later, head, repeated, plain)
        later.close()
        head.close()
        if len(codes):  # some entries repeat a name: kernels' entries -> codes
            coded = DiskColumn("i", self.hold)
            for _, block in name.blocks(SWEEP_ROWS):
                coded.extend(codes.take(block))
            name.close()
            name = coded
        codes.close()
        if words is None:  # the names stay on disk: the entries' text, each code's head entry
            return name, DiskNames(self.ends, self.text, heads, count)
        self.ends.close()
        self.text.close()
        return name, words

    def _repeats(self, hashes: DiskColumn, entries: DiskColumn) -> tuple[DiskColumn, DiskColumn, int]:
        """From the entries sorted by (hash, entry): (entries that repeat an earlier entry's name, that entry's
        number (the name's head), their text's bytes in all)."""
        later, head = DiskColumn("q", self.hold), DiskColumn("q", self.hold)
        repeated = 0
        carry_h, carry_e = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        n = len(hashes)
        for lo in range(0, n, SWEEP_ROWS):
            h = np.concatenate([carry_h, hashes.read(lo, lo + SWEEP_ROWS)])
            e = np.concatenate([carry_e, entries.read(lo, lo + SWEEP_ROWS)])
            if lo + SWEEP_ROWS < n:  # the last hash's run may go on in the next chunk: carried
                cut = int(np.searchsorted(h, h[-1], "left"))
                h, e, carry_h, carry_e = h[:cut], e[:cut], h[cut:], e[cut:]
            else:
                carry_h, carry_e = carry_h[:0], carry_e[:0]
            repeated += self._heads(h, e, later, head)
        return later, head, repeated

    def _heads(self, h: np.ndarray, e: np.ndarray, later: DiskColumn, head: DiskColumn) -> int:
        """Runs of one hash (whole, in entry order) compared by text: each entry whose text an earlier entry of its
        run has is appended to `later`, that entry to `head`; returns their text's bytes."""
        if len(h) < 2:
            return 0
        same = h[1:] == h[:-1]
        if not same.any():
            return 0
        in_run = np.r_[False, same] | np.r_[same, False]
        e = e[in_run]
        starts = np.flatnonzero(np.r_[True, h[in_run][1:] != h[in_run][:-1]])
        texts = self._texts(e)
        found_later, found_head, size = [], [], 0
        for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(e)], strict=True):
            first: dict[bytes, int] = {}
            for i in range(a, b):
                at = first.setdefault(texts[i], int(e[i]))
                if at != e[i]:
                    found_later.append(int(e[i]))
                    found_head.append(at)
                    size += len(texts[i])
        later.extend(np.array(found_later, dtype=np.int64))
        head.extend(np.array(found_head, dtype=np.int64))
        return size

    def _texts(self, entries: np.ndarray) -> list[bytes]:
        """The UTF-8 text of each of `entries` (distinct), read `TEXT_WINDOW` bytes of the file at a time."""
        begin, end = _bounds(self.ends, entries)
        order = np.argsort(begin, kind="stable")
        b, t = begin[order].tolist(), end[order]  # disjoint ranges: ends in order too
        out: list[bytes] = [b""] * len(entries)
        fd, i = self.text.fileno(), 0
        while i < len(b):
            j = max(i + 1, int(np.searchsorted(t, b[i] + TEXT_WINDOW, "right")))
            chunk = os.pread(fd, int(t[j - 1]) - b[i], b[i])
            for k in range(i, j):
                out[int(order[k])] = chunk[b[k] - b[i] : int(t[k]) - b[i]]
            i = j
        return out

    def _codes(self, later: DiskColumn, head: DiskColumn, repeated: int,
               plain: bool) -> tuple[DiskColumn, pa.Array | None, DiskColumn | None]:  # fmt: skip
        """(Per entry its code, empty when no entry repeats a name; the dictionary, None if `plain`; if `plain`, each
        code's head entry, None when every entry is a head): heads numbered in entry order, a later entry given its
        head's code; `later` in entry order."""
        n, count, size = len(self.ends), len(self.ends) - len(later), self.size - repeated
        heads = DiskColumn("q", self.hold) if plain and len(later) else None
        if size >= 2**31 and not plain:
            raise TraceFormatError(self.path, f"{size} bytes of distinct kernel names: more than a string column holds")
        offsets = np.zeros(0 if plain else count + 1, dtype=np.int32)
        data = np.empty(0 if plain else size, dtype=np.uint8)
        codes = DiskColumn("i", self.hold)
        seen, filled, at = 0, 0, 0  # codes given, bytes copied, position in `later`
        text_at = 0
        for lo in range(0, n, SWEEP_ROWS):
            hi = min(lo + SWEEP_ROWS, n)
            stop = at + int(np.searchsorted(later.read(at, at + (hi - lo)), hi, "left"))
            moved, to = later.read(at, stop), head.read(at, stop)
            at = stop
            is_head = np.ones(hi - lo, dtype=bool)
            is_head[moved - lo] = False
            code = seen + np.cumsum(is_head, dtype=np.int64) - 1
            if len(later):  # else every entry is a head: its code is its number
                inside = to >= lo
                code[moved[inside] - lo] = code[to[inside] - lo]
                code[moved[~inside] - lo] = codes.take(to[~inside])
                codes.extend(code)
            if plain:
                if heads is not None:
                    heads.extend(lo + np.flatnonzero(is_head))
                seen += int(is_head.sum())
                continue
            ends = self.ends.read(lo, hi)
            lengths = np.diff(ends, prepend=text_at)
            chunk = np.empty(int(ends[-1]) - text_at, dtype=np.uint8)
            got = os.preadv(self.text.fileno(), [memoryview(chunk)], text_at)
            if got != len(chunk):
                raise OSError("the temporary file of kernel names was cut short")
            kept = chunk[np.repeat(is_head, lengths)]
            data[filled : filled + len(kept)] = kept
            new = int(is_head.sum())
            offsets[seen + 1 : seen + 1 + new] = filled + np.cumsum(lengths[is_head])
            filled += len(kept)
            seen += new
            text_at = int(ends[-1])
        if plain:
            return codes, None, heads
        words = pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        return codes, words, None


def _bounds(ends: DiskColumn, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Where each of `entries` (distinct, any order) begins and ends in the names' text, `ends` each entry's end):
    one read of `ends` when the entries are consecutive and increasing, gathers otherwise."""
    if not len(entries):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    first, last = int(entries[0]), int(entries[-1])
    if last - first + 1 == len(entries) and bool(np.all(np.diff(entries) == 1)):
        read = ends.read(max(first - 1, 0), last + 1)
        return (np.r_[np.zeros(1, dtype=np.int64), read[:-1]], read) if first == 0 else (read[:-1], read[1:])
    end = ends.take(entries)
    begin = np.zeros(len(entries), dtype=np.int64)
    has = entries > 0
    begin[has] = ends.take(entries[has] - 1)
    return begin, end


class DiskNames:
    """Distinct names kept on disk, by code (what `NameCoder.finish` gives for a dictionary too big to hold): each
    code's head entry (`heads`; None: the code is the entry) and the entries' text (`ends` into `text`)."""

    def __init__(self, ends: DiskColumn, text: BinaryIO, heads: DiskColumn | None, count: int) -> None:
        self.ends, self.text, self.heads, self.count = ends, text, heads, count

    def __len__(self) -> int:
        return self.count

    def texts(self, codes: np.ndarray) -> pa.Array:
        """The names of `codes` (any order, repeats allowed) as a plain string array: each distinct code's text read
        from disk (`TEXT_WINDOW` bytes at a time at most, texts closer than `GAP_BYTES` in one read), then taken.
        Held: the distinct texts, their bounds, one window when texts are not adjacent on disk, and the result."""
        codes = np.asarray(codes, dtype=np.int64)
        if len(codes) < 2 or bool(np.all(codes[1:] > codes[:-1])):  # increasing (names each its own): no sort
            distinct, inverse = codes, None
        else:
            distinct, inverse = np.unique(codes, return_inverse=True)
        entries = distinct if self.heads is None else self.heads.take(distinct)  # increasing, as the codes
        begin, end = _bounds(self.ends, entries)
        lengths = end - begin
        total = int(lengths.sum())
        if total >= 2**31:
            raise OverflowError(f"{total} bytes of kernel names in one slice: more than a string column holds")
        data = np.empty(total, dtype=np.uint8)
        breaks = np.r_[np.flatnonzero(begin[1:] - end[:-1] > GAP_BYTES) + 1, len(entries)]
        fd, i, at = self.text.fileno(), 0, 0
        while i < len(entries):
            j = max(i + 1, int(np.searchsorted(end, begin[i] + TEXT_WINDOW, "right")))
            j = min(j, int(breaks[np.searchsorted(breaks, i, "right")]))
            lo, hi = int(begin[i]), int(end[j - 1])
            gaps = begin[i + 1 : j] - end[i : j - 1]
            if not gaps.any():  # adjacent texts: read where they go
                got = os.preadv(fd, [memoryview(data[at : at + hi - lo])], lo)
                kept = hi - lo
            else:  # read with the bytes between them, which are dropped
                chunk = np.frombuffer(os.pread(fd, hi - lo, lo), dtype=np.uint8)
                got = len(chunk)
                parts = np.empty(2 * (j - i) - 1, dtype=np.int64)
                parts[0::2], parts[1::2] = lengths[i:j], gaps
                keep = np.zeros(len(parts), dtype=bool)
                keep[0::2] = True
                kept = int(lengths[i:j].sum())
                data[at : at + kept] = chunk[np.repeat(keep, parts)]
                del chunk
            if got != hi - lo:
                raise OSError("the temporary file of kernel names was cut short")
            at += kept
            i = j
        offsets = np.zeros(len(entries) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        words = pa.Array.from_buffers(pa.string(), len(entries), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        if inverse is None:
            return words
        return words.take(pa.array(inverse.reshape(-1).astype(np.int32)))

    def close(self) -> None:
        self.ends.close()
        self.text.close()
        if self.heads is not None:
            self.heads.close()


__all__ = ["DICT_MAX_BYTES", "GAP_BYTES", "SWEEP_ROWS", "TEXT_WINDOW", "DiskNames", "NameCoder"]

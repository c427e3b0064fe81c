"""A memory table of torch_npu / CANN (``memory_record.csv``, ``operator_memory.csv``) read into numpy columns: columns
found by name with the unit their header gives in parentheses, cells parsed exactly, every problem kept for one error.

Units: sizes in B, KB, MB or GB, binary as the Ascend documentation converts them (KB = 1024 B, MB = 1024 KB,
GB = 1024 MB; KiB, MiB, GiB too); times in ns, us (µs) or ms. A cell is a decimal string (``1704161511420306.491``,
``1.5``; ``2e-3`` too) read without a float: a time exact to the ns, a size rounded to the nearest byte (half to
even; decimals past the ninth are cut). Empty, ``N/A``, ``NA`` and ``-`` cells are "not given" (`NONE`); quotes,
tabs and spaces around a cell are removed (torch_npu writes some times as ``"1704161511420306.491<TAB>"``). Column
names match whatever their case, spacing and underscores (``Device_id`` is ``device id``). A row whose every cell is
empty (``,,,,``: a spreadsheet's blank row) is skipped and counted; one with a cell filled is read as any other.
Read in blocks by pyarrow's CSV reader, decimals parsed by Arrow's string kernels (a cell of another form, one at a
time).
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import re
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..arrow_values import numbers, strings, values_of
from ..errors import TraceFormatError
from ..events import NONE
from .source import SizeCaps, read_bytes

SIZE_UNITS = {"b": 1, "bytes": 1, "kb": 1024, "kib": 1024, "mb": 2**20, "mib": 2**20, "gb": 2**30, "gib": 2**30}
TIME_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6}
DEVICE_COLUMNS = ("device type", "device", "device id")  # the first a row fills gives its device
LIMIT = 2**61  # bytes and ns from here on are not a profile (and would overflow int64 columns)
MAX_PROBLEMS = 12
BLOCK_BYTES = 4 << 20  # CSV read this much at a time (tests make it tiny)
_EMPTY = strings(["", "N/A", "NA", "-"])  # what an empty cell says
_BLANK, _ZERO, _MINUS, _NULL = strings(["", "0", "-", None])  # Arrow scalars: a Python value would import pandas
_NAMED = re.compile(r"^(.*?)\s*\(\s*([^()]*?)\s*\)\s*$")
_INDEX = re.compile(r"(\d{1,9})\s*$")
_PLAIN = r"^(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<frac>[0-9]*))?$"
_FRAC = 9  # decimals kept
_LINE = re.compile(r"line (\d+)")


def column_key(cell: str) -> tuple[str, str | None]:
    """(the name matched on, the unit in parentheses or None) of a header cell: ``Total Allocated(MB)`` ->
    (``total allocated``, ``MB``)."""
    cell = cell.strip().strip('"').strip()
    m = _NAMED.match(cell)
    name, unit = (m.group(1), m.group(2)) if m else (cell, None)
    return " ".join(name.replace("_", " ").split()).lower(), unit


def header_keys(text: str) -> dict[str, str | None]:
    """Column name -> unit of the first line of `text` (a sniff: nothing raised)."""
    line = text.lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")
    try:
        cells = next(csv.reader([line]), [])
    except csv.Error:
        return {}
    return dict(column_key(c) for c in reversed(cells))  # reversed: the first of two equal names wins


def blank_rows(batch: pa.RecordBatch) -> np.ndarray:
    """The rows of a block of text columns whose every cell is empty, spaces and quotes aside (``,,,,`` or
    ``"",""``: a blank row as a spreadsheet saves it), a column at a time while any is."""
    import pyarrow.compute as pc

    blank = np.ones(batch.num_rows, dtype=bool)
    for column in batch.columns:
        if not blank.any():
            break  # most blocks: after their first column
        blank &= values_of(pc.equal(pc.utf8_trim(column, ' \t"'), _BLANK))
    return blank


def blank_line(text: str) -> bool:
    """Whether a CSV line holds only empty cells (a blank row of another width than the header's)."""
    return not text.strip(' \t\r\n",')


def empty_rows(n: int) -> str:
    """What a run says of the blank rows skipped (its "could not provide" line)."""
    return f"{n} empty row{'s' if n != 1 else ''} (every cell empty, as a spreadsheet saves a blank row): skipped"


@dataclasses.dataclass
class MemoryColumns:
    """A memory table's rows as columns: `numbers` (bytes or ns; NONE: not given) of the size and time columns the
    header has, `texts` ((distinct cleaned cells, a code per row); code 0: None) of the text columns asked for and
    the header has, and each row's `device` (-1: the host); `empty_rows` were skipped (every cell empty: `blank_rows`)."""

    header: list[str]
    rows: int
    numbers: dict[str, np.ndarray]
    texts: dict[str, tuple[list[str | None], np.ndarray]]
    device: np.ndarray
    empty_rows: int = 0


def _clean(cells: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(the cells without quotes, tabs and spaces around them, a mask of the empty ones)."""
    import pyarrow.compute as pc  # here, as in the other two: every conversion imports this module, few read a CSV

    text = pc.utf8_trim_whitespace(pc.utf8_trim(pc.utf8_trim_whitespace(cells), '"'))
    return text, values_of(pc.is_in(text, value_set=_EMPTY))


def _one(cell: str, scale: int) -> int | None | bool:
    """A cell of no plain decimal form (``2e-3``) in the unit `scale`; None: no number; False: out of range."""
    try:
        value = Decimal(cell)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value.adjusted() > 20:
        return False
    out = int((value * scale).to_integral_value(ROUND_HALF_EVEN))
    return out if abs(out) < LIMIT else False


def _scaled(text: pa.Array, empty: np.ndarray, scale: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value x scale of each cleaned cell, rounded: NONE when empty or wrong; a mask of the cells that are no number,
    one of those out of range)."""
    import pyarrow.compute as pc

    parts = pc.extract_regex(text, _PLAIN)
    plain = values_of(parts.is_valid()) & ~empty
    whole = pc.utf8_ltrim(parts.field("whole"), "0")
    frac = pc.coalesce(parts.field("frac"), _BLANK)
    digits = (values_of(pc.utf8_length(pc.coalesce(parts.field("whole"), _BLANK)))
              + values_of(pc.utf8_length(frac)))  # fmt: skip
    short = values_of(pc.utf8_length(pc.coalesce(whole, _BLANK))) <= 18
    plain &= digits > 0
    use = numbers(plain & short)
    w = values_of(pc.cast(pc.if_else(use, pc.if_else(pc.equal(whole, _BLANK), _ZERO, whole), _ZERO), pa.int64()))
    f = values_of(pc.cast(pc.if_else(use, pc.utf8_slice_codeunits(pc.utf8_rpad(frac, _FRAC, "0"), 0, _FRAC), _ZERO),
                          pa.int64()))  # fmt: skip
    q, r = np.divmod(f * scale, 10**_FRAC)
    q += (2 * r > 10**_FRAC) | ((2 * r == 10**_FRAC) & (q % 2 == 1))
    big = w >= LIMIT // scale
    value = np.where(big, 0, w) * scale + q
    value = np.where(values_of(pc.equal(parts.field("sign"), _MINUS), null=False), -value, value)
    far = plain & (~short | big | (np.abs(value) >= LIMIT))
    wrong = np.zeros(len(value), dtype=bool)
    value[far | ~plain] = NONE
    for i in np.flatnonzero(~plain & ~empty).tolist():  # another form: one at a time
        one = _one(text[i].as_py(), scale)
        if one is None or one is False:
            wrong[i], far[i] = one is None, one is False
        else:
            value[i] = one
    return value, wrong, far


def _device(cell: str | None) -> int | None:
    """The device a cell names: ``NPU:0``, ``Ascend 1``, ``3`` -> its index, ``CPU`` -> -1; None: it names none."""
    if cell is None:
        return None
    if cell.upper().startswith("CPU"):
        return -1
    m = _INDEX.search(cell)
    return int(m.group(1)) if m else None


class _Problems:
    """Problems found in the rows, the first MAX_PROBLEMS kept as text (with its line: the rows read before it, the
    header, and the ragged lines skipped before it), and the rows that had one."""

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.skipped: list[int] = []  # line numbers of ragged rows, as the CSV reader skips them
        self.bad_rows = 0

    def add(self, before: int, bad: np.ndarray, say: Any) -> None:
        """`say(i)`: the problem of row i of a block read after `before` rows (`bad`: the block's rows with it)."""
        for i in np.flatnonzero(bad)[: max(MAX_PROBLEMS - len(self.listed), 0)].tolist():
            line = before + i + 2
            for skipped in sorted(self.skipped):
                line += skipped <= line
            self.listed.append(f"line {line}: {say(i)}")


def _open(path: Path, caps: SizeCaps) -> tuple[bytes, list[str]]:
    """The file's bytes (UTF-8 checked) and its header cells (stripped)."""
    raw = read_bytes(path, caps)
    decoder = codecs.getincrementaldecoder("utf-8")()
    for at in range(0, len(raw), 1 << 24):
        try:
            decoder.decode(raw[at : at + (1 << 24)], at + (1 << 24) >= len(raw))
        except UnicodeDecodeError as exc:
            raise TraceFormatError(path, f"not UTF-8 text (invalid byte at offset {at + exc.start})") from None
    line = raw.split(b"\n", 1)[0].decode("utf-8").lstrip("\ufeff").rstrip("\r")
    try:
        return raw, [c.strip() for c in next(csv.reader([line]), [])]
    except csv.Error as exc:
        raise TraceFormatError(path, f"the header line is not CSV ({exc})") from None


def _units(path: Path, header: list[str], columns: dict[str, tuple[int, str | None]], needs: tuple[str, ...],
           sizes: tuple[str, ...], times: tuple[str, ...]) -> dict[str, int]:  # fmt: skip
    """The scale of each size and time column the header has (bytes or ns per unit); one error for every column
    missing or of no known unit."""
    problems = [f"the header lacks the column {n!r}" for n in needs if n not in columns]
    scale: dict[str, int] = {}
    for kinds, units, what in ((sizes, SIZE_UNITS, "size"), (times, TIME_UNITS, "time")):
        for name in (n for n in kinds if n in columns):
            i, unit = columns[name]
            factor = units.get((unit or "").lower())
            if factor is None:
                shown = "no unit" if unit is None else f"the unit {unit!r}"
                known = ", ".join(u for u in units if u not in ("bytes", "μs"))
                problems.append(f"the column {header[i]!r} gives {shown}: a {what} in one of {known}")
            else:
                scale[name] = factor
    if problems:
        raise TraceFormatError(path, [*problems, f"(the header has {header[:16]})"])
    return scale


def read_memory_table(path: Path, caps: SizeCaps, *, needs: tuple[str, ...], sizes: tuple[str, ...],
                      times: tuple[str, ...], texts: tuple[str, ...] = (),
                      required: tuple[str, ...] = ()) -> MemoryColumns:  # fmt: skip
    """The columns of a memory CSV (names as `column_key` gives them): `needs` must be in the header; `sizes` and
    `times` are read as numbers in their header's unit, `texts` as text, `required` must be filled in every row.
    Rows whose every cell is empty are skipped (counted). One TraceFormatError lists every problem (missing columns,
    unknown units, malformed rows)."""
    import pyarrow.compute as pc
    from pyarrow import csv as pa_csv

    raw, header = _open(path, caps)
    columns: dict[str, tuple[int, str | None]] = {}
    for i, cell in enumerate(header):
        name, unit = column_key(cell)
        columns.setdefault(name, (i, unit))
    scale = _units(path, header, columns, needs, sizes, times)
    wanted = sorted({*scale, *(c for c in (*texts, *DEVICE_COLUMNS) if c in columns)}, key=lambda c: columns[c][0])
    names = [f"c{i}" for i in range(len(header))]  # by position: header cells may repeat or differ in spaces
    ragged: list[str] = []
    blank_lines: list[int | None] = []  # blank rows of another width than the header's
    problems = _Problems()

    def bad_row(row: Any) -> str:
        if blank_line(row.text):  # a blank row of another width: skipped as the others
            blank_lines.append(row.number)
        else:
            ragged.append(f"line {row.number or '?'}: {row.actual_columns} cells, the header has {row.expected_columns}")
        if row.number:
            problems.skipped.append(row.number)
        return "skip"

    got: dict[str, list[np.ndarray]] = {c: [] for c in wanted if c in scale or c in texts}
    devices: list[np.ndarray] = []
    kept: list[np.ndarray] = []  # per block, its rows with a cell filled
    coded: dict[str, dict[str | None, int]] = {c: {None: 0} for c in texts if c in columns}
    rows = 0
    try:
        reader = pa_csv.open_csv(
            pa.BufferReader(raw),
            read_options=pa_csv.ReadOptions(column_names=names, skip_rows=1, use_threads=False,
                                            block_size=max(BLOCK_BYTES, 4 * (raw.find(b"\n") + 1 or len(raw)))),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True, invalid_row_handler=bad_row),
            # every column, not only those read: a row is blank only where all its cells are
            convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False,
                                                  quoted_strings_can_be_null=False),
        )  # fmt: skip
        for batch in reader:
            n, first = batch.num_rows, rows
            blank = blank_rows(batch)  # kept in the block (its lines count) and dropped at the end
            kept.append(~blank)
            bad = np.zeros(n, dtype=bool)
            device = np.full(n, NONE, dtype=np.int64)
            cells: dict[str, tuple[pa.Array, list[str | None], np.ndarray]] = {}
            for c in wanted:
                text, empty = _clean(batch.column(names[columns[c][0]]))
                label = header[columns[c][0]]
                if c in scale:
                    value, wrong, far = _scaled(text, empty, scale[c])
                    problems.add(first, wrong, lambda i, t=text, lb=label: f"{lb} is {t[i].as_py()[:30]!r}, not a number")
                    problems.add(first, far, lambda i, t=text, lb=label: f"{lb} {t[i].as_py()[:30]!r} is out of range")
                    got[c].append(value)
                    bad |= wrong | far
                    if c in required:
                        problems.add(first, empty & ~blank, lambda i, lb=label: f"no {lb}")
                        bad |= empty & ~blank
                    continue
                encoded = pc.if_else(numbers(empty), _NULL, text).dictionary_encode()
                values = encoded.dictionary.to_pylist()
                at = values_of(encoded.indices, null=-1)
                cells[c] = (text, values, at)
                if c in texts:
                    code = np.array([coded[c].setdefault(v, len(coded[c])) for v in values] or [0], dtype=np.int64)
                    got[c].append(np.where(at >= 0, code[np.maximum(at, 0)], 0))
            for c in (c for c in DEVICE_COLUMNS if c in cells):  # the first device column a row fills
                text, values, at = cells[c]
                index = np.array([_device(v) for v in values] or [0], dtype=object)[np.maximum(at, 0)]
                unnamed = (at >= 0) & np.array([v is None for v in index], dtype=bool) & (device == NONE)
                problems.add(first, unnamed, lambda i, t=text: f"the device {t[i].as_py()[:30]!r} is neither NPU:<index>, CPU nor an index")
                bad |= unnamed
                take = (at >= 0) & ~unnamed & (device == NONE)
                device[take] = index[take].astype(np.int64)
            devices.append(np.where(device == NONE, 0, device))
            problems.bad_rows += int(bad.sum())
            rows += n
    except pa.ArrowInvalid as exc:
        raise TraceFormatError(path, f"not valid CSV: {exc}") from None
    keep = np.concatenate(kept) if kept else np.zeros(0, dtype=bool)
    if problems.bad_rows or ragged:
        listed = sorted([*ragged, *problems.listed], key=lambda p: int(m.group(1)) if (m := _LINE.match(p)) else LIMIT)
        filled = int(keep.sum()) + len(ragged)  # the rows with a cell filled
        raise TraceFormatError(path, [f"{problems.bad_rows + len(ragged)} of {filled} rows are malformed",
                                      *listed[:MAX_PROBLEMS]])  # fmt: skip
    blanks = len(blank_lines) + int((~keep).sum())
    if not keep.any():
        say = f" ({blanks} empty: every cell empty)" if blanks else ""
        raise TraceFormatError(path, f"the table has a header but no rows{say}: nothing to convert")
    out = {c: np.concatenate(v)[keep] for c, v in got.items()}
    return MemoryColumns(header=header, rows=int(keep.sum()), numbers={c: out[c] for c in scale},
                         device=np.concatenate(devices)[keep], texts={c: (list(coded[c]), out[c]) for c in texts if c in coded},
                         empty_rows=blanks)  # fmt: skip


__all__ = ["BLOCK_BYTES", "DEVICE_COLUMNS", "LIMIT", "MAX_PROBLEMS", "SIZE_UNITS", "TIME_UNITS", "MemoryColumns",
           "blank_line", "blank_rows", "column_key", "empty_rows", "header_keys", "read_memory_table"]

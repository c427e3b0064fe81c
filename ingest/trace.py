"""A run in memory (`Trace`), and reading and writing it as one portscope trace file."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from . import arrow_compute as pc
from . import run_ids, schema
from .batches import RunDigest, fixed_batches
from .container import NotAContainer, read_members, write_members
from .errors import TraceFormatError

MANIFEST = "manifest.json"


@dataclasses.dataclass
class RunInfo:
    """What a run was: where its figures come from, on what, for which model."""

    source: schema.Source = schema.Source.MEASURED
    target: str | None = None  # target name (predicted runs)
    torch_version: str | None = None
    devices: list[str] = dataclasses.field(default_factory=list)
    command: str | None = None
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    start_time: str | None = None  # ISO 8601, UTC
    time_unit: schema.TimeUnit = schema.TimeUnit.NS  # unit of engine_slices.start/dur
    producer: str = "portscope"
    converted_from: str | None = None  # original format (converted runs)
    missing_signals: list[str] = dataclasses.field(default_factory=list)  # what the source could not provide
    config: dict[str, Any] = dataclasses.field(default_factory=dict)  # deployment configuration
    # folders that relative call-site and stack paths start from: first path component -> absolute folder
    # ("transformers" -> .../site-packages/transformers, "." -> the user's script folder)
    roots: dict[str, str] = dataclasses.field(default_factory=dict)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # anything else, kept verbatim

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["source"] = self.source.value
        out["time_unit"] = self.time_unit.value
        return out

    @classmethod
    def from_json(cls, raw: Any, problems: list[str]) -> RunInfo:
        if not isinstance(raw, dict):
            problems.append("run_info is not an object")
            return cls()
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        extra = dict(raw.get("extra") or {}) if isinstance(raw.get("extra"), dict) else {}
        for key, value in raw.items():
            if key == "extra":
                continue
            if key not in known:
                extra[key] = value
                continue
            kwargs[key] = value
        try:
            kwargs["source"] = schema.Source(kwargs.get("source", "measured"))
        except ValueError:
            problems.append(f"run_info.source {kwargs.get('source')!r} is not one of {[s.value for s in schema.Source]}")
            kwargs["source"] = schema.Source.MEASURED
        try:
            kwargs["time_unit"] = schema.TimeUnit(kwargs.get("time_unit", "ns"))
        except ValueError:
            problems.append(f"run_info.time_unit {kwargs.get('time_unit')!r} is not one of ns, cycles")
            kwargs["time_unit"] = schema.TimeUnit.NS
        for key, typ in (("devices", list), ("missing_signals", list), ("model", dict), ("config", dict),
                          ("roots", dict)):
            if key in kwargs and not isinstance(kwargs[key], typ):
                problems.append(f"run_info.{key} must be a {typ.__name__}")
                kwargs.pop(key)
        return cls(**kwargs, extra=extra)


def empty_table(name: str) -> pa.Table:
    """A table of the format with no rows (`Schema.empty_table` would import pandas: see ingest/arrow_compute.py)."""
    return pa.Table.from_batches([], schema=schema.TABLES[name])


@dataclasses.dataclass(frozen=True)
class TableSlices:
    """A table too big to hold whole: its row count and a function that makes its record batches, in order, anew
    at each call. `write_trace` streams them into the file one at a time; `Trace[name]` gathers them."""

    num_rows: int
    batches: Callable[[], Iterator[pa.RecordBatch]]
    schema: pa.Schema | None = None  # the batches' schema where not the format's (a plain string for a dictionary)

    def table_schema(self, name: str) -> pa.Schema:
        return self.schema or schema.TABLES[name]


@dataclasses.dataclass
class Trace:
    """One run: its run info and one Arrow table per kind of event.

    A converter may give a big table as `slices` instead (not in `tables`): written slice by slice, so
    converting never holds it whole; reading `trace[name]` gathers it into `tables` first.
    """

    run_info: RunInfo
    tables: dict[str, pa.Table]
    path: str | None = None
    slices: dict[str, TableSlices] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in schema.TABLES:
            if name not in self.slices:
                self.tables.setdefault(name, empty_table(name))

    def __getitem__(self, name: str) -> pa.Table:
        sliced = self.slices.pop(name, None)
        if sliced is not None:
            self.tables[name] = pa.Table.from_batches(list(sliced.batches()), schema=sliced.table_schema(name))
        return self.tables[name]

    def num_rows(self, name: str) -> int:
        """Rows of one table (without gathering a sliced one)."""
        sliced = self.slices.get(name)
        return sliced.num_rows if sliced is not None else self.tables[name].num_rows

    def gather(self) -> Trace:
        """Every sliced table gathered into `tables` (for callers that use `tables` directly); returns self."""
        for name in list(self.slices):
            self[name]
        return self

    @property
    def predicted(self) -> bool:
        return self.run_info.source is schema.Source.PREDICTED

    def region_names(self) -> list[str]:
        return self.tables["regions"].column("name").to_pylist()

    def content_hash(self) -> str:
        """A hash of the run's content (run info and every table), stable across writes and reads.

        Tables are streamed through the hash as Arrow IPC in record batches of exactly `_BATCH_ROWS` rows
        (the last fewer), however their rows arrived (one table's chunks or a converter's slices): equal
        tables hash equal. No copy of the run is made (at most one batch is gathered from pieces).
        Changing what is hashed changes every run id: bump `run_ids.VERSION` with it.
        """
        digest = RunDigest(self.run_info)
        for name in schema.TABLES:
            if self.num_rows(name) or name not in schema.ADDED_TABLES:
                digest.table(name, self._schema(name), self.batches(name))
        return digest.run_id()

    def _schema(self, name: str) -> pa.Schema:
        return self.slices[name].table_schema(name) if name in self.slices else self.tables[name].schema

    def batches(self, name: str) -> Iterator[pa.RecordBatch]:
        """One table's record batches as they are (a sliced table's slices, anew), without gathering it."""
        sliced = self.slices.get(name)
        return sliced.batches() if sliced is not None else iter(self.tables[name].to_batches())


def write_trace(trace: Trace, path: str | Path, *, compression: str | None = None) -> Path:
    """Write a trace atomically. compression: None (memory-mappable, default), "zstd" or "lz4".

    Every table is written in record batches of exactly `_BATCH_ROWS` rows (the last fewer), however its
    rows arrived: equal tables make equal members. Sliced tables are written one slice at a time, each
    checked as it comes (`_SliceChecks`); a problem found midway removes the partial file, as any failed
    write does.
    """
    path = Path(path)
    _write(trace, path, compression, None)
    return path


def write_run(trace: Trace, path: str | Path, *, compression: str | None = None, remember: bool = True) -> str:
    """`write_trace`, hashing the tables as they are written; returns the run id of the written file (what
    `read_trace(path).content_hash()` gives) without a second pass (a sliced table is made once), and
    remembers it for the file (`run_ids`; not when the file is to be renamed: that changes its ctime), so
    a viewer opening the file need not hash it again."""
    path = Path(path)
    digest = RunDigest(trace.run_info)
    written = _write(trace, path, compression, digest)
    run_id = digest.run_id()
    now = path.stat()
    if remember and (now.st_dev, now.st_ino) == (written.st_dev, written.st_ino):  # still the file written
        run_ids.remember(run_ids.file_key(path, now), run_id)
    return run_id


def _write(trace: Trace, path: Path, compression: str | None, digest: RunDigest | None) -> os.stat_result:
    problems = validate_tables(trace.tables, check_missing=False)
    problems += [f"table {name!r} is missing" for name in schema.TABLES if name not in trace.tables and name not in trace.slices]
    if problems:
        raise TraceFormatError(path, ["refusing to write an invalid trace", *problems])
    manifest = {
        "format": schema.FORMAT_NAME,
        "version": schema.FORMAT_VERSION,
        "run_info": trace.run_info.to_json(),
        "tables": {name: trace.num_rows(name) for name in schema.TABLES},
    }
    members: list[tuple[str, Any]] = [
        (MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())
    ]
    options = pa.ipc.IpcWriteOptions(compression=compression)
    checks = _SliceChecks(path, trace)
    for name, table_schema in schema.TABLES.items():
        hashed = digest if digest is not None and (trace.num_rows(name) or name not in schema.ADDED_TABLES) else None
        if name in trace.slices:
            table_schema = trace.slices[name].table_schema(name)
            batches = _checked_slices(name, trace.slices[name], checks)
        else:
            table = conform(trace.tables[name], table_schema)
            table_schema, batches = table.schema, _checked_whole(name, table, checks)
        members.append((f"{name}.arrow", _member_writer(name, table_schema, batches, options, hashed)))
    return write_members(path, members)


def _member_writer(name: str, table_schema: pa.Schema, batches: Iterator[pa.RecordBatch], options: pa.ipc.IpcWriteOptions,
                   digest: RunDigest | None) -> Callable[[BinaryIO], None]:
    def write(member: BinaryIO) -> None:
        with contextlib.ExitStack() as stack:
            writer = stack.enter_context(pa.ipc.new_file(pa.PythonFile(member, mode="w"), table_schema, options=options))
            hasher = stack.enter_context(digest.stream(name, table_schema)) if digest is not None else None
            for batch in fixed_batches(batches):
                writer.write_batch(batch)
                if hasher is not None:
                    hasher.write_batch(batch)
                del batch  # not held while the next one is made

    return write


def _checked_whole(name: str, table: pa.Table, checks: _SliceChecks) -> Iterator[pa.RecordBatch]:
    """A whole table's batches, its references into sliced tables checked when it is written: after the
    tables before it in schema order, so a sliced table it points into has been written and its ids are known."""
    checks.references_into_slices(name)
    yield from table.to_batches()


def _checked_slices(name: str, sliced: TableSlices, checks: _SliceChecks) -> Iterator[pa.RecordBatch]:
    """A sliced table's batches, each conformed and checked as it comes; then its row count."""
    table_schema = sliced.table_schema(name)
    rows = 0
    for batch in sliced.batches():
        table = conform(pa.Table.from_batches([batch]), table_schema)
        checks.slice(name, table)
        rows += table.num_rows
        del batch  # not held while the next one is made
        yield from table.to_batches()
        del table
    if rows != sliced.num_rows:
        checks.fail([f"table {name!r}: {rows} rows written, {sliced.num_rows} announced"])


class _SliceChecks:
    """What `validate_tables` checks, for tables written slice by slice: each slice alone (columns, types, enum
    values, negatives), references into whole tables, ids increasing across slices; references into a sliced
    table once it is written (its ids then form a known range: tables are written in schema order)."""

    _ID_COLUMNS = {"regions": "region_id", "ops": "op_id", "stacks": "stack_id", "frames": "frame_id"}

    def __init__(self, path: Path, trace: Trace) -> None:
        self.path = path
        self.trace = trace
        self.ids: dict[str, tuple[int, int, int]] = {}  # sliced table -> (first id, last id, rows) so far

    def fail(self, problems: list[str]) -> None:
        raise TraceFormatError(self.path, ["refusing to write an invalid trace", *problems])

    def slice(self, name: str, table: pa.Table) -> None:
        problems = validate_tables({name: table}, check_missing=False)
        for (source, column), (target, target_column) in schema.REFERENCES.items():
            if source == name and not problems:
                problems += self._reference(name, column, table.column(column), target, target_column)
        id_column = self._ID_COLUMNS.get(name)
        if id_column and table.num_rows and not problems:
            ids = table.column(id_column).combine_chunks()
            lo, hi = pc.min_max(ids)
            first, last = ids[0].as_py(), ids[-1].as_py()
            increasing = len(ids) < 2 or pc.call("all", pc.call("greater", ids[1:], ids[:-1])).as_py()
            seen = self.ids.get(name)
            if not increasing or (seen is not None and first <= seen[1]) or (lo, hi) != (first, last):
                problems.append(f"table {name!r}: {id_column!r} values do not increase from slice to slice")
            else:
                self.ids[name] = (seen[0] if seen else first, last, (seen[2] if seen else 0) + table.num_rows)
        if problems:
            self.fail(problems)

    def references_into_slices(self, name: str) -> None:
        """References of a whole table into sliced tables (validate_tables skipped them)."""
        problems: list[str] = []
        for (source, column), (target, target_column) in schema.REFERENCES.items():
            if source == name and target in self.trace.slices:
                problems += self._reference(name, column, self.trace.tables[name].column(column), target, target_column)
        if problems:
            self.fail(problems)

    def _reference(self, name: str, column: str, col: pa.ChunkedArray, target: str, target_column: str) -> list[str]:
        if target not in self.trace.slices:
            problem = _dangling(col, self.trace.tables[target].column(target_column))
            return [f"table {name!r}: {problem.replace('COLUMN', repr(column))}"] if problem else []
        if col.null_count == len(col):
            return []
        ids = self.ids.get(target)
        lo, hi = pc.min_max(col)
        if ids is None or ids[1] - ids[0] + 1 != ids[2] or lo < ids[0] or hi > ids[1]:
            return [f"table {name!r}: column {column!r} points outside {target!r}'s ids (or {target!r} is not written before it)"]
        return []


def conform(table: pa.Table, table_schema: pa.Schema) -> pa.Table:
    """Order and cast a table's columns to the schema (keeping any extra columns after them)."""
    if table.schema.equals(table_schema, check_metadata=False):
        return table.replace_schema_metadata(table_schema.metadata)
    columns = []
    for field in table_schema:
        col = table.column(field.name)
        if not col.type.equals(field.type):
            col = col.cast(field.type)
        columns.append(col)
    extra = [n for n in table.column_names if n not in table_schema.names]
    fields = list(table_schema) + [table.schema.field(n) for n in extra]
    columns += [table.column(n) for n in extra]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=table_schema.metadata))


def read_trace(path: str | Path, *, validate: bool = True) -> Trace:
    """Memory-map and fully validate a trace; raise one TraceFormatError listing every problem.

    validate=False skips what reads every table (Arrow's full validation, types, enums, ids): only for a
    file whose exact bytes were validated before (`run_ids`: the viewer's store), never for a file as given.
    """
    path = Path(path)
    try:
        if path.stat().st_size == 0:
            raise TraceFormatError(path, "the file is empty (0 bytes)")
        members, problems = read_members(path)
    except NotAContainer as exc:
        with open(path, "rb") as f:
            head = f.read(4)
        if head == b"PK\x03\x04":
            raise TraceFormatError(path, f"truncated or corrupt: the ZIP container has no readable directory ({exc})") from None
        raise TraceFormatError(path, f"not a portscope trace: not a ZIP container of Arrow tables ({exc})") from None
    except FileNotFoundError:
        raise TraceFormatError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceFormatError(path, "is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if MANIFEST not in members:
        raise TraceFormatError(path, [*problems, f"no {MANIFEST}: not a portscope trace"])
    try:
        manifest = json.loads(members[MANIFEST].to_pybytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceFormatError(path, [*problems, f"{MANIFEST} is not valid JSON ({exc})"]) from None
    if not isinstance(manifest, dict) or manifest.get("format") != schema.FORMAT_NAME:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise TraceFormatError(path, [*problems, f"format is {got!r}, expected {schema.FORMAT_NAME!r}"])
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise TraceFormatError(path, [*problems, f"unknown format version {version!r}"])
    if version > schema.FORMAT_VERSION:
        raise TraceFormatError(
            path,
            [*problems, f"format version {version} is newer than this portscope reads ({schema.FORMAT_VERSION}); upgrade portscope"],
        )
    run_info = RunInfo.from_json(manifest.get("run_info", {}), problems)
    tables: dict[str, pa.Table] = {}
    declared = manifest.get("tables") if isinstance(manifest.get("tables"), dict) else {}
    for name in schema.TABLES:
        member = f"{name}.arrow"
        if member not in members and name in schema.ADDED_TABLES and name not in declared:
            continue  # written before the table existed: read as empty
        if member not in members:
            problems.append(f"table {name!r} is missing")
            continue
        try:
            table = pa.ipc.open_file(members[member]).read_all()
            if validate:
                table.validate(full=True)
        except (pa.ArrowException, OSError, ValueError, IndexError, OverflowError) as exc:  # ValueError: e.g. a column name that is not UTF-8
            problems.append(f"table {name!r} is not a readable Arrow IPC file (truncated or corrupt: {exc})")
            continue
        if name in declared and declared[name] != table.num_rows:
            problems.append(f"table {name!r} has {table.num_rows} rows, the manifest says {declared[name]}")
        tables[name] = table
    if validate:
        problems += validate_tables(tables, check_missing=False)
    if problems:
        raise TraceFormatError(path, problems)
    return Trace(run_info=run_info, tables=tables, path=str(path))


def validate_tables(tables: dict[str, pa.Table], *, check_missing: bool = True) -> list[str]:
    """Every problem with a set of tables: columns, types, enum values, negatives, dangling ids."""
    problems: list[str] = []
    usable: dict[str, pa.Table] = {}
    for name, table_schema in schema.TABLES.items():
        table = tables.get(name)
        if table is None:
            if check_missing:
                problems.append(f"table {name!r} is missing")
            continue
        ok = True
        repeated = sorted({c for c in table.column_names if table.column_names.count(c) > 1})
        if repeated:
            problems.append(f"table {name!r}: column names appear more than once: {repeated[:5]}")
            continue
        for field in table_schema:
            if field.name not in table.column_names:
                problems.append(f"table {name!r}: column {field.name!r} is missing")
                ok = False
                continue
            got = table.schema.field(field.name).type
            if not _compatible(got, field.type):
                problems.append(f"table {name!r}: column {field.name!r} has type {got}, expected {field.type}")
                ok = False
            elif not field.nullable and table.column(field.name).null_count:
                problems.append(f"table {name!r}: column {field.name!r} has {table.column(field.name).null_count} nulls")
                ok = False
        if ok:
            usable[name] = table
    for (name, column), enum_type in schema.ENUM_COLUMNS.items():
        if name not in usable:
            continue
        values = _distinct_strings(usable[name].column(column))
        allowed = {e.value for e in enum_type}
        bad = sorted(v for v in values if v not in allowed)
        if bad:
            problems.append(f"table {name!r}: column {column!r} has unknown values {bad[:5]} (allowed: {sorted(allowed)})")
    for name, column in schema.NON_NEGATIVE:
        if name not in usable or not usable[name].num_rows:
            continue
        col = usable[name].column(column)
        low, _ = pc.min_max(col)
        if low is not None and low < 0:
            n = sum(1 for v in col.to_pylist() if v is not None and v < 0)
            problems.append(f"table {name!r}: {n} rows have a negative {column!r}")
    for (name, column), (target, target_column) in schema.REFERENCES.items():
        if name not in usable or target not in usable:
            continue
        problem = _dangling(usable[name].column(column), usable[target].column(target_column))
        if problem:
            problems.append(f"table {name!r}: {problem.replace('COLUMN', repr(column))}")
    for name, column in (("regions", "region_id"), ("ops", "op_id"), ("stacks", "stack_id"), ("frames", "frame_id")):
        if name in usable and usable[name].num_rows:
            ids = usable[name].column(column).combine_chunks()
            increasing = len(ids) < 2 or pc.call("all", pc.call("greater", ids[1:], ids[:-1])).as_py()
            if not increasing and pc.call("count_distinct", ids).as_py() != len(ids):
                problems.append(f"table {name!r}: {column!r} values are not unique")
    return problems


def _dangling(col: pa.ChunkedArray, known: pa.ChunkedArray) -> str | None:
    """A message when some non-null value of `col` is not among `known` (fast path for dense id ranges)."""
    if col.null_count == len(col):
        return None
    if not len(known):
        return f"{len(col) - col.null_count} rows have a COLUMN that points nowhere (e.g. {pc.call('drop_null', col)[0].as_py()})"
    lo, hi = pc.min_max(known)
    dense = hi - lo + 1 == len(known)  # ids are unique (checked separately), so a dense range is exactly lo..hi
    got_lo, got_hi = pc.min_max(col)
    if dense and got_lo >= lo and got_hi <= hi:
        return None
    present = pc.call("drop_null", col)
    missing = pc.call("invert", pc.is_in(present, known.combine_chunks()))
    n = pc.total(missing)
    if not n:
        return None
    example = pc.call("filter", present, missing)[0].as_py()
    return f"{n} rows have a COLUMN that points nowhere (e.g. {example})"


def _compatible(got: pa.DataType, want: pa.DataType) -> bool:
    if got.equals(want):
        return True
    if pa.types.is_dictionary(want):  # a plain string column is accepted where a dictionary is expected
        return (pa.types.is_dictionary(got) and pa.types.is_string(got.value_type)) or pa.types.is_string(got)
    return False


def _distinct_strings(column: pa.ChunkedArray) -> set[str]:
    values: set[str] = set()
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            used = pc.call("unique", pc.call("drop_null", chunk.indices))
            values.update(pc.call("take", chunk.dictionary, used).to_pylist())
        else:
            values.update(v for v in pc.call("unique", chunk).to_pylist() if v is not None)
    return values

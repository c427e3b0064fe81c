"""SQL over traces: the views (`VIEWS`), defined once, and a DuckDB connection over one run or hundreds.

Each run's memory-mapped Arrow tables (`read_trace`) are registered with DuckDB as they are: no copy, no
database file. A view is the UNION ALL over the runs of one SELECT per run, every row led by its `run` (a
constant: nothing is added to the tables). DuckDB is imported on first use (start-up never pays for it).

A connection never touches a file or the network (`enable_external_access` off, extensions neither installed
nor loaded) and its configuration is locked once the views exist. `run_query` adds what a server needs for
SQL typed by strangers (`Limits`): one SELECT only, a time limit (`interrupt` from a timer), a row and a byte
limit on the answer, a memory limit.
"""

from __future__ import annotations

import dataclasses
import glob
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import run_ids
from .errors import PortscopeError, UsageError
from .given import is_portscope_file, open_given
from .schema import MEMORY_ENGINE_PREFIX, EngineKind
from .trace import Trace, read_trace

if TYPE_CHECKING:
    import duckdb

__all__ = ["VIEWS", "Column", "Limits", "QueryError", "QueryResult", "Run", "View", "connect", "export_parquet",
           "open_runs", "resolve_runs", "run_query", "schema_text", "views_in"]


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    type: str  # DuckDB's name of its type
    doc: str


@dataclasses.dataclass(frozen=True)
class View:
    """A view: per run, `body` (a SELECT of exactly `columns` after `run`, over the run's tables named in braces)."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    body: str

    def select(self, tables: dict[str, str]) -> str:
        return self.body.format(**tables)


def _cols(*specs: tuple[str, str, str]) -> tuple[Column, ...]:
    return tuple(Column(*s) for s in specs)


def _device_kinds() -> str:
    """The engine kinds of device work (`schema.DEVICE_ENGINES`: streams, copy engines, compute units), as SQL."""
    from .schema import DEVICE_ENGINES

    return ", ".join(f"'{k.value}'" for k in EngineKind if k in DEVICE_ENGINES)


RUN = Column("run", "VARCHAR", "the run: its file's name without .arrow (with its folder where two files share a name)")
_REGION = ("region_id", "INTEGER", "the innermost region open at its start (regions.region_id)")
_OP = ("op_id", "BIGINT", "the operator it belongs to (ops.op_id; NULL: none)")
_OPERATOR = ("operator", "VARCHAR", "that operator's name")
_SITE = ("call_site", "VARCHAR", "the model line that made it (`file:line (function) <- caller`)")
_STACK = ("stack_id", "INTEGER", "its interned Python stack (the trace's `stacks` table)")
_UNIT = "in the run's time unit (runs.time_unit: ns, or cycles for a compiler schedule)"
_SIGNAL_COLUMNS = (_REGION, _OP, ("op_name", "VARCHAR", "the operator's name"),
                   ("reason", "VARCHAR", "why (item, data-dependent-shape, dtype-not-supported, unaligned...)"),
                   ("count", "BIGINT", "1 per recorded event; more where a source keeps only counts"), _SITE, _STACK,
                   ("module", "VARCHAR", "the model module (model.layers.0.mlp)"), ("note", "VARCHAR", "what usually fixes it"),
                   ("time_ns", "BIGINT", "when, ns from the run's start (NULL: not timed)"))  # fmt: skip
_SIGNAL_SELECT = "region_id, op_id, op_name, reason, count, call_site, stack_id, module, note, time_ns"

VIEWS: dict[str, View] = {v.name: v for v in (
    View("runs", "one row per run: where its figures come from", _cols(
        ("file", "VARCHAR", "the trace file as given"),
        ("source", "VARCHAR", "measured, predicted or converted"),
        ("target", "VARCHAR", "the target of a predicted run"),
        ("converted_from", "VARCHAR", "the source format of a converted run (kineto, ascend-kernels...)"),
        ("producer", "VARCHAR", "the tool that wrote it"),
        ("time_unit", "VARCHAR", "unit of kernels.start/dur and memory.start/dur: ns or cycles"),
        ("devices", "VARCHAR", "the devices, comma-separated"),
        ("torch_version", "VARCHAR", "torch of the recording"),
        ("start_time", "VARCHAR", "when it was recorded (ISO 8601, UTC)"),
    ), "SELECT file, source, target, converted_from, producer, time_unit, devices, torch_version, start_time FROM {run_info}"),
    View("regions", "the spans of the program the user chose to look at; a region's figures include its nested regions'", _cols(
        ("region_id", "INTEGER", "its id in the run"),
        ("parent_id", "INTEGER", "the region it is nested in (NULL: top level)"),
        ("depth", "INTEGER", "0 at the top level: a run's totals sum depth 0 only"),
        ("name", "VARCHAR", "its name (forward:warm, ProfilerStep#6...)"),
        ("start_ns", "BIGINT", "start, ns from the run's start"),
        ("dur_ns", "BIGINT", "wall time"),
        ("mode", "VARCHAR", "eager, compiled or unknown"),
        ("phase", "VARCHAR", "cold, warm or none"),
        ("device", "VARCHAR", "the device it worked on"),
        ("peak_memory_bytes", "BIGINT", "the allocator's peak total inside it"),
        ("error", "VARCHAR", "the exception it raised"),
        ("tags", "VARCHAR", "JSON object of the user's tags"),
    ), "SELECT region_id, parent_id, depth, name, start_ns, dur_ns, mode, phase, device, peak_memory_bytes, error, tags "
       "FROM {regions}"),
    View("ops", "every operator dispatched, on the host's clock", _cols(
        ("op_id", "BIGINT", "its id in the run"), _REGION,
        ("name", "VARCHAR", "aten::add.Tensor..."),
        ("start_ns", "BIGINT", "start, ns from the run's start"),
        ("dur_ns", "BIGINT", "host wall time"),
        ("placement", "VARCHAR", "device, host, fallback, graph or compiler"),
        ("device", "VARCHAR", "where it ran"),
        ("input_shapes", "VARCHAR", "`1x7x64;;64`: one entry per argument"),
        ("input_strides", "VARCHAR", "as input_shapes"),
        ("input_dtypes", "VARCHAR", "torch dtype names, one per argument"),
        ("output_shapes", "VARCHAR", "as input_shapes"),
        ("output_dtypes", "VARCHAR", "as input_dtypes"),
        ("bytes_in", "BIGINT", "bytes of its tensor inputs"),
        ("bytes_out", "BIGINT", "bytes of its outputs"),
        ("flops", "BIGINT", "floating-point operations, where known"),
        ("module", "VARCHAR", "the model module"),
        _SITE, _STACK,
        ("graph_id", "INTEGER", "the compiled graph a graph call ran"),
        ("thread", "INTEGER", "the host thread"),
    ), "SELECT op_id, region_id, name, start_ns, dur_ns, placement, device, input_shapes, input_strides, input_dtypes, output_shapes, "
       "output_dtypes, bytes_in, bytes_out, flops, module, call_site, stack_id, graph_id, thread FROM {ops}"),
    View("runtime", "host calls into the device runtime or driver (cudaLaunchKernel, cudaMemcpyAsync...) of a converted "
                    "profiler trace", _cols(
        _REGION, ("op_id", "BIGINT", "the operator it ran inside (NULL: none)"), _OPERATOR,
        ("name", "VARCHAR", "the call"),
        ("start_ns", "BIGINT", "start, ns from the run's start"),
        ("dur_ns", "BIGINT", "time in the call"),
        ("correlation", "BIGINT", "= kernels.correlation of the device work it launched"),
    ), "SELECT c.region_id, c.op_id, o.name AS operator, c.name, c.start_ns, c.dur_ns, c.correlation "
       "FROM {runtime_calls} c LEFT JOIN {ops} o ON o.op_id = c.op_id"),
    View("comms", "a communication operator's own arguments where the profiler wrote them (PyTorch's "
                  "record_param_comms): its process group and sequence number", _cols(
        ("op_id", "BIGINT", "the operator (ops.op_id)"), _OPERATOR,
        ("process_group", "VARCHAR", "the process group's name (0, 1...)"),
        ("process_group_description", "VARCHAR", "default_pg, undefined..."),
        ("seq", "BIGINT", "the call's sequence number in its process group"),
        ("collective", "VARCHAR", "allreduce, broadcast, allgather..."),
        ("group_size", "BIGINT", "ranks in the process group"),
    ), "SELECT c.op_id, o.name AS operator, c.process_group, c.process_group_description, c.seq, c.collective, "
       "c.group_size FROM {comms} c LEFT JOIN {ops} o ON o.op_id = c.op_id"),
    View("kernels", "device work: the engine slices of streams, copy engines and compute units, with the operator that "
                    "launched each", _cols(
        ("region_id", "INTEGER", "the region it ran in (NULL: none)"),
        ("op_id", "BIGINT", "the operator that launched it (NULL: none)"), _OPERATOR,
        ("engine", "VARCHAR", "the lane: stream 7, DMA h2d, matrix..."),
        ("engine_kind", "VARCHAR", "stream, dma_h2d, dma_d2h, dma_d2d, matrix, vector or collective"),
        ("kind", "VARCHAR", "compute, transfer, fallback... (its colour in the viewer)"),
        ("name", "VARCHAR", "the kernel, copy or instruction"),
        ("start", "BIGINT", f"start, {_UNIT}"),
        ("dur", "BIGINT", f"duration, {_UNIT}"),
        ("bytes", "BIGINT", "bytes a copy moved"),
        ("correlation", "BIGINT", "= runtime.correlation of the call that launched it"),
        ("module", "VARCHAR", "the model module"),
    ), "SELECT s.region_id, s.op_id, o.name AS operator, s.engine, s.engine_kind, s.kind, s.name, s.start, s.dur, s.bytes, "
       "s.correlation, s.module FROM {engine_slices} s LEFT JOIN {ops} o ON o.op_id = s.op_id "
       "WHERE s.engine_kind IN ({device_kinds})"),
    View("copies", "physical copies between host and device (or between devices): direction, bytes, call site", _cols(
        _REGION, _OP, _OPERATOR,
        ("direction", "VARCHAR", "h2d, d2h, d2d or unknown"),
        ("bytes", "BIGINT", "bytes copied"),
        ("src_device", "VARCHAR", "from"),
        ("dst_device", "VARCHAR", "to"),
        ("start_ns", "BIGINT", "start, ns from the run's start"),
        ("dur_ns", "BIGINT", "duration"),
        ("cause", "VARCHAR", "explicit, fallback-input, bounce, sync..."),
        _SITE, _STACK,
    ), "SELECT t.region_id, t.op_id, o.name AS operator, t.direction, t.bytes, t.src_device, t.dst_device, t.start_ns, "
       "t.dur_ns, t.cause, t.call_site, t.stack_id FROM {transfers} t LEFT JOIN {ops} o ON o.op_id = t.op_id"),
    View("syncs", "every time the host waited for the device (the `sync` signals)", _cols(*_SIGNAL_COLUMNS),
         f"SELECT {_SIGNAL_SELECT} FROM {{signals}} WHERE kind = 'sync'"),
    View("fallbacks", "operators the device was asked for that ran on the host (the `dispatch/cpu_fallback` signals)",
         _cols(*_SIGNAL_COLUMNS,
               ("input_shapes", "VARCHAR", "the operator's input shapes"),
               ("input_dtypes", "VARCHAR", "the operator's input dtypes")),
         f"SELECT {', '.join('f.' + c for c in _SIGNAL_SELECT.split(', '))}, o.input_shapes, o.input_dtypes "
         "FROM {signals} f LEFT JOIN {ops} o ON o.op_id = f.op_id WHERE f.kind = 'dispatch/cpu_fallback'"),
    View("compiles", "compilations: graphs, graph breaks, recompiles, device programs", _cols(
        _REGION,
        ("kind", "VARCHAR", "graph, graph_break, recompile or program"),
        ("compile_id", "VARCHAR", "torch's frame/frame_compile_id"),
        ("graph_id", "INTEGER", "the graph it made"),
        ("key", "VARCHAR", "program key or frame name"),
        ("frame", "VARCHAR", "source location of the frame"),
        ("op_count", "BIGINT", "operators in the graph"),
        ("compile_ns", "BIGINT", "time spent compiling"),
        ("cache_hit", "BOOLEAN", "served from a cache"),
        ("reason", "VARCHAR", "why (a graph break's or recompile's reason)"),
        ("call_site", "VARCHAR", "the model line"),
        ("time_ns", "BIGINT", "when, ns from the run's start"),
    ), "SELECT region_id, kind, compile_id, graph_id, key, frame, op_count, compile_ns, cache_hit, reason, call_site, "
       "time_ns FROM {compiles}"),
    View("memory", "the allocator's totals over time, per device (the memory lanes: one row from each allocator event "
                   "to the next)", _cols(
        ("region_id", "INTEGER", "the region open then"),
        ("device", "VARCHAR", "cuda:0, cpu..."),
        ("counter", "VARCHAR", "allocated or reserved"),
        ("start", "BIGINT", f"from, {_UNIT}"),
        ("dur", "BIGINT", "until the next event"),
        ("bytes", "BIGINT", "the total meanwhile"),
    ), f"SELECT region_id, engine[{len(MEMORY_ENGINE_PREFIX) + 1}:] AS device, name AS counter, start, dur, bytes "
       f"FROM {{engine_slices}} WHERE starts_with(engine, '{MEMORY_ENGINE_PREFIX}')"),
    View("flows", "a runtime call and the device work it launched, joined by correlation id", _cols(
        ("region_id", "INTEGER", "the call's region"),
        ("op_id", "BIGINT", "the operator around the call"), _OPERATOR,
        ("correlation", "BIGINT", "the id that joins them"),
        ("call", "VARCHAR", "the runtime call (cudaLaunchKernel...)"),
        ("call_start_ns", "BIGINT", "the call's start, ns"),
        ("call_dur_ns", "BIGINT", "the call's duration"),
        ("engine", "VARCHAR", "where the work ran"),
        ("kernel", "VARCHAR", "the kernel or copy"),
        ("kernel_start", "BIGINT", f"its start, {_UNIT}"),
        ("kernel_dur", "BIGINT", "its duration"),
    ), "SELECT c.region_id, c.op_id, o.name AS operator, c.correlation, c.name AS call, c.start_ns AS call_start_ns, "
       "c.dur_ns AS call_dur_ns, s.engine, s.name AS kernel, s.start AS kernel_start, s.dur AS kernel_dur "
       "FROM {runtime_calls} c JOIN {engine_slices} s ON s.correlation = c.correlation AND s.engine_kind IN ({device_kinds}) "
       "LEFT JOIN {ops} o ON o.op_id = c.op_id"),
    View("signals", "everything the backend had to do: fallbacks, bounces, transfers, syncs, compiles...", _cols(
        _REGION, _OP,
        ("kind", "VARCHAR", "dispatch/cpu_fallback, transfer/d2h, sync, compile/graph_break... (FORMAT.md)"),
        *_SIGNAL_COLUMNS[2:5],
        ("bytes", "BIGINT", "bytes, for transfers and bounces"),
        *_SIGNAL_COLUMNS[5:],
    ), "SELECT region_id, op_id, kind, op_name, reason, count, bytes, call_site, stack_id, module, note, time_ns "
       "FROM {signals}"),
)}  # fmt: skip

_STORED = ("regions", "ops", "signals", "transfers", "compiles", "engine_slices", "runtime_calls", "comms")


def schema_text() -> str:
    """The views and their columns, as `portscope sql --schema` prints them."""
    lines = []
    for view in VIEWS.values():
        lines.append(f"{view.name}: {view.doc}")
        width = max(len(c.name) for c in (RUN, *view.columns))
        for c in (RUN, *view.columns):
            lines.append(f"  {c.name:<{width}}  {c.type:<8}  {c.doc}")
        lines.append("")
    return "\n".join(lines)


# runs ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    """A run SQL sees: its name (the `run` column) and its trace."""

    name: str
    trace: Trace
    file: str | None = None  # what `runs.file` says (default: the trace's path; the viewer gives a file name only)


def resolve_runs(args: Sequence[str | Path]) -> list[Path]:
    """The trace files of RUN arguments: a file, a folder (its *.arrow) or a glob; each file once, in order."""
    out: dict[Path, None] = {}
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix == ".arrow" and not p.name.startswith("."))
            if not found:
                raise UsageError(f"{arg}: a folder with no .arrow trace in it")
        elif path.exists() or not glob.has_magic(str(arg)):
            found = [path]  # a missing file: read_trace names it
        else:
            found = sorted(Path(p) for p in glob.glob(str(arg), recursive=True) if Path(p).is_file())
            if not found:
                raise UsageError(f"{arg}: no file matches")
        out.update(dict.fromkeys(found))
    return list(out)


def _names(paths: Sequence[Path]) -> list[str]:
    """Each file's name without .arrow; where names repeat, the path (without .arrow) as given."""
    stems = [p.name.removesuffix(".arrow") for p in paths]
    return [s if stems.count(s) == 1 else str(p.with_name(s)) for s, p in zip(stems, paths, strict=True)]


def open_runs(args: Sequence[str | Path], *, command: str = "sql") -> list[Run]:
    """The runs of RUN arguments, memory-mapped. A file is validated in full unless portscope validated these exact
    bytes before (`run_ids`: written by `convert`, opened by the viewer or by an earlier query); a file named on its
    own that another tool wrote is converted in memory (`given.open_given`, saying so as `portscope COMMAND`); one
    that is neither raises the TraceFormatError naming it."""
    paths = resolve_runs(args)
    return [Run(name, _read(path, command)) for name, path in zip(_names(paths), paths, strict=True)]


def _read(path: Path, command: str) -> Trace:
    """Validated in full and its run id remembered the first time (as the viewer's store does), so that the next
    query over the same files reads none of them through again."""
    if path.is_file() and not is_portscope_file(path):
        return open_given(path, command=command)
    try:
        before = run_ids.file_key(path)
    except OSError:
        return read_trace(path)  # names the problem
    known = run_ids.recall(before) is not None
    trace = read_trace(path, validate=not known)
    if run_ids.file_key(path) != before:  # changed while read: validate what is there now
        return read_trace(path)
    if not known:
        run_ids.remember(before, trace.content_hash())
    return trace


# connections -----------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Limits:
    """What one query may take. None: no limit (the command line, over the user's own files)."""

    rows: int | None = None  # rows of the answer kept (the rest are never computed)
    result_bytes: int | None = None  # bytes of the answer kept
    seconds: float | None = None  # then `interrupt`
    memory: str | None = None  # DuckDB's memory_limit (e.g. "1GB"); nothing spills to disk
    threads: int | None = None
    select_only: bool = False  # one SELECT (or WITH ... SELECT), nothing else

    @classmethod
    def sandbox(cls) -> Limits:
        """For SQL typed into the viewer."""
        return cls(rows=10_000, result_bytes=32 << 20, seconds=10.0, memory="1GB", threads=2, select_only=True)


class QueryError(PortscopeError, ValueError):
    """A query DuckDB (or a limit) refused: DuckDB's own message."""


def _run_info_table(runs: Sequence[Run]) -> pa.Table:
    def info(run: Run) -> dict[str, Any]:
        ri = run.trace.run_info
        return {"file": run.file or run.trace.path, "source": ri.source.value, "target": ri.target, "converted_from": ri.converted_from,
                "producer": ri.producer, "time_unit": ri.time_unit.value, "devices": ", ".join(map(str, ri.devices)) or None,
                "torch_version": ri.torch_version, "start_time": ri.start_time}  # fmt: skip

    fields = [pa.field(c.name, pa.string()) for c in VIEWS["runs"].columns]
    return pa.Table.from_pylist([info(r) for r in runs], schema=pa.schema(fields))


def _regions_with_depth(trace: Trace) -> pa.Table:
    """The regions table and each region's depth (a parent chain walked for all regions at once: ids increase)."""
    import numpy as np

    regions = trace["regions"]
    ids = regions.column("region_id").to_numpy()
    parents = regions.column("parent_id").fill_null(-1).to_numpy()
    at = np.searchsorted(ids, parents)
    up = np.where((parents >= 0) & (at < len(ids)), at, -1)  # row of each region's parent, -1 at the top
    up[up >= 0] = np.where(ids[up[up >= 0]] == parents[up >= 0], up[up >= 0], -1)
    depth, row = np.zeros(len(ids), dtype=np.int32), up.copy()
    for _ in range(len(ids)):  # as many steps as the deepest chain (a cycle is cut at len(ids))
        live = row >= 0
        if not live.any():
            break
        depth[live] += 1
        row[live] = up[row[live]]
    return regions.append_column("depth", pa.array(depth, pa.int32()))


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def views_in(sql: str) -> list[str]:
    """The views a query may read: those whose name appears in it as a word (a column or an alias of the same name
    adds one more view, which costs a little; DuckDB's own parser cannot say, it binds `USING` columns first)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}
    return [name for name in VIEWS if name in words]


def _tables_of(view: View) -> list[str]:
    return [name for name in (*_STORED, "run_info") if "{" + name + "}" in view.body]


def connect(runs: Sequence[Run], *, limits: Limits | None = None, views: Sequence[str] | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views over `runs`; no file or network access, its configuration locked.

    views: only these (`views_in(query)`: a query over 100 runs then registers only the tables it reads); None: all.
    """
    import duckdb

    limits = limits or Limits()
    config: dict[str, Any] = {"enable_external_access": False, "autoinstall_known_extensions": False,
                              "autoload_known_extensions": False, "allow_community_extensions": False}  # fmt: skip
    if limits.memory:
        config |= {"memory_limit": limits.memory, "temp_directory": ""}  # bounded: no spilling to disk
    if limits.threads:
        config["threads"] = limits.threads
    chosen = {name: VIEWS[name] for name in (VIEWS if views is None else views)}
    needed = {table for view in chosen.values() for table in _tables_of(view)}
    con = duckdb.connect(config=config)
    try:
        selects: dict[str, list[str]] = {name: [] for name in chosen}
        device_kinds = _device_kinds() if any("{device_kinds}" in v.body for v in chosen.values()) else ""
        for i, run in enumerate(runs):
            tables = {name: f"t{i}_{name}" for name in (*_STORED, "run_info")}
            for name in needed:
                con.register(tables[name], _regions_with_depth(run.trace) if name == "regions" else
                             _run_info_table([run]) if name == "run_info" else run.trace[name])  # fmt: skip
            for name, view in chosen.items():
                selects[name].append(f"SELECT {_literal(run.name)} AS run, * FROM ({view.select({**tables, 'device_kinds': device_kinds})})")
        for name, view in chosen.items():
            if not selects[name]:  # no run: the view's columns, no rows
                cols = ", ".join(f"NULL::{c.type} AS {c.name}" for c in (RUN, *view.columns))
                selects[name].append(f"SELECT {cols} WHERE false")
            con.execute(f"CREATE VIEW {name} AS " + " UNION ALL ".join(selects[name]))
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


@dataclasses.dataclass(frozen=True)
class QueryResult:
    table: pa.Table
    truncated: bool  # the answer had more rows (or bytes) than the limits keep
    seconds: float


def _check_select(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    if len(statements) != 1:
        raise QueryError(f"one statement, please ({len(statements)} given)")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise QueryError(f"only SELECT queries are allowed here (this is {statements[0].type.name})")


def run_query(con: duckdb.DuckDBPyConnection, sql: str, *, limits: Limits | None = None, batch_rows: int = 2048) -> QueryResult:
    """Run one query on a `connect` connection within `limits`; DuckDB's refusal raises QueryError with its message."""
    import duckdb

    limits = limits or Limits()
    if limits.select_only:
        _check_select(con, sql)
    timer = threading.Timer(limits.seconds, con.interrupt) if limits.seconds else None
    started = time.perf_counter()
    batches: list[pa.RecordBatch] = []
    truncated = False
    try:
        if timer:
            timer.start()
        relation = con.sql(sql)
        if relation is None:  # a statement that returns nothing
            return QueryResult(pa.table({}), False, time.perf_counter() - started)
        reader = relation.to_arrow_reader(batch_rows)
        rows = nbytes = 0
        for batch in _batches(reader):
            if limits.rows is not None and rows + batch.num_rows > limits.rows:
                batch, truncated = batch.slice(0, limits.rows - rows), True
            if limits.result_bytes is not None and nbytes + batch.nbytes > limits.result_bytes:
                truncated = True
                break
            batches.append(batch)
            rows, nbytes = rows + batch.num_rows, nbytes + batch.nbytes
            if truncated:
                break
        reader.close()
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except duckdb.InterruptException:
        raise QueryError(f"stopped after {limits.seconds:g} s: the time limit of a query here") from None
    except duckdb.OutOfMemoryException as exc:
        raise QueryError(f"over the memory limit of a query here ({limits.memory}): {exc}") from None
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    finally:
        if timer:
            timer.cancel()
    return QueryResult(table, truncated, time.perf_counter() - started)


def _batches(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    import duckdb

    try:
        yield from reader
    except pa.ArrowException as exc:  # DuckDB's error, surfaced through the Arrow stream
        message = str(exc)
        if "INTERRUPT" in message:
            raise duckdb.InterruptException(message) from None
        if "Out of Memory" in message:
            raise duckdb.OutOfMemoryException(message) from None
        raise duckdb.Error(message) from None


# export ----------------------------------------------------------------------------------------------------------


def export_parquet(runs: Sequence[Run], folder: str | Path) -> dict[str, int]:
    """Write every view as Parquet partitioned by run (`FOLDER/<view>/run=<run>/part-0.parquet`, the columns of the
    view less `run`, which the partition names): what a distributed engine (Dask, Spark, Trino) reads. Every run
    gets a file in every view, empty where it has no rows, so each view's columns are there. Returns rows per view."""
    from urllib.parse import quote

    import pyarrow.parquet as pq

    folder = Path(folder)
    written = dict.fromkeys(VIEWS, 0)
    for run in runs:
        con = connect([run])
        try:
            for name in VIEWS:
                where = folder / name / f"run={quote(run.name, safe='')}"
                where.mkdir(parents=True, exist_ok=True)
                reader = con.sql(f"SELECT * EXCLUDE (run) FROM {name}").to_arrow_reader(1 << 20)
                with pq.ParquetWriter(where / "part-0.parquet", reader.schema) as writer:
                    for batch in reader:
                        writer.write_batch(batch)
                        written[name] += batch.num_rows
        finally:
            con.close()
    return written

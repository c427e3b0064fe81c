"""`portscope sql`: SQL over one run or hundreds (the views of ingest/sql.py), printed as a table or written out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

from .errors import UsageError
from .output_paths import OutputFile

FORMATS = ("table", "csv", "json", "arrow", "parquet")
_BINARY = ("arrow", "parquet")
_CELL = 80  # characters of a cell an aligned table shows (csv and json give the whole text)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `sql`."""
    p = sub.add_parser(
        "sql",
        epilog="views: runs, regions, ops, runtime, kernels, copies, syncs, fallbacks, compiles, memory, flows, signals; "
               "every row has its run. `portscope sql --schema` lists their columns; docs/sql.md has example queries.",
    )
    p.add_argument("query", nargs="?", help='a query, e.g. "SELECT name, sum(dur_ns) FROM ops GROUP BY name ORDER BY 2 DESC"')
    p.add_argument("runs", nargs="*", metavar="RUN", help="a trace (.arrow), a folder of traces or a glob (quoted); a file another tool wrote is converted in memory")
    p.add_argument("--schema", action="store_true", help="print the views and their columns, and exit")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="table (aligned, the default), csv, json (an array of objects), arrow (IPC file) or parquet")
    p.add_argument("-o", "--output", type=OutputFile, help="write the result to this file (required for arrow and parquet)")
    p.set_defaults(func=_sql)


def _sql(args: argparse.Namespace) -> int:
    from .sql import connect, open_runs, run_query, schema_text, views_in

    if args.schema:
        sys.stdout.write(schema_text())
        return 0
    if not args.query or not args.runs:
        raise UsageError("give a query and at least one RUN (a trace, a folder of traces or a glob); --schema lists the views")
    if args.format in _BINARY and not args.output:
        raise UsageError(f"--format {args.format} writes a binary file: give -o FILE")
    runs = open_runs(args.runs)
    con = connect(runs, views=views_in(args.query))  # only the tables the query reads are registered
    try:
        table = run_query(con, args.query).table
    finally:
        con.close()
    if args.output:
        write_result(table, args.format, Path(args.output))
        print(f"{args.output}: {table.num_rows} rows, {table.num_columns} columns", file=sys.stderr)
    else:
        write_text(table, args.format, sys.stdout)
    return 0


def write_result(table: pa.Table, fmt: str, path: Path) -> None:
    """The result in a file, in `fmt` (one of FORMATS)."""
    if fmt == "arrow":
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    else:
        with path.open("w", encoding="utf-8", newline="") as out:
            write_text(table, fmt, out)


def write_text(table: pa.Table, fmt: str, out: TextIO) -> None:
    """The result as text: an aligned table, CSV or JSON."""
    if fmt == "csv":
        import csv

        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(table.column_names)
        for batch in table.to_batches():
            writer.writerows(zip(*(c.to_pylist() for c in batch.columns), strict=True))
    elif fmt == "json":
        json.dump(table.to_pylist(), out, indent=1, default=_json_value)
        out.write("\n")
    else:
        out.write(format_table(table))


def _json_value(value: Any) -> Any:
    """What json cannot write: a DECIMAL (DuckDB's sum of integers is one) as a number, anything else as text."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return str(value)


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    text = str(value).replace("\n", " ")
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"


def format_table(table: pa.Table) -> str:
    """An aligned table: numbers to the right, long text cut at 80 characters, then the row count."""
    names = table.column_names
    cells = [[_text(v) for v in table.column(n).to_pylist()] for n in names]
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) for t in table.schema.types]
    widths = [max([len(n), *map(len, col)]) for n, col in zip(names, cells, strict=True)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    rows = [line(names), line(["-" * w for w in widths])]
    rows += [line([col[i] for col in cells]) for i in range(table.num_rows)]
    rows.append(f"({table.num_rows} row{'' if table.num_rows == 1 else 's'})")
    return "\n".join(rows) + "\n"

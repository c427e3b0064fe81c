"""RSS stage by stage of `portscope convert` on one Kineto file, in one process: after reading, after translating,
after assembling (linking, rules, tables), after each table written, with the peak since the previous mark (VmHWM,
reset at each mark), glibc's heap and mapped blocks (mallinfo2), Arrow's pool and Python's allocated blocks.

    .venv/bin/python bench/kineto_stages.py /tmp/gpu_4.json /tmp/out.arrow
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from typing import Any

import pyarrow as pa

from portscope.ingest import convert_cli
from portscope.ingest import trace as trace_module
from portscope.ingest.readers import kineto, kineto_stream


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                               "uordblks", "fordblks", "keepcost")]  # fmt: skip


_LIBC = ctypes.CDLL(None)
_LIBC.mallinfo2.restype = _MallInfo2
_T0 = time.time()
_MB = 2**20


def mark(what: str) -> None:
    """Print the figures at this point and reset the peak."""
    vm = {k: int(v.split()[0]) / 1024 for k, _, v in (line.partition(":") for line in open("/proc/self/status"))
          if k in ("VmRSS", "VmHWM")}  # fmt: skip
    m = _LIBC.mallinfo2()
    print(f"{time.time() - _T0:7.1f}s {what:28s} rss {vm['VmRSS']:6.1f} MB, peak since last {vm['VmHWM']:6.1f} MB | "
          f"glibc heap {m.arena / _MB:5.1f} (free {m.fordblks / _MB:5.1f}), mapped {m.hblkhd / _MB:6.1f}, "
          f"arrow {pa.total_allocated_bytes() / _MB:5.1f}, python blocks {sys.getallocatedblocks() / 1e6:4.2f}M", flush=True)  # fmt: skip
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def after(module: Any, name: str, label: str) -> None:
    """Mark the figures each time `module.name` returns."""
    inner = getattr(module, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = inner(*args, **kwargs)
        mark(label)
        return out

    setattr(module, name, wrapped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("output")
    args = parser.parse_args()
    after(kineto_stream, "collect_file", "read")
    after(kineto, "translate", "translated")
    after(kineto, "assemble", "assembled (linked, rules, tables)")
    convert_marked(args.input, args.output)


def convert_marked(source: str, output: str) -> None:
    """`portscope convert source -o output` in this process, marking the figures after each table is written."""
    tables = iter(range(1, 1 << 30))
    fixed_batches = trace_module.fixed_batches

    def written(batches: Any) -> Any:  # one call per table, as its member of the file is written
        yield from fixed_batches(batches)
        mark(f"table {next(tables)} written")

    trace_module.fixed_batches = written
    mark("start (imports)")
    cli = argparse.ArgumentParser()
    convert_cli.register(cli.add_subparsers())
    command = cli.parse_args(["convert", source, "-o", output])
    command.func(command)
    mark("written")


if __name__ == "__main__":
    main()

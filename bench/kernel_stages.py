"""RSS stage by stage of `portscope convert` on one torch_npu kernel_details.csv, in one process (the figures of
docs/huge-traces.md): after translating, linking, the rules, the assembly's start and each table it plans, then
each table written, with the peak since the previous mark (VmHWM, reset at each mark: `kineto_stages.mark`).

    .venv/bin/python bench/kernel_stages.py /tmp/k/kernels_2gb_2000names.csv /tmp/out.arrow
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from kineto_stages import after, mark  # noqa: E402

from portscope.ingest import assemble, convert_cli  # noqa: E402
from portscope.ingest import trace as trace_module  # noqa: E402
from portscope.ingest.readers import ascend_csv  # noqa: E402

PLANNED = ("regions", "call_sites", "runtime_calls", "placements", "findings", "ops", "park", "engine_slices",
           "_device_lanes", "_span_lanes")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("output")
    args = parser.parse_args()
    after(ascend_csv, "translate", "translated (read, events made)")
    after(assemble, "link", "linked")
    after(assemble, "apply_rules", "rules")
    for name in PLANNED:
        after(assemble.Assembly, name, name)
    tables = iter(range(1, 1 << 30))
    fixed_batches = trace_module.fixed_batches

    def written(batches: Any) -> Any:  # one call per table, as its member of the file is written
        yield from fixed_batches(batches)
        mark(f"table {next(tables)} written")

    trace_module.fixed_batches = written
    mark("start (imports)")
    cli = argparse.ArgumentParser()
    convert_cli.register(cli.add_subparsers())
    command = cli.parse_args(["convert", args.input, "-o", args.output])
    command.func(command)
    mark("written")


if __name__ == "__main__":
    main()

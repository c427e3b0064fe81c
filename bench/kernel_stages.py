"""RSS stage by stage of `portscope convert` on one torch_npu kernel_details.csv, in one process (the figures of
docs/huge-traces.md): after translating, linking, the rules, the assembly's start and each table it plans, then
each table written, with the peak since the previous mark (VmHWM, reset at each mark: `kineto_stages.mark`).

    .venv/bin/python bench/kernel_stages.py /tmp/k/kernels_2gb_2000names.csv /tmp/out.arrow
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from kineto_stages import after, convert_marked  # noqa: E402

from portscope.ingest import assemble  # noqa: E402
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
    convert_marked(args.input, args.output)


if __name__ == "__main__":
    main()

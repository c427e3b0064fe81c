"""One clock per predicted run: regions laid back to back on predicted time, never at their measured start."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.compute as pc
import torch

from portscope.ingest import read_trace
from portscope.profiler import explain, save


def test_predicted_regions_follow_each_other_on_predicted_time(tmp_path: Path) -> None:
    x = torch.randn(64, 64, dtype=torch.float16)
    with torch.no_grad():
        with explain("first", target="fp16-npu") as first:
            y = x @ x
        time.sleep(0.3)  # host time between the regions: it must not appear on the predicted axis
        with explain("second", target="fp16-npu") as second:
            with explain("inner", target="fp16-npu"):
                (y + y).sum()
            y * y
    path = tmp_path / "run.arrow"
    save([first, second], path)
    trace = read_trace(path)
    slices = trace["engine_slices"]
    assert trace.predicted and slices.num_rows
    regions = dict(zip(trace["regions"].column("name").to_pylist(), trace["regions"].column("region_id").to_pylist(), strict=True))
    spans = {}
    for name, rid in regions.items():
        mine = slices.filter(pc.equal(slices.column("region_id"), rid))
        start = pc.min(mine.column("start")).as_py()
        end = pc.max(pc.add(mine.column("start"), mine.column("dur"))).as_py()
        spans[name] = (start, end)
    measured_gap = trace["regions"].column("start_ns").to_pylist()[regions["second"]]
    assert measured_gap > 300_000_000  # the second region started 0.3 s of host time later ...
    # ... but on the predicted axis the first region starts at 0 and each region starts where the one before ended
    assert spans["first"][0] == 0
    assert spans["second"][0] == spans["first"][1]
    assert spans["inner"][0] == spans["second"][1]  # a nested region: after its parent's own operators

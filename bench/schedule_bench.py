"""Bench: scheduling 1M recorded operators (< 5 s) and the bytes the schedule adds (< 2x the op table's).

Synthetic ops shaped like an eager decoder step under fp16-npu: matrix products,
elementwise device ops, host fallbacks with their d2h/h2d round trips, views.
Run: .venv/bin/python bench/schedule_bench.py [N]
"""

from __future__ import annotations

import io
import random
import sys
import time

import pyarrow as pa

from portscope.ingest.builder import TableBuilder
from portscope.profiler.schedule import ScheduleOps, schedule
from portscope.profiler.targets import load_target

NAMES = ["aten::mm", "aten::mul.Tensor", "aten::add.Tensor", "aten::_to_copy", "aten::view", "aten::silu"]


def synthetic(n: int, seed: int = 0) -> ScheduleOps:
    rng = random.Random(seed)
    ops = ScheduleOps([], [], [], [], [], [], [], [], [], [], [])
    for i in range(n):
        name = NAMES[i % len(NAMES)]
        view = name == "aten::view"
        fallback = name == "aten::_to_copy"
        ops.op_id.append(i)
        ops.name.append(name)
        ops.placement.append("fallback" if fallback else "device")
        ops.module.append(f"model.layers.{(i // 60) % 32}.mlp")
        ops.flops.append(2 * 7 * 128 * 128 if name == "aten::mm" else 7 * 128)
        ops.bytes.append(4 * 7 * 128)
        ops.start_ns.append(i * 1000)
        ops.dur_ns.append(800)
        ops.deps.append(None if view else tuple(j for j in (i - 1, i - rng.randint(2, 9)) if j >= 0))
        ops.graph_id.append(None)
        ops.is_call.append(False)
        if fallback:
            ops.transfers[i] = [("d2h", 1792)]
        elif i % len(NAMES) == 4 + 1 and i:  # the op after a fallback reads its host result
            ops.transfers[i] = [("h2d", 1792)]
    return ops


def _ipc_bytes(table: pa.Table) -> int:
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.tell()


def main(n: int = 1_000_000) -> None:
    ops = synthetic(n)
    target = load_target("fp16-npu")
    t, cpu = time.perf_counter(), time.process_time()
    sched = schedule(ops, target)
    seconds, cpu_s = time.perf_counter() - t, time.process_time() - cpu
    print(f"scheduled {n:,} ops -> {len(sched):,} slices in {seconds:.2f} s wall, {cpu_s:.2f} s CPU "
          f"({1e6 * cpu_s / n:.2f} us/op), predicted {sched.total_ns / 1e6:.1f} ms")
    t = time.perf_counter()
    slice_table = sched.to_table(ops, 0)
    build_s = time.perf_counter() - t
    op_b = TableBuilder("ops")
    op_b.extend({"op_id": ops.op_id, "region_id": [0] * n, "name": ops.name, "start_ns": ops.start_ns,
                 "dur_ns": ops.dur_ns, "placement": ops.placement, "device": ["npu:0"] * n,
                 "input_shapes": ["1x7x128;128x128"] * n, "input_strides": ["896x128x1;128x1"] * n,
                 "input_dtypes": ["float16;float16"] * n, "output_shapes": ["1x7x128"] * n,
                 "output_dtypes": ["float16"] * n, "bytes_in": ops.bytes, "bytes_out": ops.bytes,
                 "flops": ops.flops, "module": ops.module, "call_site": ["model.py:42 (forward)"] * n,
                 "thread": [0] * n})
    op_bytes, slice_bytes = _ipc_bytes(op_b.build()), _ipc_bytes(slice_table)
    print(f"engine_slices table built in {build_s:.2f} s")
    print(f"op table {op_bytes / 1e6:.1f} MB, schedule {slice_bytes / 1e6:.1f} MB: {slice_bytes / op_bytes:.2f}x "
          f"({slice_bytes / n:.0f} B/op)")
    ok = cpu_s < 5 and slice_bytes < 2 * op_bytes
    print("PASS" if ok else "FAIL", "(limits: < 5 s CPU, < 2x the op table)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)

"""Per-rank analyses of a multi-rank run (`ingest/ranks.py`): where each rank's steps went, who held the others up.

Per rank and per step (a ``ProfilerStep#N`` region of the rank), over the step's time:

* **compute**: time covered by compute work. A rank with device work: its device slices (kernels, copies) that
  are not communication; a rank without (a CPU run): its host lanes' top-level operators that are not.
* **communication**: time covered by communication: a rank with device work, its kernels whose name says
  ``nccl``/``rccl``/``gloo``/``hccl`` or whose category is communication (`op_categories.kernel_category`);
  a rank without, its host operators so named (``gloo:all_reduce``, ``c10d::allreduce_``...) and the
  communication ranges the profiler recorded on the backend's threads (``gloo:all_reduce`` annotations: regions).
* **exposed communication**: communication time covered by no compute of the same rank (|comm ∪ compute| − |compute|).
* **idle**: the step's time covered by neither.
* **busy**: the step's time less its exposed communication: the time the rank's own work took. In synchronised
  training (DDP) every rank's step lasts as long as the slowest one's: the others spend the difference waiting
  in a collective, so the step's wall time does not tell the ranks apart and its busy time does.
* **host communication wait**: the step's time during which a host thread of the rank was inside a communication
  operator (``nccl:all_reduce``, ``c10d::allreduce_``, ``record_param_comms``...: `op_categories.is_communication`,
  at any depth), less the runtime calls inside them that launch device work (``cudaLaunchKernel`` is not waiting;
  a ``cudaStreamSynchronize`` inside a collective is): on a GPU rank, where the NCCL kernels are the communication,
  the time its host was held by collectives (NCCL's blocking wait, a barrier, a synchronising wait); on a CPU
  (gloo) rank, its host operators' share of the communication.

The **straggler** of a step is the rank with the longest busy time; its slowdown is its busy time over the
median rank's (the median busy time of the other ranks in that step: with two ranks, the other one), in ns and %. `slow_operators` lists the
operators (communication aside: their time is mostly waiting) that took the straggler longer than the median of
the other ranks (device time per operator from
`op_device`; CPU time in a run without device work).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .collectives import (
    ArrivalClock,
    MatchRule,
    collective_calls,
    communication_ops,
    match_collectives,
    name_mask,
    region_rank_array,
)
from .columns import memory_slices
from .kineto_vocabulary import SYNC_RUNTIME_CALLS
from .op_categories import is_communication
from .op_device import device_by_operator, op_calls
from .op_report import records
from .ranks import LANE_RANK, STEP_REGION, rank_of_regions
from .schema import DEVICE_ENGINES
from .trace import Trace

__all__ = ["STEP_COLUMNS", "STRAGGLER_COLUMNS", "SUMMARY_COLUMNS", "format_ranks", "is_communication", "rank_skews",
           "rank_steps", "rank_summary", "ranks_report_data", "slow_operators", "stragglers"]

STEP_COLUMNS = ["rank", "step", "region_id", "start_ns", "step_ns", "compute_ns", "communication_ns",
                "exposed_communication_ns", "idle_ns", "busy_ns", "host_comm_wait_ns"]  # fmt: skip
STRAGGLER_COLUMNS = ["step", "rank", "busy_ns", "median_ns", "slowdown_ns", "slowdown_pct", "ranks"]
SUMMARY_COLUMNS = ["rank", "steps", "step_ns", "compute_ns", "communication_ns", "exposed_communication_ns", "idle_ns",
                   "busy_ns", "host_comm_wait_ns", "straggler_steps", "skew_ns"]  # fmt: skip
SLOW_COLUMNS = ["operator", "straggler_ns", "median_ns", "excess_ns"]

_DEVICE_KINDS = frozenset(k.value for k in DEVICE_ENGINES)
_TEXT_STEPS = 20  # the text report lists this many stragglers at most



def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals covering [starts, ends)."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    first = np.flatnonzero(np.r_[True, starts[1:] > ends[:-1]])  # each run's first interval
    return starts[first], ends[np.r_[first[1:] - 1, len(ends) - 1]]


class _Coverage:
    """The union of some intervals, and how much of any window it covers (a binary search, not a scan)."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self.starts, self.ends = _union(starts, ends)
        self.before = np.r_[0, np.cumsum(self.ends - self.starts)]  # covered length before each interval

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Covered length before each time t."""
        i = np.searchsorted(self.starts, t, side="right") - 1
        inside = np.clip(t - self.starts[np.maximum(i, 0)], 0, (self.ends - self.starts)[np.maximum(i, 0)]) if len(self.starts) else 0
        return np.where(i >= 0, self.before[np.maximum(i, 0)] + inside, 0)

    def within(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return self.upto(hi) - self.upto(lo)


def _intervals(trace: Trace) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per rank: 'compute' and 'communication' intervals (start, end) in ns."""
    ranks = rank_of_regions(trace)
    table = trace["engine_slices"].select(["engine", "engine_kind", "kind", "name", "start", "dur"])
    slices = table.to_pandas()
    slices = slices[~memory_slices(table.column("engine")) & (slices["kind"].astype(str) != "annotation")]
    lane_rank = slices["engine"].astype(str).str.extract(LANE_RANK, expand=False)
    slices = slices.assign(rank=pd.to_numeric(lane_rank).fillna(0).astype(np.int64) if len(slices) else 0)
    names = slices["name"].astype(str)
    comm_names = {n: is_communication(n) for n in names.unique()}
    slices = slices.assign(comm=names.map(comm_names).astype(bool), device=slices["engine_kind"].astype(str).isin(_DEVICE_KINDS),
                           end=slices["start"] + slices["dur"])  # fmt: skip
    regions = trace["regions"].select(["region_id", "name", "start_ns", "dur_ns"]).to_pandas()
    regions = regions.assign(rank=regions["region_id"].map(ranks).fillna(0).astype(np.int64))
    comm_regions = regions[regions["name"].astype(str).map(is_communication)]
    out: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for rank in sorted(set(slices["rank"].tolist()) | set(regions["rank"].tolist())):
        mine = slices[slices["rank"] == rank]
        on_device = bool(mine["device"].any())
        work = mine[mine["device"]] if on_device else mine[mine["engine_kind"].astype(str) == "host"]
        compute, comm = work[~work["comm"]], work[work["comm"]]
        c_start, c_end = comm["start"].to_numpy(np.int64), comm["end"].to_numpy(np.int64)
        if not on_device:
            ranged = comm_regions[comm_regions["rank"] == rank]
            c_start = np.r_[c_start, ranged["start_ns"].to_numpy(np.int64)]
            c_end = np.r_[c_end, (ranged["start_ns"] + ranged["dur_ns"]).to_numpy(np.int64)]
        out[rank] = {"compute": (compute["start"].to_numpy(np.int64), compute["end"].to_numpy(np.int64)),
                     "communication": (c_start, c_end)}  # fmt: skip
    return out


class _ThreadSpans:
    """Disjoint intervals per (rank, thread) key, and which times lie inside them (a binary search)."""

    def __init__(self, keys: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self.spans = {}
        for key in np.unique(keys):
            mine = keys == key
            self.spans[int(key)] = _union(starts[mine], ends[mine])

    def inside(self, keys: np.ndarray, times: np.ndarray) -> np.ndarray:
        out = np.zeros(len(times), bool)
        for key, (lo, hi) in self.spans.items():
            mine = np.flatnonzero(keys == key)
            i = np.searchsorted(lo, times[mine], side="right") - 1
            out[mine] = (i >= 0) & (times[mine] < hi[np.maximum(i, 0)])
        return out


_THREADS = 1 << 32  # (rank, thread) key = rank * _THREADS + thread


def _host_comm(trace: Trace) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per rank: 'held', the intervals a host thread spent inside communication operators, and 'launching', the
    runtime calls inside them (on the same thread) that launch device work rather than wait."""
    region_rank = region_rank_array(trace)
    ops = communication_ops(trace, region_rank)
    if not len(ops):
        return {}
    start = ops["start_ns"].to_numpy(np.int64)
    key, end = ops["rank"].to_numpy(np.int64) * _THREADS + ops["thread"].to_numpy(np.int64), start + ops["dur_ns"].to_numpy(np.int64)
    held = _ThreadSpans(key, start, end)
    launching = _launching_calls(trace, held, region_rank)
    out: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    ranks = key // _THREADS
    for rank in np.unique(ranks).tolist():
        out[rank] = {"held": (start[ranks == rank], end[ranks == rank]),
                     "launching": launching.get(rank, (np.zeros(0, np.int64), np.zeros(0, np.int64)))}  # fmt: skip
    return out


def _launching_calls(trace: Trace, held: _ThreadSpans, region_rank: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per rank, the runtime calls (not waiting ones: `SYNC_RUNTIME_CALLS`) that start inside a communication
    operator on their operator's thread."""
    calls = trace["runtime_calls"].select(["region_id", "op_id", "name", "start_ns", "dur_ns"])
    if not calls.num_rows:
        return {}
    launch = ~name_mask(calls.column("name"), SYNC_RUNTIME_CALLS.__contains__) & calls.column("op_id").is_valid().to_numpy(zero_copy_only=False)
    rank = region_rank[np.minimum(calls.column("region_id").to_numpy(), len(region_rank) - 1)]
    start = calls.column("start_ns").to_numpy().astype(np.int64)
    ranks_held = {k // _THREADS for k in held.spans}
    launch &= np.isin(rank, list(ranks_held))
    ops = calls.column("op_id").fill_null(-1).to_numpy().astype(np.int64)
    wanted = np.unique(ops[launch])
    thread_of: dict[int, int] = {}
    for batch in trace.batches("ops"):
        ids = batch.column("op_id").to_numpy().astype(np.int64)
        hit = np.isin(ids, wanted)
        if hit.any():
            thread_of.update(zip(ids[hit].tolist(), batch.column("thread").fill_null(-1).to_numpy(zero_copy_only=False)[hit].tolist(), strict=True))
    idx = np.flatnonzero(launch)
    threads = np.array([thread_of.get(o, -1) for o in ops[idx].tolist()], np.int64)
    inside = held.inside(rank[idx] * _THREADS + threads, start[idx])
    idx = idx[inside]
    end = start + calls.column("dur_ns").to_numpy().astype(np.int64)
    return {r: (start[idx][rank[idx] == r], end[idx][rank[idx] == r]) for r in np.unique(rank[idx]).tolist()}


def rank_steps(trace: Trace) -> pd.DataFrame:
    """One row per (rank, ProfilerStep#N) of the run (STEP_COLUMNS), by rank then step; a single-rank run is rank 0."""
    ranks = rank_of_regions(trace)
    regions = trace["regions"].select(["region_id", "name", "start_ns", "dur_ns"]).to_pandas()
    step = regions["name"].astype(str).str.extract(STEP_REGION, expand=False)
    regions = regions[step.notna()].assign(step=pd.to_numeric(step[step.notna()]).astype(np.int64))
    regions = regions.assign(rank=regions["region_id"].map(ranks).fillna(0).astype(np.int64))
    spans = _intervals(trace)
    host = _host_comm(trace) if len(regions) else {}
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    parts = []
    for rank, group in regions.groupby("rank", sort=True):
        compute, comm = spans.get(int(rank), {}).get("compute", empty), spans.get(int(rank), {}).get("communication", empty)
        held, launching = host.get(int(rank), {}).get("held", empty), host.get(int(rank), {}).get("launching", empty)
        lo = group["start_ns"].to_numpy(np.int64)
        hi = lo + group["dur_ns"].to_numpy(np.int64)
        compute_ns = _Coverage(*compute).within(lo, hi)
        either = _Coverage(np.r_[compute[0], comm[0]], np.r_[compute[1], comm[1]]).within(lo, hi)
        exposed = either - compute_ns
        dur = group["dur_ns"].to_numpy(np.int64)
        # held less its launches: |held ∪ launching| − |launching| (a launch lies inside what holds it)
        waited = _Coverage(np.r_[held[0], launching[0]], np.r_[held[1], launching[1]]).within(lo, hi) - _Coverage(*launching).within(lo, hi)
        parts.append(pd.DataFrame({"rank": int(rank), "step": group["step"].to_numpy(), "region_id": group["region_id"].to_numpy(),
                                   "start_ns": lo, "step_ns": dur, "compute_ns": compute_ns,
                                   "communication_ns": _Coverage(*comm).within(lo, hi), "exposed_communication_ns": exposed,
                                   "idle_ns": dur - either, "busy_ns": dur - exposed, "host_comm_wait_ns": waited}))  # fmt: skip
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=STEP_COLUMNS)
    return frame[STEP_COLUMNS].astype(np.int64).sort_values(["rank", "step"], kind="stable").reset_index(drop=True)


def stragglers(steps: pd.DataFrame) -> pd.DataFrame:
    """The straggler of each step two ranks or more ran (STRAGGLER_COLUMNS): the rank of longest busy time (the lowest rank on a tie),
    its busy time, the median of the other ranks', by how much (ns, %) and how many ranks ran the step."""
    rows = []
    for step, group in steps.groupby("step", sort=True):
        if len(group) < 2:
            continue  # one rank ran it: nobody to straggle behind
        group = group.sort_values("rank", kind="stable")
        busy = group["busy_ns"].to_numpy(np.int64)
        at = int(np.argmax(busy))
        others = np.delete(busy, at)
        median = float(np.median(others)) if len(others) else float(busy[at])
        slow = float(busy[at]) - median
        rows.append({"step": int(step), "rank": int(group["rank"].iloc[at]), "busy_ns": int(busy[at]), "median_ns": median,
                     "slowdown_ns": slow, "slowdown_pct": 100.0 * slow / median if median > 0 else 0.0,
                     "ranks": len(group)})  # fmt: skip
    return pd.DataFrame(rows, columns=STRAGGLER_COLUMNS)


def rank_summary(steps: pd.DataFrame, straggling: pd.DataFrame | None = None, skews: dict[int, int] | None = None) -> pd.DataFrame:
    """Per rank (SUMMARY_COLUMNS): its steps' figures summed, in how many steps it was the straggler, and the clock
    skew the merge removed from it (`skews`, `rank_skews`; 0 where not given)."""
    straggling = stragglers(steps) if straggling is None else straggling
    counts = straggling["rank"].value_counts().to_dict()
    summed = ["step_ns", "compute_ns", "communication_ns", "exposed_communication_ns", "idle_ns", "busy_ns", "host_comm_wait_ns"]
    frame = steps.groupby("rank", sort=True).agg(steps=("step", "count"), **{c: (c, "sum") for c in summed}).reset_index()
    frame["straggler_steps"] = frame["rank"].map(counts).fillna(0).astype(np.int64)
    frame["skew_ns"] = frame["rank"].map(skews or {}).fillna(0).astype(np.int64)
    return frame[SUMMARY_COLUMNS]


def rank_skews(trace: Trace) -> dict[int, int]:
    """The clock skew (ns) the merge removed from each rank to line its steps up with the reference rank's
    (``run_info.extra["ranks"]``; {} for a run merged before it did, or not a multi-rank run)."""
    return {r["rank"]: r["skew_ns"] for r in trace.run_info.extra.get("ranks") or []
            if isinstance(r, dict) and isinstance(r.get("rank"), int) and isinstance(r.get("skew_ns"), int)}  # fmt: skip


def slow_operators(trace: Trace, steps: pd.DataFrame, rank: int, step: int | None = None, top: int = 10) -> pd.DataFrame:
    """The operators that took `rank` longer than the median of the other ranks (SLOW_COLUMNS), in step `step`
    (None: every step), by excess: device time per operator (`op_device`, self time), CPU time in a run
    without device work."""
    chosen = steps if step is None else steps[steps["step"] == step]
    per_rank: dict[int, pd.Series] = {}
    device = False
    frames = {}
    for r, group in chosen.groupby("rank", sort=True):
        frames[int(r)] = device_by_operator(op_calls(trace, [int(x) for x in group["region_id"]]))
        device = device or bool(frames[int(r)]["device_self_ns"].sum() > 0)
    metric = "device_self_ns" if device else "cpu_ns"
    for r, frame in frames.items():
        per_rank[r] = frame.set_index("operator")[metric].astype(np.float64)
    if rank not in per_rank:
        return pd.DataFrame(columns=SLOW_COLUMNS)
    others = [s for r, s in per_rank.items() if r != rank]
    mine = per_rank[rank]
    if not others:
        return pd.DataFrame(columns=SLOW_COLUMNS)
    table = pd.concat(others, axis=1).reindex(mine.index.union(pd.concat(others, axis=1).index)).fillna(0.0)
    median = table.median(axis=1)
    mine = mine.reindex(median.index).fillna(0.0)
    frame = pd.DataFrame({"operator": median.index, "straggler_ns": mine.to_numpy(), "median_ns": median.to_numpy()})
    frame["excess_ns"] = frame["straggler_ns"] - frame["median_ns"]
    waiting = frame["operator"].map(lambda n: is_communication(str(n))).astype(bool)  # a collective's time is waiting
    frame = frame[(frame["excess_ns"] > 0) & ~waiting].sort_values(["excess_ns", "operator"], ascending=[False, True], kind="stable")
    return frame.head(top).reset_index(drop=True)[SLOW_COLUMNS]


def ranks_report_data(trace: Trace) -> dict[str, Any]:
    """`portscope report --ranks` as JSON-ready data: `rank_count` (the run's ranks), `ranks` (per rank with steps), `steps` (per rank and step), `stragglers`
    (per step), `slow_operators` of the rank most often the straggler; the collectives matched across ranks
    (`ingest/collectives.py`): `collectives` (largest arrival skew first), `collective_arrivals` (per collective and
    rank), `collective_ranks` (per rank), `collective_problems`, `collective_rule` (how the calls were matched: a
    `collectives.MatchRule` value), and the number of `point_to_point` transfers."""
    steps = rank_steps(trace)
    straggling = stragglers(steps)
    summary = rank_summary(steps, straggling, rank_skews(trace))
    worst = None
    slow = pd.DataFrame(columns=SLOW_COLUMNS)
    if len(straggling):
        worst = int(straggling["rank"].value_counts().sort_index().idxmax())
        slow = slow_operators(trace, steps, worst)
    calls = collective_calls(trace)
    matched = match_collectives(calls)
    by_skew = matched.table.sort_values(["skew_ns", "collective"], ascending=[False, True], kind="stable")
    ranks = len(set(rank_of_regions(trace).values())) or len(summary)
    return {"world_size": trace.run_info.extra.get("world_size") or max(ranks, 1), "rank_count": ranks,
            "ranks": records(summary),
            "reference_rank": trace.run_info.extra.get("reference_rank"),
            "steps": records(steps), "stragglers": records(straggling), "slowest_rank": worst,
            "slow_operators": records(slow), "collectives": records(by_skew),
            "collective_arrivals": records(matched.arrivals), "collective_ranks": records(matched.per_rank),
            "collective_problems": matched.problems, "collective_rule": matched.rule.value, "point_to_point": int(calls["p2p"].sum()) if len(calls) else 0}  # fmt: skip


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


def format_ranks(data: dict[str, Any]) -> str:
    """The ranks report as text: per rank and step, then the collectives matched across ranks."""
    return _format_steps(data) + _format_collectives(data)


_TEXT_COLLECTIVES = 10  # the text report lists this many collectives at most
_TEXT_ARRIVALS = 8  # and each one's arrivals for this many ranks at most


def _format_collectives(data: dict[str, Any]) -> str:
    table = data.get("collectives") or []
    lines = []
    if data.get("point_to_point"):
        lines += ["", f"point-to-point transfers (send/recv): {data['point_to_point']}, not matched as collectives. Ranks that "
                      "talk by send/recv run different pipeline stages: a step's straggler is then its slowest stage (the "
                      "pipeline's bottleneck), and its excess over the others mixes their different work with any slowdown"]
    if not table:
        return "\n".join([*lines, "", "no collective ran on two ranks or more", ""])
    clocks = sorted({c["clock"] for c in table})
    rule = data.get("collective_rule") or MatchRule.ORDER.value
    why = (" (every call's process group and sequence number, from its record_param_comms arguments)"
           if rule == MatchRule.SEQUENCE.value else " (some call has no process group or sequence number in the trace)")
    lines += ["", f"collectives matched across ranks by {rule}{why}: {len(table)}; arrivals on the {' and '.join(clocks)}"
                  + (" (a communication kernel's start)" if ArrivalClock.DEVICE.value in clocks else "")]
    lines += [f"  problem: {p}" for p in data.get("collective_problems") or []]
    shown = table[:_TEXT_COLLECTIVES]
    lines += [f"the {len(shown)} of largest arrival skew (last arrival less the first):" if len(shown) < len(table) else
              "by arrival skew (last arrival less the first):",
              f"{'name':<28} {'#':>4} {'step':>6} {'ranks':>5} {'skew ms':>10} {'last':>5} {'first':>5}  arrivals (ms after the first)"]  # fmt: skip
    arrivals: dict[int, list[dict[str, Any]]] = {}
    for a in data.get("collective_arrivals") or []:
        arrivals.setdefault(a["collective"], []).append(a)
    for c in shown:
        mine = arrivals.get(c["collective"], [])
        listed = " ".join(f"r{a['rank']} +{a['skew_ns'] / 1e6:,.2f}" for a in mine[:_TEXT_ARRIVALS])
        listed += " ..." if len(mine) > _TEXT_ARRIVALS else ""
        step = "-" if c["step"] < 0 else str(c["step"])
        lines.append(f"{c['name'][:28]:<28} {c['occurrence']:>4} {step:>6} {c['ranks']:>5} {_ms(c['skew_ns']):>10} "
                     f"{c['last_rank']:>5} {c['first_rank']:>5}  {listed}")
    lines += ["", "per rank: collectives, arrived last in, arrived first in, waited for the others (ms), mean arrival skew (ms):",
              f"{'rank':>5} {'colls':>6} {'last':>5} {'first':>5} {'waited ms':>10} {'mean skew':>10}"]
    for r in data.get("collective_ranks") or []:
        skew = "-" if r["mean_skew_ns"] is None else _ms(r["mean_skew_ns"])
        lines.append(f"{r['rank']:>5} {r['collectives']:>6} {r['arrived_last']:>5} {r['arrived_first']:>5} "
                     f"{_ms(r['wait_ns']):>10} {skew:>10}")
    return "\n".join(lines) + "\n"


def _format_steps(data: dict[str, Any]) -> str:
    lines = [f"ranks: {data.get('rank_count', len(data['ranks']))} (world size {data['world_size']})", ""]
    if not data["steps"]:
        return "\n".join([*lines, "no ProfilerStep#N ranges: record with a torch.profiler schedule and prof.step()", ""])
    head = (f"{'rank':>5} {'steps':>5} {'step ms':>10} {'compute':>10} {'comm':>10} {'exposed':>10} {'idle':>10} {'busy':>10} "
            f"{'host wait':>10} {'straggler':>9} {'skew ms':>10}")  # fmt: skip
    lines.append(head)
    for r in data["ranks"]:
        lines.append(f"{r['rank']:>5} {r['steps']:>5} {_ms(r['step_ns']):>10} {_ms(r['compute_ns']):>10} "
                     f"{_ms(r['communication_ns']):>10} {_ms(r['exposed_communication_ns']):>10} {_ms(r['idle_ns']):>10} "
                     f"{_ms(r['busy_ns']):>10} {_ms(r['host_comm_wait_ns']):>10} {r['straggler_steps']:>9} "
                     f"{r['skew_ns'] / 1e6:>10,.3f}")  # fmt: skip
    lines += ["", "host wait: time a host thread of the rank spent inside collectives, their kernel launches excepted"]
    if data.get("reference_rank") is not None:
        lines.append(f"skew: the clock skew removed to line each rank's step starts up with rank {data['reference_rank']}'s")
    if not data["stragglers"]:
        return "\n".join([*lines, "", "no step ran on two ranks or more: no stragglers (convert a folder of per-rank traces)", ""])
    lines += ["", "stragglers (busy = step less exposed communication; median of the other ranks):",
              f"{'step':>5} {'rank':>5} {'busy ms':>10} {'median ms':>10} {'slower ms':>10} {'slower %':>9}"]
    shown = sorted(data["stragglers"], key=lambda s: -s["slowdown_ns"])[:_TEXT_STEPS] if len(data["stragglers"]) > _TEXT_STEPS \
        else data["stragglers"]
    for s in sorted(shown, key=lambda s: s["step"]):
        lines.append(f"{s['step']:>5} {s['rank']:>5} {_ms(s['busy_ns']):>10} {_ms(s['median_ns']):>10} "
                     f"{_ms(s['slowdown_ns']):>10} {s['slowdown_pct']:>8.1f}%")
    if len(shown) < len(data["stragglers"]):
        lines.append(f"  ... the {len(shown)} steps of largest slowdown of {len(data['stragglers'])} (--json lists every step)")
    if data["slowest_rank"] is not None:
        lines += ["", f"operators slower on rank {data['slowest_rank']} than the median of the others:"]
        if not data["slow_operators"]:
            lines.append("  none: the time went outside operators (idle, waiting)")
        for o in data["slow_operators"]:
            lines.append(f"  {_ms(o['excess_ns']):>10} ms more  {o['operator']} ({_ms(o['straggler_ns'])} vs {_ms(o['median_ns'])} ms)")
    return "\n".join(lines) + "\n"

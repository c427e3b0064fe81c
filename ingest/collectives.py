"""Collectives matched across the ranks of a multi-rank run (`ingest/ranks.py`): who arrived when, who waited.

What a converted run keeps of a collective is its operators (``c10d::allreduce_``, ``record_param_comms``,
``nccl:all_reduce``: `op_categories.is_communication`), their thread and time, the communication kernels they
launched and, where the profiler wrote them (newer PyTorch's ``record_param_comms``: ``Process Group Name``,
``Seq``), the process group and sequence number of each call (the ``comms`` table). Collectives are matched
(`MatchRule`):

* **by process group and sequence number** when every collective call of the run has both: the calls of each rank
  with the same (process group, sequence number) are one collective, whatever order the ranks made them in (two
  process groups' collectives interleave differently on different ranks);
* else **by name and order**: the k-th collective named N of each rank is one collective (older traces, gloo).

* A rank's **collective calls** are its outermost communication operators on each host thread; the call is named
  after the first of the operators nested in it on its thread that is not ``record_param_comms`` (so
  ``c10d::allreduce_`` around ``record_param_comms`` is ``c10d::allreduce_``). Point-to-point transfers
  (``send``/``recv``: a pipeline's stages talking) are not collectives: they are counted per rank, not matched.
* **arrival**: when the rank reached the collective. On the device when every rank's call launched a
  communication kernel (the earliest kernel's start: a GPU rank's host call returns at once, its kernel waits for
  the peers), else on the host (the call's start). `ArrivalClock` says which.
* **arrival skew** of a rank: its arrival less the first rank's; the collective's skew: the last arrival less the
  first. **wait**: the last arrival less the rank's own, the part of the collective the rank spent waiting for the
  others (with ranks missing from the run, for the others present).

A call's **step** is the ``ProfilerStep#N`` of its rank it started in; a collective's step is its lowest rank's.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .op_categories import is_communication
from .ranks import STEP_REGION, rank_of_regions
from .schema import DEVICE_ENGINES, TimeUnit
from .trace import Trace

__all__ = ["ARRIVAL_COLUMNS", "COLLECTIVE_COLUMNS", "RANK_COLUMNS", "ArrivalClock", "Collectives", "MatchRule", "collective_calls",
           "communication_ops", "is_point_to_point", "match_collectives", "name_mask", "region_rank_array"]

COLLECTIVE_COLUMNS = ["collective", "name", "occurrence", "step", "ranks", "first_rank", "last_rank", "first_arrival_ns",
                      "skew_ns", "wait_ns", "clock", "process_group", "seq"]  # fmt: skip
ARRIVAL_COLUMNS = ["collective", "name", "occurrence", "rank", "step", "arrival_ns", "dur_ns", "skew_ns", "wait_ns", "clock"]
RANK_COLUMNS = ["rank", "collectives", "arrived_last", "arrived_first", "wait_ns", "mean_skew_ns", "point_to_point"]
CALL_COLUMNS = ["rank", "thread", "name", "start_ns", "dur_ns", "device_start_ns", "step", "process_group", "seq"]

_P2P = frozenset({"send", "recv", "isend", "irecv"})
_TOKENS = re.compile(r"[^a-z0-9]+")
_PARAM_COMMS = "record_param_comms"
_DEVICE_KINDS = frozenset(k.value for k in DEVICE_ENGINES)


class ArrivalClock(enum.StrEnum):
    """Where a collective's arrivals were read."""

    DEVICE = "device"  # the start of the communication kernel each rank's call launched
    HOST = "host"  # the start of each rank's call


class MatchRule(enum.StrEnum):
    """How the ranks' calls were matched into collectives (the module's docstring)."""

    SEQUENCE = "process group and sequence number"  # every call has both (the comms table)
    ORDER = "name and order"  # the k-th call of a name on each rank


def is_point_to_point(name: str) -> bool:
    """A send or receive (``c10d::send``, ``c10d::recv_``, ``gloo:send``, ``nccl:recv``, ``c10d::recv_any_source_``)
    rather than a collective."""
    return bool(_P2P.intersection(_TOKENS.split(name.lower())))


def name_mask(column: pa.ChunkedArray | pa.Array, keep: Any) -> np.ndarray:
    """Rows of a (dictionary or string) column whose value `keep(value)` holds: `keep` asked once per distinct value."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(col.type):
        hits = np.array([bool(keep(str(v))) for v in col.dictionary.to_pylist()] + [False], bool)
        return hits[col.indices.fill_null(len(hits) - 1).to_numpy(zero_copy_only=False)]
    values = col.to_pylist()
    seen = {v: bool(keep(str(v))) for v in set(values) if v is not None}
    return np.array([seen.get(v, False) for v in values], bool)


def region_rank_array(trace: Trace) -> np.ndarray:
    """Rank of each region id (index: region id; 0 outside a multi-rank run)."""
    ranks = rank_of_regions(trace)
    ids = trace["regions"].column("region_id").to_numpy()
    out = np.zeros(int(ids.max()) + 1 if len(ids) else 1, np.int64)
    for region, rank in ranks.items():
        out[region] = rank
    return out


def communication_ops(trace: Trace, region_rank: np.ndarray) -> pd.DataFrame:
    """Every communication operator (`is_communication`) of the run: op_id, rank (`region_rank`: `region_rank_array`),
    thread, name, start_ns, dur_ns; read one batch of operators at a time."""
    parts = []
    for batch in trace.batches("ops"):
        comm = name_mask(batch.column("name"), is_communication)
        if not comm.any():
            continue
        regions = batch.column("region_id").fill_null(0).to_numpy(zero_copy_only=False)[comm]
        parts.append(pd.DataFrame({
            "op_id": batch.column("op_id").to_numpy(zero_copy_only=False)[comm].astype(np.int64),
            "rank": region_rank[np.minimum(regions, len(region_rank) - 1)],
            "thread": batch.column("thread").fill_null(-1).to_numpy(zero_copy_only=False)[comm].astype(np.int64),
            "name": np.asarray(batch.column("name").filter(pa.array(comm)).cast(pa.string()).to_pylist(), object),
            "start_ns": batch.column("start_ns").to_numpy(zero_copy_only=False)[comm].astype(np.int64),
            "dur_ns": batch.column("dur_ns").fill_null(0).to_numpy(zero_copy_only=False)[comm].astype(np.int64)}))  # fmt: skip
    if not parts:
        return pd.DataFrame({"op_id": [], "rank": [], "thread": [], "name": [], "start_ns": [], "dur_ns": []})
    return pd.concat(parts, ignore_index=True)


def _device_starts(trace: Trace, call_of_op: dict[int, int]) -> dict[int, int]:
    """Per call (its index): the earliest start of a communication kernel launched by one of its operators."""
    if not call_of_op or trace.run_info.time_unit is not TimeUnit.NS:
        return {}
    out: dict[int, int] = {}
    for batch in trace.batches("engine_slices"):
        keep = name_mask(batch.column("name"), is_communication) & name_mask(batch.column("engine_kind"), _DEVICE_KINDS.__contains__)
        keep &= batch.column("op_id").is_valid().to_numpy(zero_copy_only=False)
        if not keep.any():
            continue
        ops = batch.column("op_id").to_numpy(zero_copy_only=False)[keep].astype(np.int64)
        starts = batch.column("start").to_numpy(zero_copy_only=False)[keep].astype(np.int64)
        for op, start in zip(ops.tolist(), starts.tolist(), strict=True):
            if (call := call_of_op.get(op)) is not None and (call not in out or start < out[call]):
                out[call] = start
    return out


def _steps_of(trace: Trace, region_rank: np.ndarray, ranks: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The ProfilerStep number each (rank, time) falls in (-1: none)."""
    regions = trace["regions"].select(["region_id", "name", "start_ns", "dur_ns"]).to_pandas()
    number = regions["name"].astype(str).str.extract(STEP_REGION, expand=False)
    regions = regions[number.notna()].assign(step=pd.to_numeric(number[number.notna()]).astype(np.int64))
    out = np.full(len(times), -1, np.int64)
    if not len(regions):
        return out
    regions = regions.assign(rank=region_rank[np.minimum(regions["region_id"].to_numpy(), len(region_rank) - 1)])
    for rank, group in regions.groupby("rank"):
        group = group.sort_values("start_ns")
        lo = group["start_ns"].to_numpy(np.int64)
        hi = lo + group["dur_ns"].to_numpy(np.int64)
        mine = np.flatnonzero(ranks == rank)
        i = np.searchsorted(lo, times[mine], side="right") - 1
        inside = (i >= 0) & (times[mine] < hi[np.maximum(i, 0)])
        out[mine[inside]] = group["step"].to_numpy()[i[inside]]
    return out


def _sequence_numbers(trace: Trace, ops: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per call (`ops`' ``call``): the process group and sequence number of its first operator (in start order) that
    the ``comms`` table has both of (None and -1 where none has)."""
    calls = pd.RangeIndex(int(ops["call"].max()) + 1 if len(ops) else 0)
    comms = trace["comms"].select(["op_id", "process_group", "seq"])
    comms = comms.filter(pc.and_(pc.is_valid(comms.column("process_group")), pc.is_valid(comms.column("seq"))))
    if not comms.num_rows:
        return pd.Series(None, index=calls, dtype=object), pd.Series(-1, index=calls, dtype=np.int64)
    found = pd.DataFrame({"op_id": comms.column("op_id").to_numpy(),
                          "process_group": comms.column("process_group").cast(pa.string()).to_pylist(),
                          "seq": comms.column("seq").to_numpy()})  # fmt: skip
    first = ops[["op_id", "call"]].merge(found, on="op_id").groupby("call").first()  # ops are in start order per call
    return (first["process_group"].reindex(calls).astype(object).where(lambda v: v.notna(), None),
            first["seq"].reindex(calls).fillna(-1).astype(np.int64))


def collective_calls(trace: Trace) -> pd.DataFrame:
    """Every rank's collective calls and point-to-point transfers (CALL_COLUMNS plus ``p2p``), by rank then start:
    outermost communication operators per host thread, named after their first nested operator that is not
    ``record_param_comms``; ``device_start_ns`` the earliest communication kernel they launched (-1: none);
    ``process_group`` and ``seq`` those of the first of their operators the ``comms`` table has (None, -1: none)."""
    region_rank = region_rank_array(trace)
    ops = communication_ops(trace, region_rank)
    if not len(ops):
        return pd.DataFrame(columns=[*CALL_COLUMNS, "p2p"])
    ops = ops.sort_values(["rank", "thread", "start_ns", "dur_ns"], ascending=[True, True, True, False], kind="stable")
    key = ops["rank"].to_numpy() * (1 << 32) + ops["thread"].to_numpy()
    start, end = ops["start_ns"].to_numpy(), (ops["start_ns"] + ops["dur_ns"]).to_numpy()
    new_key = np.r_[True, key[1:] != key[:-1]]
    reach = pd.Series(end).groupby(key).cummax().to_numpy()  # the latest end so far on the thread
    before = np.r_[np.iinfo(np.int64).min, reach[:-1]]
    outermost = new_key | (start >= before)
    call = np.cumsum(outermost) - 1  # each operator's call: the outermost one it nests in
    ops = ops.assign(call=call)
    named = ops[ops["name"] != _PARAM_COMMS].groupby("call")["name"].first()
    calls = ops[outermost].set_index("call")[["rank", "thread", "name", "start_ns", "dur_ns"]]
    calls["name"] = named.reindex(calls.index).fillna(calls["name"])
    device = _device_starts(trace, dict(zip(ops["op_id"].tolist(), call.tolist(), strict=True)))
    calls["device_start_ns"] = pd.Series(device, dtype=np.int64).reindex(calls.index).fillna(-1).astype(np.int64)
    calls["step"] = _steps_of(trace, region_rank, calls["rank"].to_numpy(), calls["start_ns"].to_numpy())
    calls["p2p"] = calls["name"].map(is_point_to_point).astype(bool)
    calls["process_group"], calls["seq"] = _sequence_numbers(trace, ops)
    return calls.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)[[*CALL_COLUMNS, "p2p"]]


class Collectives:
    """The run's collectives matched across ranks (`rule`): `table` (COLLECTIVE_COLUMNS, one row per collective at
    least two ranks ran), `arrivals` (ARRIVAL_COLUMNS, one row per rank of each), `per_rank` (RANK_COLUMNS) and
    `problems` (a collective the ranks called a different number of times; by sequence number, one some rank of its
    process group did not call)."""

    def __init__(self, table: pd.DataFrame, arrivals: pd.DataFrame, per_rank: pd.DataFrame, problems: list[str],
                 rule: MatchRule = MatchRule.ORDER) -> None:  # fmt: skip
        self.table, self.arrivals, self.per_rank, self.problems, self.rule = table, arrivals, per_rank, problems, rule


def _order_problems(coll: pd.DataFrame, all_ranks: list[int]) -> list[str]:
    """Names the ranks called a different number of times (matched by name and order)."""
    problems = []
    for name, group in coll.groupby("name", sort=True):
        counts = group.groupby("rank").size().reindex(all_ranks, fill_value=0)
        if counts.nunique() > 1:
            said = [f"{n} call{'' if n == 1 else 's'} on rank {r}" if i == 0 else f"{n} on rank {r}"
                    for i, (r, n) in enumerate(counts.items())]
            problems.append(f"{name}: {', '.join(said)}: matched in order among the ranks that made them")
    return problems


def _sequence_problems(coll: pd.DataFrame) -> list[str]:
    """Per process group: the sequence numbers not every rank that called the group's collectives called."""
    problems = []
    for group_name, group in coll.groupby("process_group", sort=True):
        ranks = group["rank"].nunique()
        held = group.groupby(["seq", "repeat"])["rank"].nunique()
        short = sorted({int(seq) for (seq, _), n in held.items() if n < ranks})
        if short:
            listed = ", ".join(map(str, short[:10])) + (", ..." if len(short) > 10 else "")
            problems.append(f"process group {group_name}: {len(short)} sequence number{'' if len(short) == 1 else 's'} not "
                            f"called on all of its {ranks} ranks ({listed}): matched among the ranks that called them")
    return problems


def match_collectives(calls: pd.DataFrame) -> Collectives:
    """Match `collective_calls` across ranks by process group and sequence number where every collective call has
    them, else by name and order (see the module's docstring)."""
    p2p = calls[calls["p2p"].astype(bool)].groupby("rank").size() if len(calls) else pd.Series(dtype=np.int64)
    coll = calls[~calls["p2p"].astype(bool)].copy() if len(calls) else calls.copy()
    coll["occurrence"] = coll.groupby(["rank", "name"]).cumcount() + 1 if len(coll) else []
    all_ranks = sorted(set(calls["rank"].tolist())) if len(calls) else []
    by_sequence = bool(len(coll)) and "seq" in coll and bool(coll["process_group"].notna().all() and (coll["seq"] >= 0).all())
    rule = MatchRule.SEQUENCE if by_sequence else MatchRule.ORDER
    if by_sequence:  # a (group, number) a rank called twice: its k-th call matches the others' k-th
        coll["repeat"] = coll.groupby(["rank", "process_group", "seq"]).cumcount()
        keys, problems = ["process_group", "seq", "repeat"], _sequence_problems(coll)
    else:
        keys, problems = ["name", "occurrence"], _order_problems(coll, all_ranks)
    rows, arrivals = [], []
    for number, (_, group) in enumerate(g for g in coll.groupby(keys, sort=False) if len(g[1]) > 1):
        group = group.sort_values("rank")
        name, occurrence = group["name"].iloc[0], group["occurrence"].iloc[0]  # the lowest rank's
        on_device = bool((group["device_start_ns"] >= 0).all())
        arrive = (group["device_start_ns"] if on_device else group["start_ns"]).to_numpy(np.int64)
        first, last = int(arrive.min()), int(arrive.max())
        ranks = group["rank"].to_numpy()
        clock = ArrivalClock.DEVICE if on_device else ArrivalClock.HOST
        rows.append({"collective": number, "name": name, "occurrence": int(occurrence), "step": int(group["step"].iloc[0]),
                     "ranks": len(group), "first_rank": int(ranks[int(np.argmin(arrive))]),
                     "last_rank": int(ranks[len(arrive) - 1 - int(np.argmax(arrive[::-1]))]), "first_arrival_ns": first,
                     "skew_ns": last - first, "wait_ns": int((last - arrive).sum()), "clock": clock.value,
                     "process_group": group["process_group"].iloc[0] if by_sequence else None,
                     "seq": int(group["seq"].iloc[0]) if by_sequence else None})  # fmt: skip
        arrivals.append(pd.DataFrame({"collective": number, "name": name, "occurrence": int(occurrence), "rank": ranks,
                                      "step": group["step"].to_numpy(), "arrival_ns": arrive,
                                      "dur_ns": group["dur_ns"].to_numpy(), "skew_ns": arrive - first,
                                      "wait_ns": last - arrive, "clock": clock.value}))  # fmt: skip
    table = pd.DataFrame(rows, columns=COLLECTIVE_COLUMNS)
    arrived = pd.concat(arrivals, ignore_index=True)[ARRIVAL_COLUMNS] if arrivals else pd.DataFrame(columns=ARRIVAL_COLUMNS)
    per_rank = pd.DataFrame({"rank": all_ranks})
    mine = arrived.groupby("rank")
    per_rank["collectives"] = per_rank["rank"].map(mine.size()).fillna(0).astype(np.int64)
    per_rank["arrived_last"] = per_rank["rank"].map(table.groupby("last_rank").size()).fillna(0).astype(np.int64)
    per_rank["arrived_first"] = per_rank["rank"].map(table.groupby("first_rank").size()).fillna(0).astype(np.int64)
    per_rank["wait_ns"] = per_rank["rank"].map(mine["wait_ns"].sum()).fillna(0).astype(np.int64)
    per_rank["mean_skew_ns"] = per_rank["rank"].map(mine["skew_ns"].mean()).astype(np.float64)
    per_rank["point_to_point"] = per_rank["rank"].map(p2p).fillna(0).astype(np.int64)
    return Collectives(table, arrived, per_rank[RANK_COLUMNS], problems, rule)

"""Checked access to an explain dump's fields, its notes, and its transfer rows (see rbln_dump)."""

from __future__ import annotations

from typing import Any

from ..builder import TraceBuilder
from ..schema import Direction, SignalKind

SITES: dict[str, SignalKind] = {
    "copy_d2d_host_bounce": SignalKind.BOUNCE_DTYPE,  # a device->device copy the device cannot do (a dtype change)
    "strided_v2v_cpu_fallback": SignalKind.BOUNCE_STRIDED,
    "op_arg_through_host": SignalKind.BOUNCE_OTHER,
    "copy_h2d_staging": SignalKind.BOUNCE_OTHER,
    "copy_h2d_noncontig_dst": SignalKind.BOUNCE_OTHER,
}
EXCLUDED_SITE_SUFFIX = "_batch_to_per_entry"  # v2v_/host_batch_to_per_entry: not part of the dump's totals
PRIMITIVES = {"v2h": Direction.D2H, "h2v": Direction.H2D, "v2v": Direction.D2D}
_RESIDENCY = {Direction.D2H: "real_host_sync_d2h", Direction.H2D: "real_host_sync_h2d"}
_MAX_ROWS_PER_DIRECTION = 1_000_000


class DumpProblems:
    """Problems found while reading dumps: fatal ones (raised together) and warnings (kept in run_info.extra)."""

    def __init__(self) -> None:
        self.fatal: list[str] = []
        self.warnings: list[str] = []
        self.where = ""  # prefix naming the dump when a file holds several

    def fail(self, message: str) -> None:
        self.fatal.append(self.where + message)

    def warn(self, message: str) -> None:
        self.warnings.append(self.where + message)

    def integer(self, d: dict | None, key: str, *, where: str = "") -> int | None:
        """d[key] as a non-negative int; None when absent; a fatal problem when of another type."""
        value = (d or {}).get(key)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            self.fail(f"{where}{key} is {value!r}, expected a non-negative integer")
            return None
        return value

    def mapping(self, d: dict | None, key: str, *, where: str = "") -> dict | None:
        value = (d or {}).get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail(f"{where}{key} is a {type(value).__name__}, expected an object")
            return None
        return value

    def counts(self, d: dict, key: str) -> dict[str, int]:
        """{name: count} of d[key]; bad entries are fatal problems."""
        table = self.mapping(d, key) or {}
        out = {}
        for name in table:
            if name == "_comment":
                continue
            got = self.integer(table, name, where=f"{key}.")
            if got is not None:
                out[name] = got
        return out


def notes_for(raw: Any, p: DumpProblems) -> dict[SignalKind, str]:
    """SignalKind -> fix from ``notes``/``remedies`` ``[{signal, fix}]`` (the first note of a kind wins)."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        p.fail(f"notes/remedies is a {type(raw).__name__}, expected a list of {{signal, fix}}")
        return {}
    out: dict[SignalKind, str] = {}
    for i, note in enumerate(raw):
        if not isinstance(note, dict) or not isinstance(note.get("fix"), str):
            p.warn(f"note {i} is not an object with a 'fix' string: ignored")
            continue
        kinds = kinds_of(str(note.get("signal", "")))
        if not kinds:
            p.warn(f"note {i} is about {note.get('signal')!r}, which matches no signal kind: ignored")
        for kind in kinds:
            out.setdefault(kind, note["fix"])
    return out


def kinds_of(signal: str) -> list[SignalKind]:
    """The signal kinds a note's ``signal`` names (a dump key, a site, a primitive or a kind)."""
    low = signal.lower()
    if signal in SITES:
        return [SITES[signal]]
    if "fallback" in low and "strided" not in low:
        return [SignalKind.CPU_FALLBACK]
    if "bounce" in low or "through_host" in low or "staging" in low:
        return [k for k in SignalKind if k.is_bounce]
    if "recompile" in low:
        return [SignalKind.RECOMPILE]
    found = [d.signal for p, d in PRIMITIVES.items() if p in low or d.value in low]
    if found:
        return found
    if "residency" in low or "transfer" in low or "sync" in low:
        return [SignalKind.TRANSFER_D2H, SignalKind.TRANSFER_H2D]
    return []


def transfer_rows(b: TraceBuilder, rid: int, runtime: dict | None, residency: dict | None, p: DumpProblems,
                  notes: dict[SignalKind, str], runtime_key: str) -> bool:
    """Transfer rows (one per call, bytes split evenly) and one signal row per direction; False when bytes are unknown."""
    prims = p.mapping(runtime, "by_primitive", where=f"{runtime_key}.") if runtime else None
    if runtime is not None and prims is None:
        p.fail(f"{runtime_key} has no 'by_primitive' object")
    bytes_known = True
    for direction in Direction:
        prim = next((k for k, d in PRIMITIVES.items() if d is direction), "")
        entry = (prims or {}).get(prim)
        sync = (residency or {}).get(_RESIDENCY.get(direction, ""))
        calls = nbytes = None
        where = f"{runtime_key}.by_primitive.{prim}."
        if isinstance(entry, dict):
            calls = p.integer(entry, "calls", where=where)
            nbytes = p.integer(entry, "bytes", where=where)
            if calls is None:
                p.fail(f"{where[:-1]} has no integer 'calls'")
        elif entry is not None:
            p.fail(f"{where[:-1]} is a {type(entry).__name__}, expected {{ns, calls}}")
        if isinstance(sync, dict):  # {count, bytes}: bytes when the primitive has none, calls when there is no runtime
            if nbytes is None:
                nbytes = p.integer(sync, "bytes", where=f"runtime_residency.{_RESIDENCY[direction]}.")
            if calls is None and prims is None:
                calls = p.integer(sync, "count", where=f"runtime_residency.{_RESIDENCY[direction]}.")
        elif isinstance(sync, int) and calls is None and prims is None:
            calls = sync
        if not calls:
            continue
        if nbytes is None:
            bytes_known = False
        total = nbytes or 0
        rows = min(calls, _MAX_ROWS_PER_DIRECTION)
        if rows < calls:
            p.warn(f"{calls} {direction.value} calls: written as {rows} transfer rows (the signal row keeps the count)")
        share, rest = divmod(total, rows)
        b.transfers.extend({
            "region_id": [rid] * rows, "direction": [direction] * rows, "bytes": [share + (i < rest) for i in range(rows)],
            "src_device": ["cpu" if direction is Direction.H2D else "rbln"] * rows,
            "dst_device": ["cpu" if direction is Direction.D2H else "rbln"] * rows, "cause": [prim] * rows,
        })  # fmt: skip
        b.signals.append(region_id=rid, kind=direction.signal, reason=prim, count=calls, bytes=total,
                         note=notes.get(direction.signal))  # fmt: skip
    return bytes_known

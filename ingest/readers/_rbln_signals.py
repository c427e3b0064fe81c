"""Checked access to an explain dump's fields, the entries its notes name, and its transfers (see rbln_dump)."""

from __future__ import annotations

from typing import Any

from ..assemble_findings import MAX_COUNTED_ROWS
from ..rules_fallbacks import HOST_BOUNCE_SITES
from ..schema import Direction

PRIMITIVES = {"v2h": Direction.D2H, "h2v": Direction.H2D, "v2v": Direction.D2D}
COPY_KINDS = {Direction.H2D: 1, Direction.D2H: 2, Direction.D2D: 3}  # a direction as a copy's kind argument says it
_RESIDENCY = {Direction.D2H: "real_host_sync_d2h", Direction.H2D: "real_host_sync_h2d"}
MAX_INT = 2**53  # counts, bytes and ns a dump gives stay below this (a file past it is not a dump)
Entry = tuple[str, str | None]  # what a note is about: (cpu_fallback | recompile | bounce | transfer, site or direction)


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
        """d[key] as a non-negative int below 2**53 (sums of them stay exact in 64 bits); None when absent; a fatal
        problem when of another type or larger."""
        value = (d or {}).get(key)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_INT:
            shown = f"{value!r}" if not isinstance(value, int) or value < MAX_INT else "a number past 2**53"
            self.fail(f"{where}{key} is {shown}, expected a non-negative integer below 2**53")
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


class Notes:
    """The remedies of a dump's ``notes``/``remedies`` ``[{signal, fix}]``, by the entries each note names (the
    first note naming an entry wins)."""

    def __init__(self, notes: list[tuple[list[Entry], str]] | None = None) -> None:
        self.notes = notes or []

    @classmethod
    def of(cls, raw: Any, sites: set[str], p: DumpProblems) -> Notes:
        if raw is None:
            return cls()
        if not isinstance(raw, list):
            p.fail(f"notes/remedies is a {type(raw).__name__}, expected a list of {{signal, fix}}")
            return cls()
        out = []
        for i, note in enumerate(raw):
            if not isinstance(note, dict) or not isinstance(note.get("fix"), str):
                p.warn(f"note {i} is not an object with a 'fix' string: ignored")
                continue
            about = entries_named(str(note.get("signal", "")), sites)
            if not about:
                p.warn(f"note {i} is about {note.get('signal')!r}, which matches no signal kind: ignored")
            out.append((about, note["fix"]))
        return cls(out)

    def fix(self, key: str, name: str | None) -> str | None:
        """The remedy of an entry (`Entry`: its key, and its site or direction; None: the key's every entry)."""
        return next((fix for about, fix in self.notes if (key, None) in about or (key, name) in about), None)


def entries_named(signal: str, sites: set[str]) -> list[Entry]:
    """The entries a note's ``signal`` names, in the dump's words: a site (of this dump or a known one), a dump key,
    a primitive or a direction, or words of a kind (``bounce``, ``residency``...)."""
    low = signal.lower()
    if signal in sites or signal in HOST_BOUNCE_SITES:
        return [("bounce", signal)]
    if "fallback" in low and "strided" not in low:
        return [("cpu_fallback", None)]
    if "bounce" in low or "through_host" in low or "staging" in low:
        return [("bounce", None)]
    if "recompile" in low:
        return [("recompile", None)]
    found: list[Entry] = [("transfer", d.value) for p, d in PRIMITIVES.items() if p in low or d.value in low]
    if found:
        return found
    if "residency" in low or "transfer" in low or "sync" in low:
        return [("transfer", Direction.D2H.value), ("transfer", Direction.H2D.value)]
    return []


def transfers(runtime: dict | None, residency: dict | None, p: DumpProblems,
              runtime_key: str) -> tuple[list[tuple[Direction, str, int, int | None]], bool]:  # fmt: skip
    """(direction, primitive, calls, bytes (None: not given)) of each direction the dump's runtime moved data in,
    and False where some direction's bytes are unknown."""
    found: list[tuple[Direction, str, int, int | None]] = []
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
        if calls > MAX_COUNTED_ROWS:
            p.warn(f"{calls} {direction.value} calls: written as {MAX_COUNTED_ROWS} transfer rows (the signal row keeps "
                   "the count)")  # fmt: skip
        found.append((direction, prim, calls, nbytes))
    return found, bytes_known

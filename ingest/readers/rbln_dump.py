"""RBLN ``torch.rbln.explain`` region ``dump()`` JSON -> events -> Trace: one region per dump, counts and no timeline.

A file holds one dump (an object), a list of dumps, or an object of named dumps
(``{"cold": {...}, "warm": {...}}``). Each dump becomes one region named by its
``name``/``region`` key, its key in the object, or ``dump <i>``.

Key variants (recorded per region in ``run_info.extra["explain_variants"]``):

* ``residency`` (older releases): ``runtime_residency``, ``rebel_runtime``, ``remedies``;
* ``runtime`` (newer releases): ``runtime``, ``notes``.

Events (`events.EventColumns`), every one untimed (`Logged.timed` false) at its dump's start, each with the count
the dump keeps (column ``count``); `assemble` and its rules do the rest:

* each dump: an ANNOTATION, its region (`events.RegionFacts`: eager, cold/warm by its name, ``device_memory.
  peak_bytes`` as its peak, its source and variant as tags), spanning ``wall_ns`` (none: written 0); a file of
  dumps has no region around them (`Translated.root_name` None).
* ``hidden_host_bounce.by_site`` -> a PLACEMENT on the host per site (``Logged.record`` ``hidden_host_bounce``,
  its count and bytes); the ``host-bounce`` rule names the kind by site and leaves out the ``*_batch_to_per_entry``
  sites (not part of the dump's totals: kept in ``run_info.extra["excluded_sites"]``, so the report's totals equal
  the dump's).
* ``cpu_fallback_by_op`` -> a PLACEMENT on the host per operator (``Logged.record`` ``cpu_fallback_by_op``). The
  dump does not tie ``cpu_fallback_reasons`` to operators: the reasons are tied to them only when that is
  unambiguous (one operator, or one reason); otherwise they are placements without an operator only when there
  are no operator counts, and are kept in ``run_info.extra["cpu_fallback_reasons"]``. When ``dispatch.
  cpu_fallback`` exceeds the per-operator sum, one placement without operator holds the rest.
* ``recompile_by_op`` -> a COMPILE per operator (``Logged.record`` ``recompile_by_op``; the rest of ``dispatch.
  recompile_miss`` likewise); ``trace_by_op`` -> the call site and stack of every event of that operator.
* ``runtime``/``rebel_runtime`` ``by_primitive`` (v2h = d2h, h2v = h2d, v2v = d2d) -> a COPY per direction named
  by its primitive, its calls as its count (a transfer row per call, bytes split evenly; one transfer signal);
  bytes from the primitive, else from ``runtime_residency.real_host_sync_*``.
* ``notes``/``remedies`` ``[{signal, fix}]`` -> the ``Logged.fix`` of the entries a note names (the signals' note).

Unknown keys are kept in ``run_info.extra["unknown_keys"]`` and listed as problems
(warnings), never fatal. ``_comment`` keys are ignored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..assemble import assemble
from ..callsites import relative_frames, site_of_frames
from ..errors import TraceFormatError
from ..events import EventColumns, EventKind, Logged, RegionFacts, Translated
from ..rules_compile import COUNTED_RECOMPILE_RECORD
from ..rules_fallbacks import BOUNCE_RECORD, COUNTED_FALLBACK_RECORD, HOST_BOUNCE_SITES, bounce_kind
from ..schema import Mode, Phase, Source
from ..trace import RunInfo, Trace
from ._rbln_signals import COPY_KINDS, DumpProblems, Notes, transfers
from .source import DEFAULT_CAPS, SizeCaps, read_json

FORMAT = "rbln-explain"

OLD_KEYS = {"runtime_residency", "rebel_runtime", "remedies"}
NEW_KEYS = {"runtime", "notes"}
KNOWN_KEYS = {
    "wall_ns", "device_memory", "hidden_host_bounce", "dispatch", "cpu_fallback_by_op", "cpu_fallback_reasons",
    "recompile_by_op", "trace_by_op", "name", "region", "_comment", *OLD_KEYS, *NEW_KEYS,
}  # fmt: skip
# Keys whose presence says "this is an explain dump" (sniffing and validation).
MARKER_KEYS = ("hidden_host_bounce", "cpu_fallback_by_op", "runtime_residency", "rebel_runtime", "recompile_by_op")
_FRAME = re.compile(r"^\s*(?P<file>.+?):(?P<line>\d+)\s*\((?P<func>[^()]*)\)\s*$")


def sniff(text: str) -> bool:
    """True when the start of a JSON document looks like an explain dump."""
    stripped = text.lstrip()
    return stripped[:1] in ("{", "[") and '"traceEvents"' not in text and any(f'"{k}"' in text for k in MARKER_KEYS)


def read_rbln_dump(path: str | Path, *, caps: SizeCaps = DEFAULT_CAPS) -> Trace:
    """Convert an explain dump (one, a list, or an object of named dumps) into a Trace."""
    path = Path(path)
    doc = read_json(path, caps)
    dumps = _dumps(path, doc)
    problems = DumpProblems()
    out = EventColumns()
    extra: dict[str, Any] = {"explain_variants": {}, "unknown_keys": {}, "excluded_sites": {},
                             "cpu_fallback_reasons": {}, "dispatch": {}, "runtime": {}, "residency": {}}  # fmt: skip
    missing: set[str] = {"timeline (a dump holds counts, not timestamps)", "operator records (a dump counts by operator)"}
    start = 0
    for name, dump in dumps:
        problems.where = f"dump {name!r}: " if len(dumps) > 1 else ""
        start += _region(_Dump(out, start, problems), name, dump, extra, missing)
        if start >= 2**62:
            problems.fail("the dumps' wall times add up past 2**62 ns")
            break
    if problems.fatal:
        raise TraceFormatError(path, problems.fatal)
    info = RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=FORMAT, devices=["cpu", "rbln"],
                   missing_signals=sorted(missing),
                   extra={k: v for k, v in extra.items() if v} | ({"problems": problems.warnings} if problems.warnings else {}))
    return assemble(Translated(out, info, root_name=None, root_device="rbln"))


class _Dump:
    """Where one dump's events go: the events, the dump's start (every event of it sits there, untimed), its
    problems, and the remedies its notes name (`Notes`)."""

    def __init__(self, out: EventColumns, start: int, problems: DumpProblems) -> None:
        self.out, self.start, self.p = out, start, problems
        self.notes = Notes()

    def add(self, kind: EventKind, name: str | None, count: int, record: str | None, fix: str | None, *,
            reason: str | None = None, site: tuple[str | None, tuple] = (None, ()), **fields: Any) -> None:  # fmt: skip
        logged = Logged(record=record, reason=reason, call_site=site[0], stack=site[1], fix=fix, timed=False)
        self.out.add(kind, name, "rbln", "dump", self.start, count=count, logged=self.out.log(logged), **fields)


def _dumps(path: Path, doc: Any) -> list[tuple[str, dict]]:
    if isinstance(doc, dict) and not any(k in doc for k in KNOWN_KEYS - {"_comment", "name", "region"}):
        named = {k: v for k, v in doc.items() if k != "_comment"}
        if named and all(isinstance(v, dict) for v in named.values()):
            doc = [dict(v, name=v.get("name", k)) for k, v in named.items()]
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list):
        raise TraceFormatError(path, f"an explain dump is a JSON object or a list of them, not {type(doc).__name__}")
    problems, out = [], []
    for i, dump in enumerate(doc):
        if not isinstance(dump, dict):
            problems.append(f"item {i} is a {type(dump).__name__}, expected a dump object")
            continue
        if not any(k in dump for k in (*MARKER_KEYS, "dispatch", "runtime", "wall_ns")):
            keys = ", ".join(sorted(dump)[:8]) or "none"
            problems.append(f"item {i} has none of the explain dump keys ({', '.join(MARKER_KEYS)}, dispatch, runtime, "
                            f"wall_ns); its keys: {keys}")  # fmt: skip
            continue
        name = dump.get("name", dump.get("region"))
        default = path.stem if len(doc) == 1 else f"dump {i}"
        out.append((str(name) if name is not None else default, dump))
    if not doc:
        problems.append("an empty list: no dumps to convert")
    if problems:
        raise TraceFormatError(path, problems)
    return out


def _variant(dump: dict) -> str:
    old, new = OLD_KEYS & dump.keys(), NEW_KEYS & dump.keys()
    if old and new:
        return "mixed"
    return "residency" if old else "runtime" if new else "counters-only"


def _region(d: _Dump, name: str, dump: dict, extra: dict, missing: set[str]) -> int:
    """The events of one dump; the time it takes on the run's line (its wall time; none: 1 ns, written 0)."""
    p = d.p
    wall = p.integer(dump, "wall_ns")
    memory = p.mapping(dump, "device_memory")
    peak = p.integer(memory, "peak_bytes", where="device_memory.") if memory else None
    if wall is None:
        missing.add("region wall time (no wall_ns)")
    low = name.lower()
    phase = Phase.COLD if "cold" in low else Phase.WARM if "warm" in low else Phase.NONE
    devices = memory.get("devices") if memory else None
    facts = RegionFacts(mode=Mode.EAGER, phase=phase, peak_memory_bytes=peak, timed=bool(wall),
                        tags=json.dumps({"source": FORMAT, "variant": _variant(dump)}))  # fmt: skip
    span = wall or 1  # the events of a dump without a wall time still lie inside its region
    d.out.add(EventKind.ANNOTATION, name, "rbln", "dump", d.start, span, region_facts=d.out.region_facts(facts))
    extra["explain_variants"][name] = _variant(dump)
    unknown = sorted(set(dump) - KNOWN_KEYS)
    if unknown:
        extra["unknown_keys"][name] = {k: dump[k] for k in unknown}
        p.warn(f"unknown keys kept in run_info.extra['unknown_keys']: {', '.join(unknown)}")
    if isinstance(devices, (list, dict)):
        extra.setdefault("device_memory_devices", {})[name] = devices
    sites = _call_sites(p.mapping(dump, "trace_by_op"), p)
    if not sites:
        missing.add("call sites (dumped without stacks: no trace_by_op)")
    dispatch = p.mapping(dump, "dispatch")
    if dispatch:
        extra["dispatch"][name] = dispatch
    bounce = p.mapping(dump, "hidden_host_bounce")
    by_site = _by_site(bounce, p)
    d.notes = Notes.of(dump.get("notes", dump.get("remedies")), set(by_site), p)
    _bounces(d, bounce, by_site, extra, name)
    _by_op(d, EventKind.PLACEMENT, COUNTED_FALLBACK_RECORD, p.counts(dump, "cpu_fallback_by_op"),
           p.integer(dispatch, "cpu_fallback", where="dispatch.") if dispatch else None,
           p.counts(dump, "cpu_fallback_reasons"), sites, extra["cpu_fallback_reasons"], name)  # fmt: skip
    _by_op(d, EventKind.COMPILE, COUNTED_RECOMPILE_RECORD, p.counts(dump, "recompile_by_op"),
           p.integer(dispatch, "recompile_miss", where="dispatch.") if dispatch else None, {}, sites, {}, name)  # fmt: skip
    runtime_key = "runtime" if "runtime" in dump else "rebel_runtime"
    runtime = p.mapping(dump, runtime_key)
    residency = p.mapping(dump, "runtime_residency")
    if runtime:
        extra["runtime"][name] = runtime
    if residency:
        extra["residency"][name] = residency
    found, bytes_known = transfers(runtime, residency, p, runtime_key)
    for direction, prim, calls, nbytes in found:
        d.add(EventKind.COPY, prim, calls, None, d.notes.fix("transfer", direction.value), copy_kind=COPY_KINDS[direction],
              bytes=nbytes)  # fmt: skip
    if not bytes_known and (runtime or residency):
        missing.add("transfer bytes (the runtime counts calls, not bytes)")
    if not (runtime or residency):
        missing.add("transfers (no runtime / rebel_runtime section)")
    return span


def _by_site(bounce: dict | None, p: DumpProblems) -> dict[str, tuple[int, int | None]]:
    """site -> (count, bytes) of ``hidden_host_bounce.by_site``; bad entries are fatal problems."""
    if bounce is None:
        return {}
    by_site = p.mapping(bounce, "by_site", where="hidden_host_bounce.")
    if by_site is None:
        p.fail("hidden_host_bounce has no 'by_site' object")
        return {}
    out = {}
    for site, entry in by_site.items():
        if site == "_comment":
            continue
        n = p.integer(entry, "count", where=f"hidden_host_bounce.by_site.{site}.") if isinstance(entry, dict) else None
        nbytes = p.integer(entry, "bytes", where=f"hidden_host_bounce.by_site.{site}.") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or n is None:
            p.fail(f"hidden_host_bounce.by_site.{site} must be an object with an integer 'count'")
            continue
        out[site] = (n, nbytes)
    return out


def _bounces(d: _Dump, bounce: dict | None, by_site: dict[str, tuple[int, int | None]], extra: dict, name: str) -> None:
    """A placement on the host per site; the sites the rules leave out kept in the run's extras, and the dump's
    declared totals checked against the sites it counts."""
    p = d.p
    count = size = 0
    for site, (n, nbytes) in by_site.items():
        kind = bounce_kind(site)
        if kind is None:
            extra["excluded_sites"].setdefault(name, {})[site] = {"count": n, "bytes": nbytes or 0}
        else:
            if site not in HOST_BOUNCE_SITES:
                p.warn(f"host-bounce site {site!r} is not known: counted as {kind.value}")
            count += n
            size += nbytes or 0
        if n or nbytes:
            d.add(EventKind.PLACEMENT, site, n, BOUNCE_RECORD, d.notes.fix("bounce", site), device=-1, bytes=nbytes or 0)
    for key, got in (("total_count", count), ("total_bytes", size)):
        declared = (bounce or {}).get(key)
        if isinstance(declared, int) and declared != got:
            p.warn(f"hidden_host_bounce.{key} is {declared} but its counted sites add up to {got}")


def _by_op(d: _Dump, kind: EventKind, record: str, by_op: dict[str, int], total: int | None, reasons: dict[str, int],
           sites: dict[str, tuple[str | None, tuple]], kept: dict, name: str) -> None:
    """An event per operator count (a placement on the host: fallbacks; a compile: recompiles), the reasons tied to
    them where the dump leaves no doubt, and one without operator for a total the operators do not reach."""
    ops = {op: n for op, n in by_op.items() if n}
    reasons = {r: n for r, n in reasons.items() if n}
    emitted = 0
    fix = d.notes.fix("cpu_fallback" if record == COUNTED_FALLBACK_RECORD else "recompile", None)
    where = {"device": -1} if kind is EventKind.PLACEMENT else {}

    def row(op: str | None, reason: str | None, n: int) -> None:
        nonlocal emitted
        d.add(kind, op, n, record, fix, reason=reason, site=sites.get(op, (None, ())) if op else (None, ()), **where)
        emitted += n

    if len(ops) == 1 and reasons and sum(reasons.values()) <= next(iter(ops.values())):
        (op, n), = ops.items()  # one operator: every reason is its own
        for reason, k in reasons.items():
            row(op, reason, k)
        if n > sum(reasons.values()):
            row(op, None, n - sum(reasons.values()))
    elif len(reasons) == 1 and ops and sum(ops.values()) == next(iter(reasons.values())):
        (reason, _), = reasons.items()  # one reason: every operator's
        for op, n in ops.items():
            row(op, reason, n)
    else:
        for op, n in ops.items():
            row(op, None, n)
        if reasons:
            kept[name] = reasons  # not tied to operators by the dump
            if not ops:  # no per-operator counts: the reasons themselves are the rows
                for reason, n in reasons.items():
                    row(None, reason, n)
    if total is not None and total > emitted:
        row(None, "not attributed to an operator", total - emitted)


def _call_sites(trace_by_op: dict | None, p: DumpProblems) -> dict[str, tuple[str | None, tuple]]:
    """op -> (call site, stack: frames innermost first) from ``"file:line(func) <- file:line(func) ..."``."""
    out: dict[str, tuple[str | None, tuple]] = {}
    for op, text in (trace_by_op or {}).items():
        if op == "_comment":
            continue
        if not isinstance(text, str):
            p.warn(f"trace_by_op.{op} is not a string: ignored")
            continue
        frames = []
        for part in text.split("<-"):
            m = _FRAME.match(part)
            if m:
                frames.append((m.group("file").strip(), int(m.group("line")), m.group("func").strip()))
        if not frames:
            p.warn(f"trace_by_op.{op} has no 'file:line(func)' frame: ignored")
            continue
        out[op] = (site_of_frames(frames), tuple(relative_frames(frames)))
    return out


__all__ = ["FORMAT", "read_rbln_dump", "sniff"]

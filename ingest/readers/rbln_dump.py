"""RBLN ``torch.rbln.explain`` region ``dump()`` JSON -> Trace: one region per dump, counts and no timeline.

A file holds one dump (an object), a list of dumps, or an object of named dumps
(``{"cold": {...}, "warm": {...}}``). Each dump becomes one region named by its
``name``/``region`` key, its key in the object, or ``dump <i>``.

Key variants (recorded per region in ``run_info.extra["explain_variants"]``):

* ``residency`` (older releases): ``runtime_residency``, ``rebel_runtime``, ``remedies``;
* ``runtime`` (newer releases): ``runtime``, ``notes``.

Mapping:

* ``hidden_host_bounce.by_site`` -> host_bounce signals, one row per site; the
  site name is the row's ``reason``. The ``*_batch_to_per_entry`` sites are not
  part of the dump's totals: they are kept in ``run_info.extra["excluded_sites"]``
  (per region) and not as signal rows, so the report's totals equal the dump's.
* ``cpu_fallback_by_op`` -> one cpu_fallback row per operator (no reason). The dump
  does not tie ``cpu_fallback_reasons`` to operators: the reasons are tied to the
  rows only when that is unambiguous (one operator, or one reason); otherwise they
  become rows without an operator only when there are no operator rows, and are
  kept in ``run_info.extra["cpu_fallback_reasons"]``. When ``dispatch.cpu_fallback``
  exceeds the per-operator sum, one row without operator holds the rest.
* ``recompile_by_op`` -> dispatch/recompile rows (the rest of ``dispatch.recompile_miss``
  likewise); ``trace_by_op`` -> call sites and interned stacks of every row of that operator.
* ``runtime``/``rebel_runtime`` ``by_primitive`` (v2h = d2h, h2v = h2d, v2v = d2d) ->
  one transfer row per call (bytes split evenly) and one transfer signal row per direction;
  bytes from the primitive, else from ``runtime_residency.real_host_sync_*``.
* ``notes``/``remedies`` ``[{signal, fix}]`` -> the ``note`` of the matching rows.
* ``wall_ns`` -> region duration; ``device_memory.peak_bytes`` -> ``peak_memory_bytes``.

Unknown keys are kept in ``run_info.extra["unknown_keys"]`` and listed as problems
(warnings), never fatal. ``_comment`` keys are ignored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..builder import TraceBuilder
from ..callsites import relative_frames, site_of_frames
from ..errors import TraceFormatError
from ..schema import Mode, Phase, SignalKind, Source
from ..trace import RunInfo, Trace
from ._rbln_signals import EXCLUDED_SITE_SUFFIX, SITES, DumpProblems, notes_for, transfer_rows
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
    builder = TraceBuilder(RunInfo(source=Source.CONVERTED, producer="portscope convert", converted_from=FORMAT,
                                   devices=["cpu", "rbln"]))  # fmt: skip
    extra: dict[str, Any] = {"explain_variants": {}, "unknown_keys": {}, "excluded_sites": {},
                             "cpu_fallback_reasons": {}, "dispatch": {}, "runtime": {}, "residency": {}}  # fmt: skip
    missing: set[str] = {"timeline (a dump holds counts, not timestamps)", "operator records (a dump counts by operator)"}
    start = 0
    for name, dump in dumps:
        problems.where = f"dump {name!r}: " if len(dumps) > 1 else ""
        wall = _region(builder, name, dump, start, problems, extra, missing)
        start += wall
    if problems.fatal:
        raise TraceFormatError(path, problems.fatal)
    info = builder.run_info
    info.missing_signals = sorted(missing)
    info.extra = {k: v for k, v in extra.items() if v} | ({"problems": problems.warnings} if problems.warnings else {})
    return builder.build()


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


def _region(b: TraceBuilder, name: str, dump: dict, start: int, p: DumpProblems, extra: dict, missing: set[str]) -> int:
    wall = p.integer(dump, "wall_ns")
    memory = p.mapping(dump, "device_memory")
    peak = p.integer(memory, "peak_bytes", where="device_memory.") if memory else None
    if wall is None:
        missing.add("region wall time (no wall_ns)")
    low = name.lower()
    phase = Phase.COLD if "cold" in low else Phase.WARM if "warm" in low else Phase.NONE
    devices = memory.get("devices") if memory else None
    rid = b.add_region(name, start_ns=start, dur_ns=wall or 0, mode=Mode.EAGER, phase=phase, device="rbln",
                       peak_memory_bytes=peak, tags=json.dumps({"source": FORMAT, "variant": _variant(dump)}))  # fmt: skip
    extra["explain_variants"][name] = _variant(dump)
    unknown = sorted(set(dump) - KNOWN_KEYS)
    if unknown:
        extra["unknown_keys"][name] = {k: dump[k] for k in unknown}
        p.warn(f"unknown keys kept in run_info.extra['unknown_keys']: {', '.join(unknown)}")
    if isinstance(devices, (list, dict)):
        extra.setdefault("device_memory_devices", {})[name] = devices
    sites = _call_sites(b, p.mapping(dump, "trace_by_op"), p)
    if not sites:
        missing.add("call sites (dumped without stacks: no trace_by_op)")
    notes = notes_for(dump.get("notes", dump.get("remedies")), p)
    dispatch = p.mapping(dump, "dispatch")
    if dispatch:
        extra["dispatch"][name] = dispatch
    _bounces(b, rid, p.mapping(dump, "hidden_host_bounce"), p, extra, name, notes)
    _by_op(b, rid, SignalKind.CPU_FALLBACK, p.counts(dump, "cpu_fallback_by_op"), p.integer(dispatch, "cpu_fallback", where="dispatch.") if dispatch else None,
           p.counts(dump, "cpu_fallback_reasons"), sites, notes, extra["cpu_fallback_reasons"], name)  # fmt: skip
    _by_op(b, rid, SignalKind.RECOMPILE, p.counts(dump, "recompile_by_op"), p.integer(dispatch, "recompile_miss", where="dispatch.") if dispatch else None,
           {}, sites, notes, {}, name)  # fmt: skip
    runtime_key = "runtime" if "runtime" in dump else "rebel_runtime"
    runtime = p.mapping(dump, runtime_key)
    residency = p.mapping(dump, "runtime_residency")
    if runtime:
        extra["runtime"][name] = runtime
    if residency:
        extra["residency"][name] = residency
    if not transfer_rows(b, rid, runtime, residency, p, notes, runtime_key):
        if runtime or residency:
            missing.add("transfer bytes (the runtime counts calls, not bytes)")
    if not (runtime or residency):
        missing.add("transfers (no runtime / rebel_runtime section)")
    return wall or 0


def _bounces(b: TraceBuilder, rid: int, bounce: dict | None, p: DumpProblems, extra: dict, name: str,
             notes: dict[SignalKind, str]) -> None:
    if bounce is None:
        return
    by_site = p.mapping(bounce, "by_site", where="hidden_host_bounce.")
    if by_site is None:
        p.fail("hidden_host_bounce has no 'by_site' object")
        return
    count = size = 0
    for site, entry in by_site.items():
        if site == "_comment":
            continue
        n = p.integer(entry, "count", where=f"hidden_host_bounce.by_site.{site}.") if isinstance(entry, dict) else None
        nbytes = p.integer(entry, "bytes", where=f"hidden_host_bounce.by_site.{site}.") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or n is None:
            p.fail(f"hidden_host_bounce.by_site.{site} must be an object with an integer 'count'")
            continue
        if site.endswith(EXCLUDED_SITE_SUFFIX):
            extra["excluded_sites"].setdefault(name, {})[site] = {"count": n, "bytes": nbytes or 0}
            continue
        kind = SITES.get(site, SignalKind.BOUNCE_OTHER)
        if site not in SITES:
            p.warn(f"host-bounce site {site!r} is not known: counted as {kind.value}")
        count += n
        size += nbytes or 0
        if n or nbytes:
            b.signals.append(region_id=rid, kind=kind, reason=site, count=n, bytes=nbytes or 0, note=notes.get(kind))
    for key, got in (("total_count", count), ("total_bytes", size)):
        declared = bounce.get(key)
        if isinstance(declared, int) and declared != got:
            p.warn(f"hidden_host_bounce.{key} is {declared} but its counted sites add up to {got}")


def _by_op(b: TraceBuilder, rid: int, kind: SignalKind, by_op: dict[str, int], total: int | None, reasons: dict[str, int],
           sites: dict[str, tuple[str | None, int | None]], notes: dict[SignalKind, str], kept: dict, name: str) -> None:
    ops = {op: n for op, n in by_op.items() if n}
    reasons = {r: n for r, n in reasons.items() if n}
    emitted = 0

    def row(op: str | None, reason: str | None, n: int) -> None:
        nonlocal emitted
        site, stack = sites.get(op, (None, None)) if op else (None, None)
        b.signals.append(region_id=rid, kind=kind, op_name=op, reason=reason, count=n, bytes=0, call_site=site,
                         stack_id=stack, note=notes.get(kind))  # fmt: skip
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


def _call_sites(b: TraceBuilder, trace_by_op: dict | None, p: DumpProblems) -> dict[str, tuple[str | None, int | None]]:
    """op -> (call site, stack id) from ``"file:line(func) <- file:line(func) ..."`` (innermost first)."""
    out: dict[str, tuple[str | None, int | None]] = {}
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
        out[op] = (site_of_frames(frames), b.stacks.intern(relative_frames(frames)))
    return out


__all__ = ["FORMAT", "read_rbln_dump", "sniff"]

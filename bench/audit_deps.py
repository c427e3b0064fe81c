"""Dependency audit against an OSV advisory database on disk (for machines that cannot reach one).

    .venv/bin/python bench/audit_deps.py --db PATH [--lock requirements-lock.txt] [--also torch==2.13.0] [--json out.json]

`pip-audit -r requirements-lock.txt` is the audit where PyPI's advisory data (or osv.dev) can be
reached. Where it cannot (air-gapped labs, this project's build machines), this script does the
same check against a copy of an advisory database in the OSV format:

* a clone of https://github.com/pypa/advisory-database (`vulns/<package>/*.yaml`), or
* the OSV export of the PyPI ecosystem, https://osv-vulnerabilities.storage.googleapis.com/PyPI/all.zip
  (a ZIP of `*.json`), or any directory of OSV `*.json` / `*.yaml` files.

Every pinned `name==version` of the lock file (and of `--also`) is compared with each advisory's
affected PyPI package: its explicit `versions` list and its ECOSYSTEM ranges (`introduced`,
`fixed`, `last_affected`; versions compared by PEP 440). Withdrawn advisories are skipped. The
report names each finding with its aliases and the first fixed version, and states the newest
`modified` date in the database: an audit is only as current as its database.

Exit status: 0 clean, 1 findings, 2 bad input (no database, unreadable lock file).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parents[1]
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")


class AuditInputError(Exception):
    """A lock file or advisory database that cannot be read."""


@dataclasses.dataclass(frozen=True)
class Finding:
    package: str
    version: str
    advisory: str
    aliases: tuple[str, ...]
    fixed: tuple[str, ...]
    summary: str


def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(lines: Iterable[str], origin: str = "<pins>") -> dict[str, str]:
    """`name==version` pins from requirements-style lines; other requirement forms are an error."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        match = _PIN.match(line)
        if match is None:
            raise AuditInputError(f"{origin}:{number}: not an exact pin (name==version): {raw.strip()!r}")
        pins[normalize(match.group(1))] = match.group(2).split("+", 1)[0]
    return pins


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _in_ranges(version: Version, ranges: Iterable[Mapping[str, Any]]) -> bool:
    """OSV ECOSYSTEM ranges: events in ascending order; the last one at or below `version` decides."""
    for entry in ranges:
        if entry.get("type") != "ECOSYSTEM":
            continue
        affected = False
        for event in entry.get("events", []):
            if "introduced" in event:
                start = str(event["introduced"])
                if start == "0" or ((v := _version(start)) is not None and version >= v):
                    affected = True
            elif "fixed" in event:
                if (v := _version(str(event["fixed"]))) is not None and version >= v:
                    affected = False
            elif "last_affected" in event:
                if (v := _version(str(event["last_affected"]))) is not None and version > v:
                    affected = False
        if affected:
            return True
    return False


def _fixed_versions(ranges: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(
        str(event["fixed"])
        for entry in ranges
        if entry.get("type") == "ECOSYSTEM"
        for event in entry.get("events", [])
        if "fixed" in event
    )


def _first_line(text: object) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0][:160] if lines else ""


def match_advisory(advisory: Mapping[str, Any], pins: Mapping[str, str]) -> list[Finding]:
    """The pinned packages this one OSV advisory affects."""
    if advisory.get("withdrawn"):
        return []
    findings = []
    for affected in advisory.get("affected") or []:
        package = affected.get("package") or {}
        if package.get("ecosystem") != "PyPI":
            continue
        name = normalize(str(package.get("name", "")))
        pinned = pins.get(name)
        if pinned is None:
            continue
        version = _version(pinned)
        listed = {str(v) for v in affected.get("versions") or []}
        ranges = affected.get("ranges") or []
        hit = pinned in listed or (version is not None and (
            any(_version(v) == version for v in listed) or _in_ranges(version, ranges)))
        if hit:
            findings.append(Finding(
                package=name, version=pinned, advisory=str(advisory.get("id", "?")),
                aliases=tuple(str(a) for a in advisory.get("aliases") or []),
                fixed=_fixed_versions(ranges),
                summary=_first_line(advisory.get("summary") or advisory.get("details")),
            ))
    return findings


def _parse(name: str, data: bytes) -> Mapping[str, Any] | None:
    if name.endswith(".json"):
        doc = json.loads(data)
    elif name.endswith((".yaml", ".yml")):
        import yaml  # transformers' dependency; only needed for the pypa/advisory-database layout

        doc = yaml.safe_load(data)
    else:
        return None
    return doc if isinstance(doc, dict) and "affected" in doc else None


def iter_advisories(db: Path) -> Iterator[Mapping[str, Any]]:
    """Every OSV advisory in a directory tree or a ZIP export."""
    if not db.exists():
        raise AuditInputError(f"{db}: no advisory database there (a clone of pypa/advisory-database or OSV's PyPI/all.zip)")
    try:
        if db.is_file():
            with zipfile.ZipFile(db) as archive:
                for info in archive.infolist():
                    if (doc := _parse(info.filename, archive.read(info))) is not None:
                        yield doc
            return
        for path in sorted(db.rglob("*")):
            if path.is_file() and ".git" not in path.parts and (doc := _parse(path.name, path.read_bytes())) is not None:
                yield doc
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise AuditInputError(f"{db}: cannot read the advisory database: {exc}") from exc


@dataclasses.dataclass(frozen=True)
class Audit:
    findings: list[Finding]
    advisories: int
    newest_modified: str
    packages: int


def audit(pins: Mapping[str, str], advisories: Iterable[Mapping[str, Any]]) -> Audit:
    findings: list[Finding] = []
    count = 0
    newest = ""
    for advisory in advisories:
        count += 1
        newest = max(newest, str(advisory.get("modified", "")))
        findings.extend(match_advisory(advisory, pins))
    if count == 0:
        raise AuditInputError("the advisory database holds no OSV advisories")
    findings.sort(key=lambda f: (f.package, f.advisory))
    return Audit(findings=findings, advisories=count, newest_modified=newest, packages=len(pins))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="pypa/advisory-database clone, OSV PyPI/all.zip, or a folder of OSV files")
    parser.add_argument("--lock", type=Path, default=REPO / "requirements-lock.txt")
    parser.add_argument("--also", action="append", default=[], metavar="NAME==VERSION",
                        help="extra pins not in the lock file (torch is installed separately)")
    parser.add_argument("--json", type=Path, help="write the findings here")
    args = parser.parse_args(argv)
    try:
        pins = parse_pins(args.lock.read_text().splitlines(), str(args.lock))
        pins.update(parse_pins(args.also, "--also"))
        result = audit(pins, iter_advisories(args.db))
    except (AuditInputError, OSError) as exc:
        print(f"audit_deps: {exc}", file=sys.stderr)
        return 2
    print(f"{result.packages} pinned packages against {result.advisories} advisories "
          f"(newest modified {result.newest_modified or 'unknown'}): {len(result.findings)} findings")
    for f in result.findings:
        fixed = ", ".join(f.fixed) or "no fixed release"
        print(f"  {f.package}=={f.version}  {f.advisory} ({', '.join(f.aliases)})  fixed in {fixed}  {f.summary}")
    if args.json:
        args.json.write_text(json.dumps({
            "packages": result.packages, "advisories": result.advisories,
            "newest_modified": result.newest_modified,
            "findings": [dataclasses.asdict(f) for f in result.findings]}, indent=2))
    return 1 if result.findings else 0


if __name__ == "__main__":
    sys.exit(main())

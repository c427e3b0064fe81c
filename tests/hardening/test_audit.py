"""The dependency audit: bench/audit_deps.py's OSV matching, and the locked versions' advisory floors."""

from __future__ import annotations

import json
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.version import Version

from .conftest import bench_module

REPO = Path(__file__).resolve().parents[2]
audit_deps = bench_module("audit_deps")


def advisory(ident: str, package: str, *events: dict, versions: tuple[str, ...] = (), ecosystem: str = "PyPI",
             **extra: object) -> dict:
    return {
        "id": ident, "modified": "2026-01-02T00:00:00Z", "summary": f"{ident} summary", **extra,
        "affected": [{
            "package": {"name": package, "ecosystem": ecosystem},
            "ranges": [{"type": "ECOSYSTEM", "events": list(events)}] if events else [],
            "versions": list(versions),
        }],
    }


@pytest.mark.parametrize(("pinned", "hit"), [("1.0", False), ("1.2", True), ("1.9.9", True), ("2.0", False), ("2.1", False)])
def test_introduced_fixed_range(pinned: str, hit: bool) -> None:
    adv = advisory("A-1", "demo", {"introduced": "1.2"}, {"fixed": "2.0"})
    assert bool(audit_deps.match_advisory(adv, {"demo": pinned})) is hit


@pytest.mark.parametrize(("pinned", "hit"), [("0.1", True), ("3.0.2", True), ("3.0.3", False)])
def test_last_affected_is_inclusive_and_zero_means_every_version(pinned: str, hit: bool) -> None:
    adv = advisory("A-2", "demo", {"introduced": "0"}, {"last_affected": "3.0.2"})
    assert bool(audit_deps.match_advisory(adv, {"demo": pinned})) is hit


def test_several_intervals_in_one_range() -> None:
    adv = advisory("A-3", "demo", {"introduced": "1.0"}, {"fixed": "1.5"}, {"introduced": "2.0"}, {"fixed": "2.2"})
    found = {v for v in ("0.9", "1.1", "1.6", "2.1", "2.3") if audit_deps.match_advisory(adv, {"demo": v})}
    assert found == {"1.1", "2.1"}


def test_explicit_versions_list_and_pep440_equality() -> None:
    adv = advisory("A-4", "demo", versions=("1.0", "2.0.0"))
    assert audit_deps.match_advisory(adv, {"demo": "2.0"})  # 2.0 == 2.0.0 under PEP 440
    assert not audit_deps.match_advisory(adv, {"demo": "2.0.1"})


def test_withdrawn_other_ecosystems_and_other_packages_are_ignored() -> None:
    pins = {"demo": "1.0"}
    assert not audit_deps.match_advisory(advisory("W", "demo", {"introduced": "0"}, withdrawn="2025-01-01"), pins)
    assert not audit_deps.match_advisory(advisory("N", "demo", {"introduced": "0"}, ecosystem="npm"), pins)
    assert not audit_deps.match_advisory(advisory("O", "other", {"introduced": "0"}), pins)


def test_finding_names_the_advisory_aliases_and_fix() -> None:
    adv = advisory("PYSEC-1", "Demo_Pkg", {"introduced": "0"}, {"fixed": "1.4"}, aliases=["CVE-1", "GHSA-x"])
    [finding] = audit_deps.match_advisory(adv, audit_deps.parse_pins(["demo.pkg==1.3"]))
    assert (finding.package, finding.version, finding.advisory) == ("demo-pkg", "1.3", "PYSEC-1")
    assert finding.aliases == ("CVE-1", "GHSA-x") and finding.fixed == ("1.4",)


def test_parse_pins_normalises_names_and_rejects_what_is_not_a_pin() -> None:
    pins = audit_deps.parse_pins(["# comment", "", "Flask_Caching==2.3.1", "torch==2.13.0+cpu", "-e .", "x[extra]==1 ; python_version>'3'"])
    assert pins == {"flask-caching": "2.3.1", "torch": "2.13.0", "x": "1"}
    with pytest.raises(audit_deps.AuditInputError, match=r"lock\.txt:2: not an exact pin"):
        audit_deps.parse_pins(["a==1", "b>=2"], "lock.txt")


def _write_db(tmp_path: Path) -> tuple[Path, Path]:
    """The same two advisories as a pypa/advisory-database folder (YAML) and an OSV ZIP export (JSON)."""
    yaml = pytest.importorskip("yaml")
    folder = tmp_path / "advisory-database" / "vulns" / "demo"
    folder.mkdir(parents=True)
    first = advisory("PYSEC-2", "demo", {"introduced": "0"}, {"fixed": "1.1"})
    second = advisory("PYSEC-3", "demo", {"introduced": "2.0"}, {"fixed": "2.5"})
    (folder / "PYSEC-2.yaml").write_text(yaml.safe_dump(first))
    (folder / "PYSEC-3.yaml").write_text(yaml.safe_dump(second))
    (folder.parent.parent / "README.md").write_text("not an advisory")
    export = tmp_path / "all.zip"
    with zipfile.ZipFile(export, "w") as archive:
        archive.writestr("PYSEC-2.json", json.dumps(first))
        archive.writestr("PYSEC-3.json", json.dumps(second))
    return folder.parent.parent, export


def test_cli_exit_codes_on_a_folder_and_a_zip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, export = _write_db(tmp_path)
    lock = tmp_path / "lock.txt"
    lock.write_text("demo==1.0\n")
    report = tmp_path / "out.json"
    for db in (folder, export):
        assert audit_deps.main(["--db", str(db), "--lock", str(lock), "--json", str(report)]) == 1
        data = json.loads(report.read_text())
        assert [f["advisory"] for f in data["findings"]] == ["PYSEC-2"] and data["advisories"] == 2
    assert "newest modified 2026-01-02" in capsys.readouterr().out
    assert audit_deps.main(["--db", str(folder), "--lock", str(lock), "--also", "demo==1.1"]) == 0
    assert audit_deps.main(["--db", str(folder), "--lock", str(lock), "--also", "demo==2.4"]) == 1
    assert audit_deps.main(["--db", str(tmp_path / "missing"), "--lock", str(lock)]) == 2
    assert audit_deps.main(["--db", str(folder), "--lock", str(tmp_path / "no-lock.txt")]) == 2
    assert "no-lock.txt" in capsys.readouterr().err


def test_an_empty_database_is_an_error_not_a_clean_audit(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    with pytest.raises(audit_deps.AuditInputError, match="no OSV advisories"):
        audit_deps.audit({"demo": "1.0"}, audit_deps.iter_advisories(tmp_path / "db"))


# Advisories published after the newest advisory database this project could read offline
# (pypa/advisory-database as of 2024-10-10; README "Reliability"), with the release that fixed each.
LATER_ADVISORIES = {
    "werkzeug": ("3.0.6", "CVE-2024-49766, CVE-2024-49767"),
    "jinja2": ("3.1.6", "CVE-2025-27516"),
    "flask": ("3.1.1", "CVE-2025-47278"),
    "requests": ("2.32.4", "CVE-2024-47081"),
    "urllib3": ("2.5.0", "CVE-2025-50181"),
    "h11": ("0.16.0", "CVE-2025-43859"),
    "gunicorn": ("23.0.0", "CVE-2024-6827"),
    "waitress": ("3.0.1", "CVE-2024-49768"),
    "selenium": ("4.14.0", "CVE-2023-5590 (dash[testing] caps selenium at 4.2.0)"),
    "pyarrow": ("14.0.1", "CVE-2023-47248"),
}


@pytest.mark.parametrize("package", sorted(LATER_ADVISORIES))
def test_locked_and_installed_versions_are_past_later_advisories(package: str) -> None:
    fixed, advisories = LATER_ADVISORIES[package]
    pins = audit_deps.parse_pins((REPO / "requirements-lock.txt").read_text().splitlines(), "requirements-lock.txt")
    assert Version(pins[package]) >= Version(fixed), f"lock pins {package}=={pins[package]}: {advisories}"
    assert Version(version(package)) >= Version(fixed), f"installed {package} {version(package)}: {advisories}"


def test_pyproject_floors_exclude_the_advisories_of_runtime_dependencies() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    for requirement in ('"pyarrow>=14.0.1"', '"werkzeug>=3.0.6"', '"selenium>=4.14"', '"requests>=2.32.4"'):
        assert requirement in pyproject
    assert "dash[testing]" not in pyproject  # its extra pins selenium<=4.2.0

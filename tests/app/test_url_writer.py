"""Pages write what is on screen into their URL: the query page on Run (?runs=, ?sql=), the compare page when a region
is picked (?ra=, ?rb=). The writer is a clientside callback: its JavaScript is run here under Node with a stand-in
window, and each page is checked to wire it to its controls."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from portscope.app import urls
from portscope.app.components import url_query_writer

NODE = shutil.which("node")


def write(names: tuple[str | None, ...], url: str, *values: object) -> tuple[str, list[str]]:
    """(the URL after the writer ran on `values` at `url`, the history calls it made)."""
    if NODE is None:
        pytest.skip("node is not installed")
    script = f"""
const calls = [];
const u = new URL({json.dumps("http://viewer" + url)});
globalThis.window = {{location: {{pathname: u.pathname, search: u.search, hash: u.hash}}, history: {{state: null,
    replaceState: (s, t, to) => {{ calls.push("replace"); const n = new URL(to, u); window.location.search = n.search; }},
    pushState: () => calls.push("push")}}}};
const writer = {url_query_writer(*names)};
writer(...{json.dumps(list(values))});
console.log(JSON.stringify([window.location.pathname + window.location.search + window.location.hash, calls]));
"""
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True, timeout=30)
    written, calls = json.loads(out.stdout)
    return written, calls


def test_run_writes_the_runs_ticked_and_the_query_as_the_page_reads_them() -> None:
    first = urls.query(["r1"], "SELECT count(*) FROM fallbacks")
    sql = "SELECT run, count(*) n FROM ops GROUP BY run"
    written, calls = write((None, "runs", "sql"), first, 1, ["r1", "r2"], sql)
    assert calls == ["replace"]  # the history entry replaced: Back leaves the page
    assert urlsplit(written).path == "/query"
    assert parse_qs(urlsplit(written).query) == parse_qs(urlsplit(urls.query(["r1", "r2"], sql)).query) == {
        "runs": ["r1,r2"], "sql": [sql]}


def test_a_region_picked_is_written_and_other_parameters_and_the_hash_are_kept() -> None:
    written, calls = write(("ra", "rb"), "/compare/a/b?x=1#ops", 2, 0)
    assert (written, calls) == ("/compare/a/b?x=1&ra=2&rb=0#ops", ["replace"])
    assert parse_qs(urlsplit(written).query) == {"x": ["1"], **parse_qs(urlsplit(urls.compare("a", "b", 2, 0)).query)}


def test_an_empty_value_drops_its_parameter_and_an_unchanged_url_is_left_alone() -> None:
    assert write((None, "runs", "sql"), "/query?runs=r1&sql=x", 3, [], "x") == ("/query?sql=x", ["replace"])
    assert write(("ra", "rb"), "/compare/a/b?ra=1&rb=0", 1, 0) == ("/compare/a/b?ra=1&rb=0", [])


@pytest.mark.parametrize(("inputs", "state", "names"), [
    ([("query-run", "n_clicks")], [("query-runs", "value"), ("query-sql", "value")], (None, "runs", "sql")),
    ([("compare-region-a", "value"), ("compare-region-b", "value")], [], ("ra", "rb")),
])  # fmt: skip
def test_each_page_wires_the_writer_to_its_controls(make_app, tmp_path: Path, inputs, state, names) -> None:
    app = make_app(trace_paths=())
    wired = [c for c in app._callback_list if c.get("no_output") and [(i["id"], i["property"]) for i in c["inputs"]] == inputs]
    assert len(wired) == 1
    (callback,) = wired
    assert [(s["id"], s["property"]) for s in callback["state"]] == state and callback["prevent_initial_call"]
    assert callback["clientside_function"]["function_name"] == hashlib.sha256(url_query_writer(*names).encode()).hexdigest()

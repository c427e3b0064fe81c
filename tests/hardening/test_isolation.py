"""Isolation: concurrent uploads from two clients stay apart; an unknown run id is a 404 page, not a traceback."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from portscope.ingest import read_trace

from .conftest import upload


def test_two_clients_uploading_at_once_see_only_their_own_runs(make_app, demo_paths: dict[str, Path]) -> None:
    from portscope.app.pages.runs import runs_rows

    app = make_app(trace_paths=())  # nothing listed: every run a client sees comes from its uploads
    results: dict[str, list[str]] = {"a": [], "b": []}
    files = {"a": demo_paths["eager"], "b": demo_paths["predicted"]}
    barrier = threading.Barrier(2)

    def client(who: str) -> None:
        with app.server.test_client() as c:
            barrier.wait()
            for _ in range(5):
                answer = upload(c, files[who])
                assert answer.status_code == 200, answer.get_json()
                if answer.get_json()["run_id"] not in results[who]:
                    results[who].append(answer.get_json()["run_id"])

    threads = [threading.Thread(target=client, args=(w,)) for w in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {w: [read_trace(p).content_hash()] for w, p in files.items()}
    with app.server.test_request_context():
        for who, other in (("a", "b"), ("b", "a")):
            rows, problems = runs_rows(results[who])  # what this browser's run list shows
            assert [r["run_id"] for r in rows] == results[who] and problems == []
            assert results[other][0] not in {r["run_id"] for r in rows}
        assert runs_rows([])[0] == []  # a third browser sees nothing


UNKNOWN = "0123456789abcdef"


@pytest.mark.parametrize(
    "url",
    [f"/run/{UNKNOWN}", f"/run/{UNKNOWN}/timeline", f"/run/{UNKNOWN}/region/forward", "/run/..%2F..%2Fetc%2Fpasswd", "/run/%3Cscript%3E", "/compare/{known}/" + UNKNOWN],
)
def test_a_run_that_was_never_uploaded_is_a_404_page(make_app, demo_paths: dict[str, Path], url: str) -> None:
    known = read_trace(demo_paths["eager"]).content_hash()
    app = make_app()
    with app.server.test_client() as c:
        answer = c.get(url.format(known=known))
        assert answer.status_code == 404
        body = answer.get_data(as_text=True)
        assert "Traceback" not in body and 'id="react-entry-point"' in body  # the viewer's own page, which says why
        assert c.get(f"/api/run/{UNKNOWN}").status_code == 404
        assert c.get(f"/run/{known}").status_code == 200


@pytest.mark.parametrize("page", ["run", "timeline", "region", "compare"])
def test_every_run_page_says_which_run_is_missing(make_app, page: str) -> None:
    from portscope.app import pages

    app = make_app()
    module = getattr(pages, page)
    kwargs = {"run": {"run_id": UNKNOWN}, "timeline": {"run_id": UNKNOWN}, "region": {"run_id": UNKNOWN, "name": "forward"}, "compare": {"a": UNKNOWN, "b": UNKNOWN}}[page]
    with app.server.test_request_context():
        text = str(module.layout(**kwargs))
    assert f"no run '{UNKNOWN}' here" in text

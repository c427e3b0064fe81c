"""URLs of the viewer's pages: every view has one, so it can be bookmarked and shared."""

from __future__ import annotations

from urllib.parse import quote, unquote, urlencode


def runs() -> str:
    return "/runs"


def run(run_id: str) -> str:
    return f"/run/{run_id}"


def region(run_id: str, name: str, nth: int = 0) -> str:
    """The region page; `nth` picks among regions sharing a name (0 = first)."""
    url = f"/run/{run_id}/region/{quote(name, safe='')}"
    return url + (f"?n={nth}" if nth else "")


def timeline(run_id: str) -> str:
    return f"/run/{run_id}/timeline"


def plan(run_id: str) -> str:
    return f"/run/{run_id}/plan"


def ranks(run_id: str) -> str:
    return f"/run/{run_id}/ranks"


def query(run_ids: list[str] | None = None, sql: str | None = None) -> str:
    """The SQL page, the given runs ticked (and the query run as it opens)."""
    params = {k: v for k, v in (("runs", ",".join(run_ids or [])), ("sql", sql)) if v}
    return "/query" + (f"?{urlencode(params)}" if params else "")


def compare(a: str, b: str, region_a: int | None = None, region_b: int | None = None) -> str:
    query = {k: v for k, v in (("ra", region_a), ("rb", region_b)) if v is not None}
    return f"/compare/{a}/{b}" + (f"?{urlencode(query)}" if query else "")


def unquote_segment(segment: str) -> str:
    return unquote(segment or "")

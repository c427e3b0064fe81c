"""One module per page; each has `layout(**path_and_query)` and `register(app)`."""

from __future__ import annotations

import dash

from . import compare, plan, query, ranks, region, run, runs, timeline

# Dash matches templates in `order`; specific ones come first ("/run/<run_id>" would match "/run/x/timeline").
PAGES = (runs, region, timeline, plan, ranks, compare, query, run)


def register_all(app: dash.Dash) -> None:
    """Register every page and its callbacks on `app` (callbacks go on the app, not dash's global list)."""
    for module in PAGES:
        module.register(app)

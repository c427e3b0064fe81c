"""Viewer-side data functions (tables in, tables out, no dash); shared queries live in portscope.ingest."""

from .runs import run_row

__all__ = ["run_row"]

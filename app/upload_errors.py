"""What a refused upload says: the problems of a file that is not a valid trace, worded for the page that sent it."""

from __future__ import annotations

from portscope.ingest.errors import TraceFormatError, UnrecognisedFormatError

from .components import with_details


def upload_error(exc: TraceFormatError) -> str:
    """The message of an upload refused with `exc` (its path already the user's file name). A file of no format
    portscope knows reads as one line, the formats tried folded away under it (they are not problems of the file);
    any other error is the error's own message (the command line's too)."""
    if not isinstance(exc, UnrecognisedFormatError):
        return str(exc)
    return with_details(f"{exc.path}: not a trace portscope reads (unrecognised {exc.looks_like})", "formats tried",
                        exc.formats_tried)  # fmt: skip


__all__ = ["upload_error"]

"""What a refused upload says: the problems of a file that is not a valid trace, worded for the page that sent it."""

from __future__ import annotations

import re

from portscope.ingest.errors import TraceFormatError

from .components import with_details

# convert.detect()'s answer for content it does not recognise: a heading, then one line per format it tried
_UNRECOGNISED = re.compile(r"unrecognised (?P<what>.+); tried these formats:")


def upload_error(exc: TraceFormatError) -> str:
    """The message of an upload refused with `exc` (its path already the user's file name). A file of no format
    portscope knows reads as one line, the formats tried folded away under it (they are not problems of the file);
    any other error is the error's own message (the command line's too)."""
    first, *tried = exc.problems
    found = _UNRECOGNISED.fullmatch(first)
    if found is None or not tried:
        return str(exc)
    return with_details(f"{exc.path}: not a trace portscope reads (unrecognised {found['what']})", "formats tried", tried)


__all__ = ["upload_error"]

"""The files and folders a command writes, checked when its command line is read.

An output argument is typed `OutputFile` or `OutputFolder` (a `str` to the command that reads it), and
`check_outputs` looks at each before the command runs: a missing or unwritable folder is one line naming the
path, not a traceback after minutes of converting, and nothing partial is left behind.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
from pathlib import Path

from .errors import OutputPathError


class OutputFile(str):
    """A file a command writes (an argparse `type`): its folder must exist and take new files."""


class OutputFolder(str):
    """A folder a command writes into, made with its parents when missing (an argparse `type`)."""


def check_output_file(path: str | Path) -> Path:
    """`path` as a Path, or OutputPathError when a file cannot be written there."""
    path = Path(path)
    if _kind(path, path) == "folder":
        raise OutputPathError(path, "is a folder; give the name of the file to write")
    folder = path.parent  # Path("x.arrow").parent is Path(".")
    kind = _kind(path, folder)
    if kind is None:
        raise OutputPathError(path, f"the folder {folder} does not exist")
    if kind != "folder":
        raise OutputPathError(path, f"{folder} is not a folder")
    _probe(path, folder)
    return path


def check_output_folder(path: str | Path) -> Path:
    """`path` as a Path, or OutputPathError when it is not a folder and cannot be made one with files in it."""
    path = Path(path)
    nearest = path
    while _kind(path, nearest) is None and nearest != nearest.parent:  # made with its parents: where they start
        nearest = nearest.parent
    if _kind(path, nearest) != "folder":
        raise OutputPathError(path, "is a file, not a folder" if nearest == path else f"{nearest} is not a folder")
    _probe(path, nearest)
    return path


def check_outputs(args: argparse.Namespace) -> None:
    """Check every output of a parsed command line (the arguments typed `OutputFile` or `OutputFolder`)."""
    for value in vars(args).values():
        if isinstance(value, OutputFile):
            check_output_file(value)
        elif isinstance(value, OutputFolder):
            check_output_folder(value)


def _kind(path: Path, where: Path) -> str | None:
    """"folder", "file" (anything else that is there) or None (nothing there) for `where`, on the way to `path`."""
    try:
        mode = os.stat(where).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise OutputPathError(path, f"cannot reach {where} ({exc.strerror})") from None
    return "folder" if stat.S_ISDIR(mode) else "file"


def _probe(path: Path, folder: Path) -> None:
    """Create and remove a file in `folder`, as the writers' temporary files are: permissions alone do not say
    (root passes them, and /proc takes no new file whatever its mode)."""
    import tempfile  # here: every command's start reads this module, and most write nothing

    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
    except OSError as exc:
        why = "" if exc.errno in (errno.ENOENT, errno.ENOTDIR) else f" ({exc.strerror})"
        raise OutputPathError(path, f"cannot create files in the folder {folder}{why}") from None
    os.close(fd)
    os.unlink(probe)

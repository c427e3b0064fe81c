"""The one exception family of portscope: every bad input raises a TraceFormatError."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Self


class PortscopeError(Exception):
    """Base class of every error portscope raises on purpose."""


class TraceFormatError(PortscopeError, ValueError):
    """A file is not a valid trace (or input of a converter); lists every problem at once."""

    def __init__(self, path: str | Path | None, problems: Iterable[str] | str) -> None:
        self.path = str(path) if path is not None else "<memory>"
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        if not self.problems:
            self.problems = ["unknown problem"]
        super().__init__(self.message())

    def message(self) -> str:
        """The text of this error: the path, then its problem, or each of its problems on a line of its own."""
        return _message(self.path, self.problems)

    def with_path(self, path: str | Path) -> Self:
        """This error about the same content under another name (an upload: the user's file name, not the server's
        temporary copy): of the same class, every other attribute kept, the message naming `path`."""
        renamed = type(self).__new__(type(self))  # not type(self)(...): a subclass's constructor takes other arguments
        renamed.__dict__.update(self.__dict__, path=str(path), problems=list(self.problems))
        super(TraceFormatError, renamed).__init__(renamed.message())
        return renamed


def _message(path: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"{path}: {problems[0]}"
    listed = "\n".join(f"  - {p}" for p in problems)
    return f"{path}: {len(problems)} problems:\n{listed}"


class UnrecognisedFormatError(TraceFormatError):
    """A file of no format portscope reads (`convert.detect`): what its content looked like and every format tried,
    each `"name: what it looks like"`. The message is a TraceFormatError's, the formats tried listed as problems."""

    def __init__(self, path: str | Path, *, looks_like: str, formats_tried: Iterable[str]) -> None:
        self.looks_like = looks_like  # "content", "gzip-compressed content"
        self.formats_tried = tuple(formats_tried)
        super().__init__(path, [f"unrecognised {looks_like}; tried these formats:", *self.formats_tried])

    def message(self) -> str:
        """One line saying the file is of no format portscope reads, the formats tried listed under it (they are
        not problems of the file)."""
        tried = "\n".join(f"  - {f}" for f in self.formats_tried)
        return f"{self.path}: not a trace portscope reads (unrecognised {self.looks_like}); formats tried:\n{tried}"


class ColumnValueError(PortscopeError, ValueError):
    """A value a table's column cannot hold reached the trace builder (a reader let it through). The reading
    boundary (`convert.load_any`) turns it into a TraceFormatError naming the file."""

    def __init__(self, table: str, column: str, reason: str) -> None:
        self.table, self.column, self.reason = table, column, reason
        super().__init__(f"a value that {table}.{column} cannot hold ({reason})")


class TargetError(PortscopeError, ValueError):
    """A target file is invalid: names the file, the key and what is wrong."""

    def __init__(self, path: str | Path, problems: Iterable[str] | str) -> None:
        self.path = str(path)
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        listed = "; ".join(self.problems)
        super().__init__(f"{self.path}: {listed}")


class UsageError(PortscopeError, ValueError):
    """A command-line argument or API argument is invalid."""


class OutputPathError(UsageError):
    """A file or folder a command is to write cannot be written there: names the path and why."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path, self.problem = str(path), problem
        super().__init__(f"{self.path}: {problem}")

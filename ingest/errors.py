"""The one exception family of portscope: every bad input raises a TraceFormatError."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class PortscopeError(Exception):
    """Base class of every error portscope raises on purpose."""


class TraceFormatError(PortscopeError, ValueError):
    """A file is not a valid trace (or input of a converter); lists every problem at once."""

    def __init__(self, path: str | Path | None, problems: Iterable[str] | str) -> None:
        self.path = str(path) if path is not None else "<memory>"
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        if not self.problems:
            self.problems = ["unknown problem"]
        if len(self.problems) == 1:
            message = f"{self.path}: {self.problems[0]}"
        else:
            listed = "\n".join(f"  - {p}" for p in self.problems)
            message = f"{self.path}: {len(self.problems)} problems:\n{listed}"
        super().__init__(message)


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

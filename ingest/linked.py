"""What the rules read and what they give: the linked events, the findings, the rule.

`Linked`: the events of one run and their links; `Findings`: what rules found, as columns (over `Columns`);
`EventRule`: a declared rule. The rules themselves and their registry are `rules` and the ``rules_*`` modules.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Callable

import numpy as np

from .events import KIND_CODES, NO_ARGS, NONE, EventKind, Logged
from .link import Links
from .schema import CompileKind, Direction, SignalKind


@dataclasses.dataclass
class Linked:
    """The events of one run (`events.EventColumns.arrays`), their texts and their links: what rules read."""

    a: dict[str, np.ndarray]
    texts: list[str | None]
    links: Links
    infer_fallback: bool = False
    threads: list[tuple[object, object]] = dataclasses.field(default_factory=list)  # (pid, tid) per thread code
    arguments: list[tuple[str | None, str | None, str | None, int]] = dataclasses.field(default_factory=lambda: [NO_ARGS])
    copies: tuple[np.ndarray, np.ndarray] | None = None  # `rules_transfers.copy_directions`, once worked out
    phases: np.ndarray | None = None  # `rules_compile`'s outermost phases, once worked out
    compiling: np.ndarray | None = None  # `rules_compile`'s compiler spans, once worked out (rules, placements ask)
    logs: list[Logged] = dataclasses.field(default_factory=list)  # the `logged` column's values

    def __post_init__(self) -> None:
        self.kind = self.a["kind"]

    def rows(self, kind: EventKind) -> np.ndarray:
        return np.flatnonzero(self.kind == KIND_CODES[kind])

    def name(self, row: int) -> str:
        return self.texts[self.a["name"][row]] or ""

    def given_name(self, row: int) -> str | None:
        """The event's name as the file gives it (None: none, a dump's count not attributed to an operator)."""
        return self.texts[self.a["name"][row]]

    def names_where(self, test: Callable[[str], bool]) -> np.ndarray:
        """A flag per text code: whether `test` holds for that text."""
        return np.array([t is not None and test(t) for t in self.texts], dtype=bool)

    def logged(self, kind: EventKind) -> list[tuple[int, Logged]]:
        """(row, what its log line says) of the events of a kind, in file order (`Logged()`: nothing said)."""
        rows = self.rows(kind)
        codes = self.a["logged"][rows]
        said = [self.logs[c] if c != NONE else Logged() for c in np.asarray(codes).tolist()]
        return list(zip(rows.tolist(), said, strict=True))


SIGNAL_KINDS = list(SignalKind)  # a signal's kind as an int8 index into this
DIRECTIONS = list(Direction)  # a transfer's direction as an int8 index into this
NO_WORD = -1  # "none" in a words code column


class Columns:
    """Columns of equal length appended a row at a time (held in stdlib arrays: no Python object a row) or a chunk of
    numpy arrays at a time; `arrays` joins them once."""

    def __init__(self, dtypes: dict[str, str]) -> None:
        self.dtypes = dtypes  # column -> stdlib array typecode (``q`` int64, ``i`` int32, ``b`` int8)
        self._held = {c: array(t) for c, t in dtypes.items()}
        self._chunks: list[dict[str, np.ndarray]] = []
        self._joined: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(next(iter(self._held.values()))) + sum(len(next(iter(c.values()))) for c in self._chunks)

    def append(self, **row: int) -> None:
        for c, held in self._held.items():
            held.append(row[c])
        self._joined = None

    def extend(self, n: int, **columns: np.ndarray | int) -> None:
        """`n` rows: per column an array of `n` values or one value for all."""
        self._flush()  # one value for all rows: kept as one (a read-only broadcast)
        self._chunks.append({c: np.broadcast_to(np.asarray(columns[c], dtype=np.dtype(t)), (n,)) if np.ndim(columns[c]) == 0
                             else np.asarray(columns[c], dtype=np.dtype(t)) for c, t in self.dtypes.items()})  # fmt: skip
        self._joined = None

    def _flush(self) -> None:
        if len(next(iter(self._held.values()))):
            self._chunks.append({c: np.frombuffer(h, dtype=np.dtype(h.typecode)).copy() for c, h in self._held.items()})
            self._held = {c: array(t) for c, t in self.dtypes.items()}

    def arrays(self) -> dict[str, np.ndarray]:
        """Every column as one numpy array (one value for all rows: a read-only broadcast, no memory a row)."""
        if self._joined is None:
            self._flush()
            self._joined = {c: self._joined_column(c, np.dtype(t)) for c, t in self.dtypes.items()}
            self._chunks = [self._joined] if self._chunks else []
        return self._joined

    def _joined_column(self, c: str, dtype: np.dtype) -> np.ndarray:
        parts = [k[c] for k in self._chunks if len(k[c])]
        if not parts:
            return np.zeros(0, dtype=dtype)
        if all(p.strides == (0,) and p[0] == parts[0][0] for p in parts):
            return np.broadcast_to(parts[0][:1], (sum(len(p) for p in parts),))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)  # one part: as it is (not copied)


class Findings:
    """What rules found, as columns (no Python object per signal): signals (`signal_columns`: the event the signal is
    about, its operator (-1: none), its kind (an index into `SIGNAL_KINDS`), its reason and note (codes into `words`,
    `NO_WORD`: none), the operator name it shows (`name_word`, a code into `words`, else `name_text`, an event text
    code), its bytes), transfers (`transfer_columns`: event, direction (an index into `DIRECTIONS`), bytes, reason),
    compiles (few: lists) and a static schedule's dataflow (few: per event row, the correlations of the instructions
    it read from (`depends`) and what its engine idled on before it (`waited`))."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self._word_codes: dict[str, int] = {}
        self.signals = Columns({"event": "q", "op": "q", "kind": "b", "reason": "i", "name_text": "i", "name_word": "i",
                                "note": "i", "bytes": "q"})  # fmt: skip
        self.transfers = Columns({"event": "q", "direction": "b", "bytes": "q", "reason": "i"})
        self.compile_event: list[int] = []  # compiles table rows
        self.compile_kind: list[CompileKind] = []
        self.compile_reason: list[str | None] = []
        self.depends: dict[int, tuple[int, ...]] = {}
        self.waited: dict[int, str] = {}

    def word(self, text: str | None) -> int:
        """The code of a text in `words` (`NO_WORD`: None)."""
        if text is None:
            return NO_WORD
        code = self._word_codes.get(text)
        if code is None:
            code = self._word_codes[text] = len(self.words)
            self.words.append(text)
        return code

    def compiled(self, event: int, kind: CompileKind, reason: str | None) -> None:
        self.compile_event.append(event)
        self.compile_kind.append(kind)
        self.compile_reason.append(reason)

    def signal(self, event: int, op: int, kind: SignalKind, reason: str | None, op_name: str | None, note: str | None,
               nbytes: int = 0) -> None:
        """One signal (`op_name`: the operator name it shows)."""
        self.signals.append(event=event, op=op, kind=SIGNAL_KINDS.index(kind), reason=self.word(reason), name_text=0,
                            name_word=self.word(op_name), note=self.word(note), bytes=nbytes)  # fmt: skip

    def signals_of(self, events: np.ndarray, ops: np.ndarray, kind: SignalKind, reason: str | None,
                   name_text: np.ndarray, note: str | None) -> None:  # fmt: skip
        """A signal per event of `events` (their operators `ops`), each showing the event text `name_text` (codes)."""
        self.signals.extend(len(events), event=events, op=ops, kind=SIGNAL_KINDS.index(kind), reason=self.word(reason),
                            name_text=name_text, name_word=NO_WORD, note=self.word(note), bytes=0)  # fmt: skip

    def transfer(self, event: int, direction: Direction, nbytes: int, reason: str) -> None:
        self.transfers.append(event=event, direction=DIRECTIONS.index(direction), bytes=nbytes, reason=self.word(reason))

    def signal_columns(self) -> dict[str, np.ndarray]:
        return self.signals.arrays()

    def transfer_columns(self) -> dict[str, np.ndarray]:
        return self.transfers.arrays()


@dataclasses.dataclass(frozen=True)
class EventRule:
    """A declared rule over linked events: `find` adds what it finds to the findings (`rules.RULES` holds them)."""

    name: str
    description: str
    kinds: tuple[SignalKind, ...]
    find: Callable[[Linked, Findings], None]


__all__ = ["DIRECTIONS", "NO_WORD", "SIGNAL_KINDS", "Columns", "EventRule", "Findings", "Linked"]

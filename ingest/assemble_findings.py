"""The tables of the rules' findings of an assembled run (`assemble.Assembly` inherits `FindingTables`): transfers,
signals and compiles, made from `linked.Findings` (columns: nothing per row in Python).

An event that stands for N occurrences (`events` column ``count``) makes signals of count N, and a counted copy N
rows of the transfers table (its bytes split evenly; at most `MAX_COUNTED_ROWS`); an event whose file gives it no
time (`Logged.timed` false) has no time in the signals and transfers tables. A signal of an event a log line
describes takes that line's call site, stack and source line. The signals are in order of their events' start;
sliced, a table of more than a slice waits in a temporary file (`assemble_files.in_file`) until written.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .assemble_files import distinct, in_file
from .callsites import parse_frame
from .columns import Coder, nullable, table_of
from .events import KIND_CODES, NONE, EventKind, Logged
from .linked import DIRECTIONS, NO_WORD, SIGNAL_KINDS, Findings
from .schema import Direction
from .trace import TableSlices

MAX_COUNTED_ROWS = 1_000_000  # transfers rows written for one counted copy at most (its signal keeps the count)
_MIN = np.iinfo(np.int64).min


class FindingTables:
    """The transfers, signals and compiles tables; reads the assembly's events (`a`, `links`, `texts`, the call
    sites, `logged`...)."""

    def transfers(self, t: dict[str, np.ndarray], count: np.ndarray, sliced: bool) -> pa.Table | TableSlices:
        """The transfers table: a row per copy found (a counted copy as many rows, its bytes split evenly), made
        `slice_rows` copies at a time, each column coded by one dictionary of the values some row uses; sliced: more
        than a slice of them waits in a temporary file until written."""
        a, rows, direction = self.a, t["event"], t["direction"]
        devs = distinct(a["device"], rows, self.slice_rows) if len(rows) else rows
        places = ["cpu", *(self.device_name(int(d)) if d >= 0 else self.t.root_device for d in devs.tolist())]
        ends = {"src_device": DIRECTIONS.index(Direction.H2D), "dst_device": DIRECTIONS.index(Direction.D2H)}
        parts = [slice(lo, lo + self.slice_rows) for lo in range(0, len(rows), self.slice_rows)] or [slice(0, 0)]

        def op_rows_of(part: slice) -> np.ndarray:  # the operator row around each copy (-1: none)
            return self.links.op[rows[part]] if len(rows[part]) else rows[part]

        def codes(part: slice, op_rows: np.ndarray) -> dict[str, np.ndarray]:  # dictionary codes per copy
            d = direction[part]
            device = np.searchsorted(devs, a["device"][rows[part]]) + 1
            site = np.where(op_rows >= 0, self.op_site[np.maximum(op_rows, 0)], len(self.site_texts) - 1)
            return {"direction": d, "call_site": site, **{c: np.where(d == host, 0, device) for c, host in ends.items()}}

        used = {"direction": np.zeros(len(DIRECTIONS), bool), "call_site": np.zeros(len(self.site_texts), bool),
                "src_device": np.zeros(len(places), bool), "dst_device": np.zeros(len(places), bool)}  # fmt: skip
        for part in parts:  # the values some row uses (a copy counted none times has no row: its site is kept)
            written = count[part] > 0
            for c, v in codes(part, op_rows_of(part)).items():
                used[c][v if c == "call_site" else v[written]] = True
        coders = {c: Coder([d.value for d in DIRECTIONS] if c == "direction" else self.site_texts if c == "call_site"
                           else places, flags) for c, flags in used.items()}  # fmt: skip
        cause = Coder(["explicit"], np.array([bool((count > 0).any())]))

        def table(part: slice) -> pa.Table:
            at = rows[part]
            each, nbytes = _counted(count[part], t["bytes"][part])  # a counted copy: as many rows, its bytes split

            def rows_of(v: np.ndarray) -> np.ndarray:
                return v if each is None else v[each]

            op_rows = op_rows_of(part)
            op = self.op_id(op_rows) if len(at) else at
            coded = codes(part, op_rows)
            stack = self.site_stacks[rows_of(coded["call_site"])]
            untimed = rows_of(self.untimed(at))
            return table_of("transfers", {
                "region_id": rows_of(self._region(at, op)), "op_id": nullable(rows_of(op), rows_of(op) < 0),
                "bytes": nbytes, **{c: coder(rows_of(coded[c])) for c, coder in coders.items()},
                "start_ns": nullable(rows_of(a["start_ns"][at]), untimed), "dur_ns": nullable(rows_of(a["dur_ns"][at]), untimed),
                "cause": cause(np.zeros(len(untimed), dtype=np.int32)), "stack_id": nullable(stack, stack < 0)})  # fmt: skip

        if sliced and len(parts) > 1:  # made and moved to a temporary file a slice at a time
            return in_file(table(part) for part in parts)
        return pa.concat_tables([table(part) for part in parts])

    def findings(self, f: Findings, sliced: bool = False) -> tuple[pa.Table | TableSlices, pa.Table | TableSlices, pa.Table]:
        """The transfers, signals and compiles tables of the rules' findings (columns: nothing per row in Python).
        The signals in order of their events' start (ties in the order found), made `slice_rows` at a time; sliced:
        more than a slice of them waits in a temporary file until written."""
        t, s = f.transfer_columns(), f.signal_columns()
        rows, direction = t["event"], t["direction"]
        op_rows = self.links.op[rows] if len(rows) else rows
        count = self._counts(rows)
        transfers = self.transfers(t, count, sliced)
        # the signals: the transfers' then the rules' others, one source each (not joined: millions of AI CPU kernels)
        signal_of = np.array([SIGNAL_KINDS.index(d.signal) for d in DIRECTIONS], dtype=np.int8)
        none = np.full(len(rows), NO_WORD, dtype=np.int32)
        sources = [{"event": rows, "op": np.asarray(op_rows, dtype=np.int64), "kind": signal_of[direction],
                    "reason": t["reason"], "note": none, "word": none, "bytes": t["bytes"], "count": count,
                    "text": self.a["name"][np.where(op_rows >= 0, op_rows, rows)] if len(rows) else rows.astype(np.int32)},
                   {**s, "text": s["name_text"], "word": s["name_word"], "count": self._counts(s["event"])}]  # fmt: skip
        n = len(rows) + len(s["event"])
        order = self._in_time_order(sources)
        positions = [np.arange(lo, min(lo + self.slice_rows, n)) if order is None else order[lo : lo + self.slice_rows]
                     for lo in range(0, n, self.slice_rows)] or [np.zeros(0, dtype=np.int64)]  # fmt: skip
        coders = self._signal_coders(f, sources)
        for x in self.logs:  # the source line a log printed under a call site: the frames table's source column
            if x.call_site and x.source and (frame := parse_frame(x.call_site))[1] is not None:
                self.stacks.sources[(frame[0], frame[1], frame[2] or "")] = x.source  # type: ignore[index]
        if sliced and len(positions) > 1:  # made and moved to a temporary file a slice at a time
            signals: pa.Table | TableSlices = in_file(self._signal_slice(sources, coders, len(f.words), p) for p in positions)
        else:
            signals = pa.concat_tables([self._signal_slice(sources, coders, len(f.words), p) for p in positions])
        return transfers, signals, self.compiles(f)

    def _in_time_order(self, sources: list[dict[str, np.ndarray]]) -> np.ndarray | None:
        """None where the signals (the sources one after the other) come in order of their events' start, else the
        order (stable)."""
        last = _MIN
        for source in sources:
            for lo in range(0, len(source["event"]), self.slice_rows):
                start = self.a["start_ns"][source["event"][lo : lo + self.slice_rows]]
                if len(start) and (start[0] < last or (start[1:] < start[:-1]).any()):
                    return np.argsort(np.concatenate([self.a["start_ns"][src["event"]] for src in sources]), kind="stable")
                last = start[-1] if len(start) else last
        return None

    def _signal_coders(self, f: Findings, sources: list[dict[str, np.ndarray]]) -> dict[str, tuple[Coder, np.ndarray]]:
        """(a coder shared by every slice, the index of each code in its values) of the signals' dictionary columns:
        kind, reason, note, the operator name shown (the texts some signal shows, then the rules' words), call site."""
        words = len(f.words)
        used = {c: np.zeros(size, dtype=bool) for c, size in (("kind", len(SIGNAL_KINDS)), ("reason", words + 1),
                                                               ("note", words + 1), ("word", words + 1))}  # fmt: skip
        texts = np.zeros(len(self.texts), dtype=bool)
        sites = np.zeros(len(self.site_texts), dtype=bool)
        for src in sources:
            for c in used:
                used[c][_words(src[c], words) if c != "kind" else src[c]] = True
            texts[src["text"][src["word"] == NO_WORD]] = True
            sites[np.asarray(self.op_site[np.maximum(src["op"], 0)])[src["op"] >= 0]] = True
            sites[-1] |= bool((src["op"] < 0).any())
        shown = np.flatnonzero(texts)
        text_index = np.zeros(len(self.texts) + words + 1, dtype=np.int32)  # text codes, then words after them
        text_index[shown] = np.arange(len(shown), dtype=np.int32)
        text_index[len(self.texts) + np.arange(words + 1)] = len(shown) + np.arange(words + 1, dtype=np.int32)
        names = [*(self.texts[c] for c in shown.tolist()), *f.words, None]
        name_used = np.r_[np.ones(len(shown), dtype=bool), used["word"]]
        identity = np.arange(max(words + 1, len(SIGNAL_KINDS), len(self.site_texts)), dtype=np.int32)
        return {"kind": (Coder([k.value for k in SIGNAL_KINDS], used["kind"]), identity),
                "reason": (Coder([*f.words, None], used["reason"]), identity),
                "note": (Coder([*f.words, None], used["note"]), identity),
                "op_name": (Coder(names, name_used), text_index),
                "call_site": (Coder(self.site_texts, sites), identity)}

    def _signal_slice(self, sources: list[dict[str, np.ndarray]], coders: dict[str, tuple[Coder, np.ndarray]],
                      words: int, at: np.ndarray) -> pa.Table:  # fmt: skip
        """The signals at positions `at` (of the sources one after the other) as a table of the schema."""
        first = len(sources[0]["event"])
        mine = at < first

        def pick(c: str) -> np.ndarray:
            out = np.empty(len(at), dtype=sources[1][c].dtype if len(sources[1][c]) else sources[0][c].dtype)
            out[mine] = sources[0][c][at[mine]]
            out[~mine] = sources[1][c][at[~mine] - first]
            return out

        def code(c: str, codes: np.ndarray) -> pa.Array:
            coder, index = coders[c]
            return coder(index[codes])

        ev, ops = pick("event"), pick("op")
        sig_op = self.op_id(ops)
        s = np.where(ops >= 0, self.op_site[np.maximum(ops, 0)], len(self.site_texts) - 1)
        site: pa.Array | list = code("call_site", s)
        stack: pa.Array | list = nullable(self.site_stacks[s], self.site_stacks[s] < 0)
        time: np.ndarray | list = self.a["start_ns"][np.where(ops >= 0, ops, ev)] if len(ev) else ev
        logged = self.logged(ev) if self.logs else []
        if any(x is not None for x in logged):  # a log line's own call site, stack and (missing) time
            site, stack, time = site.to_pylist(), stack.to_pylist(), time.tolist()  # type: ignore[union-attr]
            for i, x in enumerate(logged):
                if x is not None:
                    site[i] = x.call_site or site[i]
                    stack[i] = self.stacks.intern(x.stack) if x.stack else stack[i]
                    time[i] = time[i] if x.timed else None
        word = pick("word")
        shown = np.where(word >= 0, len(self.texts) + word, pick("text"))
        return table_of("signals", {
            "region_id": self._region(ev, sig_op), "op_id": nullable(sig_op, sig_op < 0),
            "kind": code("kind", pick("kind")), "reason": code("reason", _words(pick("reason"), words)),
            "op_name": code("op_name", shown), "count": pick("count"), "bytes": pick("bytes"),
            "call_site": site, "stack_id": stack, "note": code("note", _words(pick("note"), words)), "time_ns": time})  # fmt: skip

    def compiles(self, f: Findings) -> pa.Table:
        """A row per compile the rules found, in file order: a runtime call's online compile (its operator's name,
        its duration) or a `compile` event a log recorded (what the log line says of it, its time as logged)."""
        a, name = self.a, self.texts
        order = np.argsort(np.asarray(f.compile_event, dtype=np.int64), kind="stable")
        crow = np.asarray(f.compile_event, dtype=np.int64)[order]
        at = order.tolist()
        cop = self.links.op[crow] if len(crow) else crow
        logged = [x or Logged() for x in self.logged(crow)]
        logged_compile = (a["kind"][crow] == KIND_CODES[EventKind.COMPILE]).tolist()
        dur = a["dur_ns"][crow].tolist()
        time = a["start_ns"][crow].tolist()
        return table_of("compiles", {
            "region_id": self._region(crow, self.op_id(cop)), "kind": [f.compile_kind[i].value for i in at],
            "compile_id": [x.compile_id for x in logged],
            "key": [name[a["name"][o if o >= 0 else r]] for r, o in zip(crow.tolist(), cop.tolist(), strict=True)],
            "frame": [x.frame for x in logged], "op_count": [x.op_count for x in logged],
            "compile_ns": [x.compile_ns if c else d for x, c, d in zip(logged, logged_compile, dur, strict=True)],
            "reason": [f.compile_reason[i] for i in at], "call_site": [x.call_site for x in logged],
            "time_ns": [t if x.timed else None for x, t in zip(logged, time, strict=True)]})  # fmt: skip

    def _counts(self, rows: np.ndarray) -> np.ndarray:
        """How many occurrences each event row stands for (`events` column ``count``; none given: one). A column of one
        value (no reader gave counts): that value for every row, held once."""
        count = self.a["count"]
        if isinstance(count, np.ndarray) and count.strides == (0,) and len(count):
            return np.broadcast_to(np.int64(1 if int(count[0]) == NONE else int(count[0])), (len(rows),))
        given = np.asarray(count[rows], dtype=np.int64)
        return np.where(given == NONE, 1, given)


def _counted(count: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(per row written, the finding it is of; None: one each) and each row's bytes: a finding of count N is N rows
    (at most `MAX_COUNTED_ROWS`), its bytes split evenly (the first ones a byte more where they do not divide)."""
    if not len(count) or (count == 1).all():
        return None, nbytes
    times = np.clip(count, 0, MAX_COUNTED_ROWS)
    each = np.repeat(np.arange(len(count)), times)
    k = np.arange(len(each)) - np.repeat(np.cumsum(times) - times, times)  # a row's place among its finding's
    per = np.maximum(times[each], 1)
    return each, nbytes[each] // per + (k < nbytes[each] % per)


def _words(codes: np.ndarray, none: int) -> np.ndarray:
    """Codes into `Findings.words` with `NO_WORD` as `none` (a None after the words)."""
    return np.where(codes == NO_WORD, none, codes)



__all__ = ["MAX_COUNTED_ROWS", "FindingTables"]

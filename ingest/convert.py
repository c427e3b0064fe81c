"""Recognise a trace file by its content and load it as a Trace, whatever wrote it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from .errors import ColumnValueError, TraceFormatError, UnrecognisedFormatError
from .kineto_vocabulary import KINETO_CATEGORY_ALIASES, KINETO_DEVICE_CATEGORIES, KINETO_RUNTIME_CATEGORIES
from .readers import chrome_generic, fallback_log, torch_trace
from .readers.kineto import read_kineto
from .readers.source import DEFAULT_CAPS, GZIP_MAGIC, SizeCaps, head, read_bytes
from .trace import Trace, read_trace
from .vendor_formats import VENDOR_FORMATS, sniff_vendor  # vendor tools' outputs (issue 9)

_SNIFF_BYTES = 64 * 1024


@dataclasses.dataclass(frozen=True)
class InputFormat:
    """A format `load_any` recognises: its name, what it looks like (for error messages) and its reader."""

    name: str
    looks_like: str
    read: Callable[..., Trace]


FORMATS: dict[str, InputFormat] = {
    f.name: f
    for f in (
        InputFormat("portscope", "a ZIP of Arrow tables with manifest.json", lambda p, caps, **kw: read_trace(p)),
        InputFormat("kineto", "JSON with a 'traceEvents' list (torch.profiler export_chrome_trace, .json or .json.gz)",
                    lambda p, caps, **kw: read_kineto(p, caps=caps, **kw)),  # fmt: skip
        InputFormat("torch-trace", "TORCH_TRACE log lines 'V0403 07:28:48.05 123 file.py:1] {json}' (file or directory)",
                    lambda p, caps, **kw: torch_trace.read_torch_trace(p, caps=caps)),  # fmt: skip
        InputFormat("fallback-log", "lines '[time][I] `op` op ran on CPU instead of DEVICE'",
                    lambda p, caps, **kw: fallback_log.read_fallback_log(p, caps=caps)),  # fmt: skip
        *(InputFormat(*vendor) for vendor in VENDOR_FORMATS),
        InputFormat(chrome_generic.FORMAT, "any other Chrome/Perfetto trace JSON (object with 'traceEvents' or a bare "
                    "array of events with 'ph'): generic lanes", lambda p, caps, sliced=False, **kw: chrome_generic.read_chrome(p, caps=caps, sliced=sliced)),
    )
}
# Words only a PyTorch profiler (Kineto) export holds: without them a Chrome trace is read as generic lanes.
_KINETO_WORDS = tuple(f'"{w}"' for w in (*KINETO_RUNTIME_CATEGORIES, *KINETO_DEVICE_CATEGORIES, "cpu_op", "user_annotation",
                                         "python_function", "schemaVersion", "baseTimeNanoseconds", "deviceProperties"))
# An older Kineto's category names ("Kernel", "Runtime"...) are plain words another tool may use: they count with a
# CUDA correlation id beside them (every old Kineto runtime call and device event holds one).
_OLD_KINETO_WORDS = tuple(f'"{w}"' for w in KINETO_CATEGORY_ALIASES)


def _looks_kineto(text: str) -> bool:
    return any(w in text for w in _KINETO_WORDS) or (('"correlation"' in text or '"External id"' in text) and any(w in text for w in _OLD_KINETO_WORDS))


def detect(path: str | Path) -> str:
    """The name of the format of a file or TORCH_TRACE directory, from its content (never its extension)."""
    path = Path(path)
    if path.is_dir():
        files = torch_trace.log_files(path)
        for file in files:
            if _sniff_text(head(file, _SNIFF_BYTES)) == "torch-trace":
                return "torch-trace"
        raise TraceFormatError(path, f"a directory, and none of its {len(files)} files is a TORCH_TRACE log")
    if not path.exists():
        raise TraceFormatError(path, "no such file")
    try:
        if path.stat().st_size == 0:
            raise TraceFormatError(path, "the file is empty (0 bytes)")
        with open(path, "rb") as f:
            magic = f.read(4)
        start = head(path, _SNIFF_BYTES)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if magic == b"PK\x03\x04":
        _refuse_torch_archive(path)
        return "portscope"
    if start[:1] == b"\x80" and start[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise TraceFormatError(path, "a Python pickle (a PyTorch memory snapshot from torch.cuda.memory._dump_snapshot is one): "
                                     "portscope never unpickles a file, as unpickling runs whatever code the file holds; "
                                     "record the run with the PyTorch profiler (profile_memory=True) and convert its trace")  # fmt: skip
    found = _sniff_text(start)
    if found:
        return found
    if magic[:2] == GZIP_MAGIC:
        read_bytes(path)  # a broken gzip stream (truncated, not deflate, a bomb) says so itself
    raise UnrecognisedFormatError(path, looks_like="gzip-compressed content" if magic[:2] == GZIP_MAGIC else "content",
                                  formats_tried=[f"{f.name}: {f.looks_like}" for f in FORMATS.values()])


def _refuse_torch_archive(path: Path) -> None:
    """A torch.save archive (a ZIP holding data.pkl) is a pickle too: refused with the reason, never opened further."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            pickled = any(n.endswith("data.pkl") for n in archive.namelist()[:1000])
    except (zipfile.BadZipFile, NotImplementedError, OSError, ValueError, RuntimeError):
        return  # not a ZIP this can list: the trace reader says what is wrong with it
    if pickled:
        raise TraceFormatError(path, "a torch.save archive (a ZIP holding data.pkl, a Python pickle): portscope never "
                                     "unpickles a file, as unpickling runs whatever code the file holds")  # fmt: skip


def _sniff_text(start: bytes) -> str | None:
    text = start.decode("utf-8", errors="replace").removeprefix("\ufeff")  # a UTF-8 byte order mark
    stripped = text.lstrip()
    vendor = sniff_vendor(text)  # before kineto: some vendor formats are Chrome JSON too
    if vendor:
        return vendor
    if stripped[:1] in ("{", "[") and ('"traceEvents"' in text or '"ph"' in text):
        kineto = _looks_kineto(text) or '"ph"' not in text  # no event seen yet: Kineto, as before
        return "kineto" if kineto or not chrome_generic.sniff(text) else chrome_generic.FORMAT
    # the last line of the sniffed bytes may be cut short: drop it
    lines = text if len(start) < _SNIFF_BYTES else text[: text.rfind("\n") + 1]
    if torch_trace.sniff(lines):
        return "torch-trace"
    if fallback_log.sniff(lines):
        return "fallback-log"
    return None


def load_any(path: str | Path, *, format: str | None = None, caps: SizeCaps = DEFAULT_CAPS, name: str | None = None,
             **options: object) -> Trace:
    """Load any supported file as a Trace; `format` skips detection. Options go to the reader (kineto: infer_fallback).

    name: the file's name as the user gave it where `path` is a copy (an upload): the run's top region takes it."""
    path = Path(path)
    fmt = format or detect(path)
    if fmt not in FORMATS:
        raise TraceFormatError(path, f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    try:
        trace = FORMATS[fmt].read(path, caps, **options)
    except ColumnValueError as exc:
        raise TraceFormatError(path, f"{exc} (a number out of range or of the wrong type in the file)") from exc
    if trace.path is None:
        trace.path = str(path)
    if name and name != path.name:
        _renamed(trace, path.name, name)
    return trace


def _renamed(trace: Trace, old: str, new: str) -> None:
    """A run read from a copy named `old` (an upload's temporary file) named after the file the user gave, `new`: its
    top regions (a reader names them after the file, some without its extensions) and the files its run info lists,
    so that the same file gives the same run whatever its copy was called."""
    if "regions" in trace.tables:
        renames = {old: new, old.split(".")[0]: new.split(".")[0]}
        trace.tables["regions"] = _renamed_root(trace.tables["regions"], renames)
    files = trace.run_info.extra.get("files")
    if isinstance(files, list):
        trace.run_info.extra["files"] = [new if f == old else f for f in files]


def big_npu_lanes(path: str | Path) -> bool:
    """Whether `path` is big enough for a converting process to map its blocks apart when it holds NPU lanes
    (`spill.map_large_blocks`), and its start holds a word of one (a file's first chunk is read only then)."""
    from .readers.npu_kineto import npu_lanes_at_start
    from .spill import NPU_LANES_INPUT_BYTES, input_bytes

    return Path(path).is_file() and input_bytes(path) >= NPU_LANES_INPUT_BYTES and npu_lanes_at_start(path)


def _renamed_root(regions: pa.Table, renames: dict[str, str]) -> pa.Table:
    """The regions with each top region named as a key of `renames` (a reader names the run after the file it read)
    named as its value."""
    names = regions.column("name").to_pylist()
    parents = regions.column("parent_id").to_pylist()
    renamed = [renames.get(n, n) if p is None else n for n, p in zip(names, parents, strict=True)]
    at = regions.schema.get_field_index("name")
    return regions.set_column(at, regions.schema.field(at), pa.array(renamed, regions.schema.field(at).type))


__all__ = ["FORMATS", "InputFormat", "SizeCaps", "big_npu_lanes", "detect", "load_any"]

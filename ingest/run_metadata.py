"""A stranger's run metadata made safe to keep, and the labels a run is named by (model, torch version).

Profiler exports written by benchmark harnesses carry the recording machine's environment next to their
events (`metadata.system.env`, package lists, the command line), sometimes with access tokens in it. What
portscope keeps of such a block goes through `scrub_secrets` first; `run_labels` reads the model id and the
torch version from it. Both are pure: JSON-like values in, new values out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import TypeAlias

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"

REDACTED = "[redacted]"
# a key naming a secret: its whole value goes, whatever it holds (over-reaching on "author" or "keyboard" is cheap)
SECRET_KEY = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
# tokens that need no key to be recognised; long enough that package names such as "hf_transfer" do not match
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|sk-[A-Za-z0-9_-]{20,}"  # OpenAI-style API keys (sk-..., sk-proj-...)
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r")(?![A-Za-z0-9])"
)
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/?#@\s]+@")  # https://user:pass@host, https://token@host
_SECRET_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.+)$", re.DOTALL)  # "HF_TOKEN=..." in an env list

_MODEL_PATHS: tuple[tuple[str, ...], ...] = (  # where harnesses put the model id, most specific first
    ("experiment", "repo_id"),
    ("experiment", "model_id"),
    ("experiment", "model_name"),
    ("experiment", "model"),
    ("model", "repo_id"),
    ("model", "name_or_path"),
    ("model", "name"),
    ("model_id",),
    ("repo_id",),
    ("model_name_or_path",),
    ("pretrained_model_name_or_path",),
    ("model_name",),
    ("model",),
)
_TORCH_PATHS: tuple[tuple[str, ...], ...] = (
    ("system", "torch_env_info", "torch_version"),
    ("torch_env_info", "torch_version"),
    ("system", "torch_version"),
    ("versions", "torch"),
    ("torch_version",),
)
_TRACE_SUFFIXES = frozenset({".gz", ".zst", ".bz2", ".xz", ".json", ".arrow", ".csv", ".log", ".trace", ".pt"})
_LABEL_CHARS = 200  # a label is a name on a page, not a document


def scrub_secrets(value: JsonValue) -> JsonValue:
    """A deep copy of `value` without secrets: entries under secret-looking keys are dropped, and credentials
    in URLs and token-shaped strings are replaced by "[redacted]"."""
    if isinstance(value, Mapping):
        return {k: scrub_secrets(v) for k, v in value.items() if not SECRET_KEY.search(str(k))}
    if isinstance(value, list | tuple):
        return [scrub_secrets(v) for v in value]
    if isinstance(value, str):
        return scrub_text(value)
    return value


def scrub_text(text: str) -> str:
    """`text` with URL credentials, token-shaped words and the value of a `SECRET_NAME=value` replaced."""
    assignment = _SECRET_ASSIGNMENT.match(text)
    if assignment and SECRET_KEY.search(assignment.group(1)):
        return f"{assignment.group(1)}={REDACTED}"
    return _TOKEN.sub(REDACTED, _URL_CREDENTIALS.sub(REDACTED + "@", text))


def run_labels(metadata: Mapping[str, JsonValue], file_name: str) -> dict[str, str | None]:
    """{"model": ..., "torch_version": ...} of a run from its metadata (a trace's top-level keys, or the
    `metadata` block among them); the model falls back to the file's name without its trace suffixes, the
    torch version to None. Values are scrubbed (`scrub_text`) and at most 200 characters."""
    roots = [metadata]
    inner = metadata.get("metadata")
    if isinstance(inner, Mapping):
        roots.insert(0, inner)
    model = _first_text(roots, _MODEL_PATHS)
    return {"model": model or _file_stem(file_name), "torch_version": _first_text(roots, _TORCH_PATHS)}


def _first_text(roots: list[Mapping[str, JsonValue]], paths: tuple[tuple[str, ...], ...]) -> str | None:
    for root in roots:
        for path in paths:
            found: JsonValue = root  # type: ignore[assignment]
            for key in path:
                found = found.get(key) if isinstance(found, Mapping) else None
            if isinstance(found, str) and found.strip():
                return scrub_text(found.strip())[:_LABEL_CHARS]
    return None


def _file_stem(file_name: str) -> str:
    """"bert_small_h100.json.gz" -> "bert_small_h100"; "host_1234.1700000000.pt.trace.json" -> "host_1234.1700000000"."""
    name = PurePath(file_name).name
    while PurePath(name).suffix.lower() in _TRACE_SUFFIXES and PurePath(name).stem:
        name = PurePath(name).stem
    return scrub_text(name)[:_LABEL_CHARS]


__all__ = ["REDACTED", "JsonValue", "run_labels", "scrub_secrets", "scrub_text"]

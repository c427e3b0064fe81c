"""Run metadata: secrets scrubbed from a stranger's metadata block, and the labels a run is named by (hand-written inputs)."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from portscope.ingest.run_metadata import REDACTED, run_labels, scrub_secrets, scrub_text

# fake secrets, shaped like real ones
HF = "hf_" + "a1B2c3D4e5" * 3 + "xyzw"  # 34 characters after "hf_", as Hugging Face's
GHP = "ghp_" + "Z9y8X7w6V5" * 3 + "u4T3s2"  # 36 after "ghp_"
SK = "sk-proj-" + "Qq1Ww2Ee3Rr4" * 2
AWS = "AKIA" + "ABCDEFGHIJ234567"


def test_secret_keys_are_dropped_at_any_depth_whatever_they_hold() -> None:
    metadata = {
        "experiment": {"repo_id": "org/model", "hub_token": "anything", "Api_Key": 12345},
        "system": {
            "env": {"HF_TOKEN": HF, "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x" * 40, "DB_PASSWD": "p"},
            "services": [{"name": "s3", "credentials": {"user": "u", "pass": "p"}, "region": "eu"}],
        },
        "Authorization": "Bearer abc",
        "my_password": None,
        "steps": 3,
    }
    assert scrub_secrets(metadata) == {
        "experiment": {"repo_id": "org/model"},
        "system": {"env": {"HOME": "/root"}, "services": [{"name": "s3", "region": "eu"}]},
        "steps": 3,
    }


def test_tokens_and_url_credentials_in_text_are_redacted() -> None:
    metadata = {
        "command": f"python bench.py --hub {HF} --gh {GHP}",
        "remote": "https://alice:s3cr3t@github.com/org/repo.git",
        "mirror": "https://oauth2:abcdef@gitlab.example.com:8443/x?y=1",
        "openai": [SK, AWS],
        "env_list": ["PATH=/usr/bin", "GH_TOKEN=" + "short", "HOME=/root"],
        "plain": "https://github.com/org/repo.git",  # no credentials: unchanged
        "packages": ["hf_transfer==0.1.9", "hf-xet==1.1.5", "sk-learn-ish==1.0", "task-abcdefghijklmnopqrstuvwxyz"],
        "numbers": [1, 2.5, True, None],
    }
    assert scrub_secrets(metadata) == {
        "command": f"python bench.py --hub {REDACTED} --gh {REDACTED}",
        "remote": f"https://{REDACTED}@github.com/org/repo.git",
        "mirror": f"https://{REDACTED}@gitlab.example.com:8443/x?y=1",
        "openai": [REDACTED, REDACTED],
        "env_list": ["PATH=/usr/bin", f"GH_TOKEN={REDACTED}", "HOME=/root"],
        "plain": "https://github.com/org/repo.git",
        "packages": ["hf_transfer==0.1.9", "hf-xet==1.1.5", "sk-learn-ish==1.0", "task-abcdefghijklmnopqrstuvwxyz"],
        "numbers": [1, 2.5, True, None],
    }


def test_scrubbing_copies_and_leaves_the_input_alone() -> None:
    metadata = {"a": {"b": [1, {"c": "d"}]}, "token": HF}
    before = copy.deepcopy(metadata)
    out = scrub_secrets(metadata)
    assert out == {"a": {"b": [1, {"c": "d"}]}}
    out["a"]["b"][1]["c"] = "changed"  # type: ignore[index]
    assert metadata == before
    assert scrub_text(f"{AWS}/{AWS}") == f"{REDACTED}/{REDACTED}"
    assert scrub_secrets((1, "x")) == [1, "x"]  # tuples come back as lists (JSON arrays)


def test_the_real_fixtures_token_is_gone(shared_fixtures: Path) -> None:
    """The BERT H100 trace's metadata block (a benchmark harness's) holds HF_TOKEN under system.env."""
    path = shared_fixtures / "kineto" / "bert_small_h100.json.gz"
    top = {k: v for k, v in json.loads(gzip.decompress(path.read_bytes())).items() if k != "traceEvents"}
    assert top["metadata"]["system"]["env"]["HF_TOKEN"]
    kept = scrub_secrets(top)
    assert "HF_TOKEN" not in json.dumps(kept) and "hf_REDACTED" not in json.dumps(kept)
    assert kept["metadata"]["system"]["env"]["HOME"] == "/root"  # the rest of the environment stays
    assert run_labels(kept, path.name) == {"model": "gaunernst/bert-small-uncased", "torch_version": "2.6.0+cu124"}


@pytest.mark.parametrize(
    ("metadata", "file_name", "labels"),
    [
        # a harness's block, as the trace's top-level keys (the reader's input) or the block alone
        ({"metadata": {"experiment": {"repo_id": "meta-llama/Llama-3.2-1B"},
                       "system": {"torch_env_info": {"torch_version": "2.6.0+cu124"}}}, "schemaVersion": 1},
         "run.json.gz", {"model": "meta-llama/Llama-3.2-1B", "torch_version": "2.6.0+cu124"}),
        ({"experiment": {"repo_id": "Qwen/Qwen2.5-0.5B"}, "system": {"torch_env_info": {"torch_version": "2.5.1"}}},
         "x.json", {"model": "Qwen/Qwen2.5-0.5B", "torch_version": "2.5.1"}),
        # other obvious keys
        ({"model_name_or_path": "gpt2", "torch_version": "2.4.0"}, "x.json", {"model": "gpt2", "torch_version": "2.4.0"}),
        ({"model": {"name": "bert-base-uncased"}, "versions": {"torch": "2.7.0"}}, "x.json",
         {"model": "bert-base-uncased", "torch_version": "2.7.0"}),
        ({"model_id": "  org/m  "}, "x.json", {"model": "org/m", "torch_version": None}),
        # nothing usable: the file's name without its trace suffixes
        ({}, "bert_small_h100.json.gz", {"model": "bert_small_h100", "torch_version": None}),
        ({"model": 7, "experiment": {"repo_id": ""}}, "/tmp/up/host_1234.1700000000.pt.trace.json",
         {"model": "host_1234.1700000000", "torch_version": None}),
        ({"schemaVersion": 1}, "trace", {"model": "trace", "torch_version": None}),
        # a label never carries a secret
        ({"model_name_or_path": f"https://user:{HF}@hf.co/org/m"}, "x.json",
         {"model": f"https://{REDACTED}@hf.co/org/m", "torch_version": None}),
    ],
)
def test_run_labels(metadata: dict, file_name: str, labels: dict) -> None:
    assert run_labels(metadata, file_name) == labels


def test_a_label_is_at_most_200_characters() -> None:
    assert run_labels({"model": "m" * 500}, "x.json")["model"] == "m" * 200

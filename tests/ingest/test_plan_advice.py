"""A plan that does not fit says by how much and which setting to change (`ingest/plan_report.fit_advice`); figures
worked out by hand for Llama-3.2-1B under static-llm-npu (17,179,869,184 B of device memory, weights at 8 bits:
1,235,814,400 B; its KV cache is 32,768 B per position of one sequence)."""

from __future__ import annotations

from portscope.ingest.plan_report import fit_advice

MEMORY, WEIGHTS, PER_POSITION = 17_179_869_184, 1_235_814_400, 32_768


def row(seq: int, batch: int, memory: int | None = MEMORY, weights: int = WEIGHTS) -> dict:
    kv = PER_POSITION * seq * batch
    return {"max_sequence_length": seq, "max_cache_length": seq, "batch_size": batch, "weight_bytes": weights,
            "kv_cache_bytes": kv, "device_memory_bytes": weights + kv, "memory_bytes": memory,
            "fits": None if memory is None else weights + kv <= memory}  # fmt: skip


def test_margin_and_what_to_change() -> None:
    rows = [row(4096, 1), row(4096, 64), row(131072, 64)]
    # room for the KV cache: 17,179,869,184 - 1,235,814,400 = 15,944,054,784 B
    # 4096 x 64: 8,589,934,592 B of KV cache, 7,354,120,192 B free (7.4 GB); 131072 x 64: 274,877,906,944 B, over by
    # 258,933,852,160 B; one sequence of 131072 positions is 4,294,967,296 B: 3 fit; at batch 64 one position is
    # 2,097,152 B: 7,602 positions fit
    assert fit_advice(rows, 8) == [
        "smallest margin: 7.4 GB free at seq 4096 batch 64",
        "seq 131072 batch 64 does NOT fit: 258.9 GB over; fits with batch 3 or less, or cache length 7602 or less at batch 64",
    ]


def test_weights_alone_too_big_and_unknown_memory() -> None:
    # 1,000,000,000 B of device memory under 1,235,814,400 B of 8-bit weights (+ 134,217,728 B of KV cache: 370,032,128
    # B over); 8 x 1e9 // 1,235,814,400 = 6 bits
    assert fit_advice([row(4096, 1, memory=1_000_000_000)], 8) == [
        "seq 4096 batch 1 does NOT fit: 370.0 MB over; the weights alone exceed the device: weights at 6 bits or fewer "
        "would leave room"]
    assert fit_advice([row(4096, 1, memory=None)], 8) == []


def test_activations_count_against_the_batch_but_not_the_cache_length() -> None:
    # seq 4096 batch 64 with 167,772,160 B of activations per sequence (10,737,418,240 B in all): 1,235,814,400 +
    # 8,589,934,592 + 10,737,418,240 = 20,563,167,232 B, 3,383,298,048 B over; a sequence needs 134,217,728 +
    # 167,772,160 = 301,989,888 B: 15,944,054,784 // that = 52; the cache keeps 15,944,054,784 - 10,737,418,240 =
    # 5,206,636,544 B at 2,097,152 B a position: 2,482 positions
    r = row(4096, 64)
    r["device_memory_bytes"] += 167_772_160 * 64
    r["fits"] = False
    assert fit_advice([r], 8) == [
        "seq 4096 batch 64 does NOT fit: 3.4 GB over; fits with batch 52 or less, or cache length 2482 or less at batch 64"]

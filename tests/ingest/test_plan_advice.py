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

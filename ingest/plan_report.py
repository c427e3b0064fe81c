"""The text of a static-shape plan (`portscope plan`'s table), for `plan` and `report` alike."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .catalog import SourceKind, format_bytes
from .trace import RunInfo

_COLUMNS = ("seq", "cache", "batch", "weights", "KV cache", "memory", "fits", "programs", "padding", "refused",
            "prefill", "decode/token", "h2d/token", "d2h/token")
_TIMED = ("prefill", "decode/token")


def format_plan(table: pa.Table, info: RunInfo) -> str:
    """One line per (sequence, batch); times say where their figures come from (datasheet, measured, assumed)."""
    rows = table.to_pylist()
    model = info.model
    lines = [f"{model.get('class', 'model')}: {model.get('parameters', 0):,} parameters, {model.get('layers', '?')} layers, "
             f"{model.get('kv_heads', '?')} KV heads x {model.get('head_dim', '?')}  |  target {info.target or '?'}"]
    source = next((r["cost_source"] for r in rows if r["cost_source"]), SourceKind.ASSUMED.value)
    table_rows = [tuple(f"{c} ({source})" if c in _TIMED else c for c in _COLUMNS)]
    table_rows += [_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in table_rows) for i in range(len(_COLUMNS))]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in table_rows]
    if rows:
        bits = (info.config.get("static_shapes") or {}).get("weight_bits", "?")
        memory = rows[0]["memory_bytes"]
        lines.append(f"memory = weights at {bits} bits + KV cache + activations (an estimate: the prefill program's widest "
                     f"layer, attention fused); device memory "
                     f"{format_bytes(memory) if memory is not None else 'unknown'}. "
                     f"Times from the {source} engine figures of {info.target or 'the target'}.")
        lines += fit_advice(rows, bits)
        late = [r for r in rows if r["prompts_over_cache"]]
        if late:
            lines.append("prompts whose generation runs past the cache: " + ", ".join(
                f"seq {r['max_sequence_length']} batch {r['batch_size']}: {r['prompts_over_cache']}" for r in late))
    return "\n".join(lines)


def fit_advice(rows: list[dict[str, Any]], weight_bits: Any) -> list[str]:
    """The smallest margin among the settings that fit, and for each that does not: by how much, and which setting
    to change to fit (the KV cache grows with batch x cache length, the weights with their bits)."""
    out: list[str] = []
    known = [r for r in rows if r["memory_bytes"] is not None]
    fitting = [r for r in known if r["fits"]]
    if fitting:
        tight = min(fitting, key=lambda r: r["memory_bytes"] - r["device_memory_bytes"])
        out.append(f"smallest margin: {format_bytes(tight['memory_bytes'] - tight['device_memory_bytes'])} free at seq "
                   f"{tight['max_sequence_length']} batch {tight['batch_size']}")  # fmt: skip
    for r in (r for r in known if r["fits"] is False):
        memory, weights, kv = r["memory_bytes"], r["weight_bytes"], r["kv_cache_bytes"]
        activations = max(r["device_memory_bytes"] - weights - kv, 0)  # a plan written before activations: 0
        batch, cache = r["batch_size"], r["max_cache_length"]
        text = f"seq {r['max_sequence_length']} batch {batch} does NOT fit: {format_bytes(weights + kv + activations - memory)} over; "
        room = memory - weights
        if room <= 0:
            text += "the weights alone exceed the device"
            if isinstance(weight_bits, int) and weights:
                bits = int(weight_bits * memory // weights)
                text += f": weights at {bits} bits or fewer would leave room" if bits >= 1 else ""
            out.append(text)
            continue
        per_sequence = (kv + activations) // batch if batch else kv + activations  # one sequence's KV cache and activations
        per_position = kv // (batch * cache) if batch and cache else 0  # one position of one sequence's KV cache
        options = []
        if per_sequence and room // per_sequence >= 1:
            options.append(f"batch {room // per_sequence} or less")
        if per_position and (room - activations) // (per_position * batch) >= 1:
            options.append(f"cache length {(room - activations) // (per_position * batch)} or less at batch {batch}")
        out.append(text + ("fits with " + ", or ".join(options) if options else "no batch or cache length fits these weights"))
    return out


def _cells(r: dict[str, Any]) -> tuple[str, ...]:
    return (
        str(r["max_sequence_length"]), str(r["max_cache_length"]), str(r["batch_size"]), format_bytes(r["weight_bytes"]),
        format_bytes(r["kv_cache_bytes"]), format_bytes(r["device_memory_bytes"]),
        "?" if r["fits"] is None else ("yes" if r["fits"] else "NO"), str(r["programs"]),
        "-" if r["padding_waste"] is None else f"{r['padding_waste']:.1%}",
        "-" if not r["prompts"] else f"{r['prompts_over_sequence']}/{r['prompts']}",
        _ms(r["prefill_ns"]), _ms(r["decode_ns_per_token"]), format_bytes(r["h2d_bytes_per_token"]),
        format_bytes(r["d2h_bytes_per_token"]),
    )


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f} ms"


def _calls(n: int) -> str:
    return f"{n} call" + ("" if n == 1 else "s")


def static_shapes_line(info: RunInfo) -> str | None:
    """For a run predicted under a static-shape target: its programs and the memory they reserve."""
    config = info.config
    static = config.get("static_shapes") if isinstance(config, dict) else None
    if not isinstance(static, dict) or "program_calls" not in config:
        return None
    calls = config["program_calls"]
    text = (f"static shapes: 2 programs, prefill {static['batch_size']}x{static['max_sequence_length']} "
            f"({_calls(calls.get('prefill', 0))}) and decode {static['batch_size']}x1 over a "
            f"{static['max_cache_length']}-position cache ({_calls(calls.get('decode', 0))}); KV cache on the device")
    if "kv_cache_bytes" in config:
        memory = static.get("memory_bytes")
        fits = "" if config.get("fits") is None else (" (fits)" if config["fits"] else " (does NOT fit)")
        text += (f" ({format_bytes(config['kv_cache_bytes'])} reserved); device memory "
                 f"{format_bytes(config['device_memory_bytes'])} with weights at {static['weight_bits']} bits"
                 + (f" of {format_bytes(memory)}{fits}" if memory else ""))
    return text

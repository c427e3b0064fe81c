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
        lines.append(f"memory = weights at {bits} bits + KV cache; device memory "
                     f"{format_bytes(memory) if memory is not None else 'unknown'}. "
                     f"Times from the {source} engine figures of {info.target or 'the target'}.")
        late = [r for r in rows if r["prompts_over_cache"]]
        if late:
            lines.append("prompts whose generation runs past the cache: " + ", ".join(
                f"seq {r['max_sequence_length']} batch {r['batch_size']}: {r['prompts_over_cache']}" for r in late))
    return "\n".join(lines)


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

"""Regenerate the broken-trace fixtures and expected.json: python tests/broken_traces/make_broken.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "ingest"))

from fulltrace import full_trace  # noqa: E402

from portscope.ingest.container import write_members  # noqa: E402
from portscope.ingest.schema import TABLES  # noqa: E402
from portscope.ingest.trace import write_trace  # noqa: E402


def members(trace, manifest_patch=None, drop=(), replace=None):  # noqa: ANN001, ANN201
    replace = replace or {}
    manifest = {"format": "portscope-trace", "version": 1, "run_info": trace.run_info.to_json(),
                "tables": {n: trace[n].num_rows for n in TABLES}}
    manifest.update(manifest_patch or {})
    out = [("manifest.json", json.dumps(manifest).encode())]
    for name in TABLES:
        if name in drop:
            continue
        if name in replace and isinstance(replace[name], bytes):
            out.append((f"{name}.arrow", replace[name]))
            continue
        table = replace.get(name, trace[name])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        out.append((f"{name}.arrow", sink.getvalue()))
    return out


def main() -> None:
    t = full_trace()
    good = write_trace(t, HERE / "_good.tmp")
    data = good.read_bytes()
    good.unlink()
    expected: dict[str, list[str]] = {}

    def raw(name: str, payload: bytes, *messages: str) -> None:
        (HERE / name).write_bytes(payload)
        expected[name] = list(messages)

    def zipped(name: str, ms, *messages: str) -> None:  # noqa: ANN001
        write_members(HERE / name, ms)
        expected[name] = list(messages)

    raw("empty.arrow", b"", "empty (0 bytes)")
    raw("not_a_zip.arrow", b"hello, this is a CSV file\n1,2,3\n" * 10, "not a ZIP container")
    raw("truncated.arrow", data[: len(data) // 2], "truncated")
    raw("binary_junk.arrow", bytes(range(256)) * 8, "not a ZIP container")
    zipped("newer_version.arrow", members(t, {"version": 99}), "format version 99 is newer")
    zipped("wrong_format.arrow", members(t, {"format": "something-else"}), "expected 'portscope-trace'")
    zipped("bad_version.arrow", members(t, {"version": "one"}), "unknown format version 'one'")
    zipped("missing_table.arrow", members(t, drop=("signals",)), "table 'signals' is missing")
    ops = t["ops"]
    zipped("missing_column.arrow", members(t, replace={"ops": ops.drop_columns(["dur_ns"])}),
           "column 'dur_ns' is missing")
    zipped("repeated_column.arrow", members(t, replace={"ops": ops.append_column("dur_ns", ops.column("dur_ns"))}),
           "column names appear more than once: ['dur_ns']")
    mistyped = ops.set_column(ops.schema.get_field_index("start_ns"), "start_ns", pa.array(["0", "1"]))
    zipped("mistyped_column.arrow", members(t, replace={"ops": mistyped}), "column 'start_ns' has type string")
    negative = ops.set_column(ops.schema.get_field_index("dur_ns"), "dur_ns", pa.array([-5, 1], pa.int64()))
    zipped("negative_duration.arrow", members(t, replace={"ops": negative}), "negative 'dur_ns'")
    sig = t["signals"]
    dangling = sig.set_column(sig.schema.get_field_index("region_id"), "region_id", pa.array([99], pa.int32()))
    zipped("dangling_region.arrow", members(t, replace={"signals": dangling}), "'region_id' that points nowhere (e.g. 99)")
    bad_kind = sig.set_column(sig.schema.get_field_index("kind"), "kind",
                              pa.array(["dispatch/teleport"]).dictionary_encode())
    zipped("unknown_signal_kind.arrow", members(t, replace={"signals": bad_kind}), "unknown values ['dispatch/teleport']")
    zipped("corrupt_member.arrow", members(t, replace={"ops": b"ARROW1\x00\x00garbage" * 10}),
           "table 'ops' is not a readable Arrow IPC file")
    ms = members(t)
    ms[0] = ("manifest.json", b"{not json")
    zipped("bad_manifest.arrow", ms, "manifest.json is not valid JSON")
    zipped("no_manifest.arrow", members(t)[1:], "no manifest.json")
    zipped("several_problems.arrow", members(t, replace={"ops": negative, "signals": dangling.set_column(
        sig.schema.get_field_index("kind"), "kind", pa.array(["x"]).dictionary_encode())}),
        "negative 'dur_ns'", "points nowhere", "unknown values ['x']")
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

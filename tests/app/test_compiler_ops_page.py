"""The region page of a cold torch.compile: the program's operators counted, those the compiler ran apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from portscope.app.context import store
from portscope.app.pages import region, region_device
from portscope.ingest import read_trace, write_trace
from portscope.ingest.convert import load_any
from portscope.ingest.summary import region_ids

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kineto" / "cpu_cold_compile.json.gz"


def _texts(component: Any) -> str:
    if component is None:
        return ""
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(_texts(c) for c in component)
    return _texts(getattr(component, "children", None))


def test_the_region_page_counts_the_programs_operators_and_the_compilers_apart(make_app, tmp_path: Path) -> None:
    # cpu_cold_compile.json.gz: "cold" holds 3154 cpu_ops, 3133 of them inside the compiler's spans (counted from the
    # raw JSON: tests/ingest/test_compiled_code.py), 21 the program's; "warm" 18, all the program's.
    folder = tmp_path / "runs"
    folder.mkdir()
    path = write_trace(load_any(FIXTURE), folder / "cold.arrow")
    run_id = read_trace(path).content_hash()
    app = make_app(trace_paths=(folder,))
    with app.server.test_request_context("/"):
        page = _texts(region.layout(run_id=run_id, region="cold", n="0"))
        assert "21 ops (+3,133 run by the compiler) · mode compiled" in page
        assert "All 3,154 ops (paged from the server; 3,133 of them placed compiler" in page
        ops, _, _, _ = region_device.tables(run_id, region_ids(store().trace(run_id), "cold")[0])
        assert int(ops["calls"].sum()) == 21 and "dynamo" not in set(ops["operator"])
        assert "18 ops · mode compiled" in _texts(region.layout(run_id=run_id, region="warm", n="0"))

"""Long names (a 248-character upload, a templated kernel) are cut with an ellipsis where the runs page, the run page
and the compare page's critical path show them, and whole in their element's title (shown on hover).

The cut itself is CSS (`.long-name` in assets/portscope.css); tests/app/test_timeline_view_browser.py measures the
pages in Chromium.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from dash import dcc, html

from portscope.app import ids
from portscope.app.pages import compare_schedules, run, runs
from portscope.app.shell import session_entries
from portscope.ingest import TraceBuilder, read_trace
from portscope.ingest.schedule_diff import diff_schedules
from portscope.ingest.schema import EngineKind, SliceKind, Source
from portscope.ingest.trace import RunInfo

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
LONG = ("a_very_long_upload_name_from_a_tester_" + "x" * 250)[:242] + ".arrow"  # 248 characters
KERNEL = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(" + "p" * 300 + ")"


def walk(node: Any) -> list[Any]:
    """Every component under a layout node, depth first."""
    out = [node]
    children = getattr(node, "children", None)
    for child in children if isinstance(children, list | tuple) else [children] if children is not None else []:
        if hasattr(child, "to_plotly_json"):
            out += walk(child)
    return out


def cut(component: Any, text: str) -> bool:
    """The component shows `text` as a long name: cut by the stylesheet, whole in its title."""
    return component.className == "long-name" and component.title == text and component.children == text


def test_a_long_file_name_is_cut_on_the_runs_and_run_pages(make_app, tmp_path: Path) -> None:
    assert len(LONG) == 248
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(SAMPLES / "bert_small_h100.arrow", folder / LONG)
    run_id = read_trace(folder / LONG).content_hash()
    app = make_app(trace_paths=(folder,))
    with app.server.test_request_context("/"):
        rows, _ = runs.runs_rows(None)
        cells = runs.run_cells(rows[0])
        link = cells["open"].children[0]
        assert isinstance(link, dcc.Link) and cut(link, LONG)
        assert cells["model"].title == "gaunernst/bert-small-uncased" and cells["model"].className == "long-text"
        page = run.layout(run_id=run_id)
        subtitle = next(c for c in walk(page) if getattr(c, "id", None) == ids.RUN_FILE)
        assert cut(subtitle, LONG)
        model = next(c for c in walk(page) if getattr(c, "id", None) == ids.RUN_MODEL)
        assert cut(model, "gaunernst/bert-small-uncased")
        regions = [c for c in walk(page) if isinstance(c, dcc.Link) and c.href and "/region/" in c.href]
        assert regions and all(cut(link, link.children) for link in regions)
    # the names this browser uploaded the run under, once known, keep their titles whole
    kept = session_entries([[run_id, LONG]])[0][1]  # the name as the browser's list keeps it (its first 200 characters)
    shown = run.names_update({"run_id": run_id, "file": f"{run_id}.arrow", "model_from_file": True}, [[run_id, LONG]])
    assert shown[0] == shown[1] == f"uploaded as {kept} · {run_id}.arrow"
    assert shown[2] == shown[3] == kept and len(kept) > 150


def test_a_long_kernel_name_is_cut_in_the_critical_path_table() -> None:
    def schedule(name: str, dur: int) -> Any:
        b = TraceBuilder(RunInfo(source=Source.CONVERTED, converted_from="kineto"))
        rid = b.add_region("step", start_ns=0, dur_ns=1_000)
        b.engine_slices.append(region_id=rid, engine="stream 7", engine_kind=EngineKind.STREAM, kind=SliceKind.COMPUTE,
                               name=name, start=0, dur=dur)
        return b.build()

    diff = diff_schedules(schedule(KERNEL, 100), 0, schedule("attn_fwd", 50), 0)
    table = next(c for c in compare_schedules.tables(diff) if getattr(c, "id", None) == ids.COMPARE_SCHEDULE_CRITICAL)
    names = [c for c in walk(table) if isinstance(c, html.Span) and c.className == "long-name"]
    assert sorted(n.title for n in names) == sorted([KERNEL, "attn_fwd"]) and all(cut(n, n.title) for n in names)

"""An upload is converted from a temporary copy: the run is the run of the file the user gave."""

from __future__ import annotations

from pathlib import Path

from portscope.ingest.convert import load_any


def test_an_uploaded_copy_of_any_format_is_the_run_of_its_file(tmp_path: Path) -> None:
    # an upload is converted from a temporary copy ("26306-abc.part"): the run is named and identified as the file
    # the user gave, whichever name its reader gives the run (a CSV's without extensions, a log's with them)
    fixtures = Path(__file__).parents[1] / "fixtures"
    kernels = tmp_path / "kernel_details.csv"
    kernels.write_text("Step Id,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
                       "1,2,aclnnMatmul_MatMulV2,MatMulV2,AI_CORE,1736413971558972.912,185.504\n")
    for given in (kernels, fixtures / "torch_trace" / "graph_breaks_small.log"):
        copies = [tmp_path / "26306-abc.part", tmp_path / "99-def.part.log"]
        for copy in copies:
            copy.write_bytes(given.read_bytes())
        runs = [load_any(copy, name=given.name) for copy in copies]
        assert {r.content_hash() for r in runs} == {load_any(given).content_hash()}
        assert runs[0]["regions"].to_pydict()["name"][0] == load_any(given)["regions"].to_pydict()["name"][0]

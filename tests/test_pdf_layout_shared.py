"""The layout-model path on the shared PDFs with docling's ground truth (the `shared_data`
fixture: ../shared/data): the acceptance figures of issue 11, as benchmarks/structure.py
prints them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
# the cases, found when collecting; none found (no shared data), one case that asks for it
GROUND_TRUTH = sorted(
    p.relative_to(SHARED_DATA).as_posix()
    for folder in ("pdfs", "pdf-layout")
    for p in (SHARED_DATA / folder).glob("*.groundtruth.md")
) or ["no-ground-truth-found"]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_structure", ROOT / "benchmarks/structure.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", GROUND_TRUTH, ids=lambda n: n.split("/")[-1].split(".ground")[0])
def test_headings_and_reading_order_against_docling(shared_data: Path, name: str):
    gt = shared_data / name
    pdf = gt.with_name(gt.name.replace(".groundtruth.md", ".pdf"))
    assert gt.is_file() and pdf.is_file(), f"{gt} and its PDF"
    bench = _bench()
    st, _ = bench.parse_file(pdf, "layout")
    pred = [bench.norm(n["text"]) for n in st.nodes if n["node_type"] in ("HEADING", "TITLE")]
    p, r, _ = bench.prf(pred, bench.gt_headings(gt))
    assert p >= 0.9 and r >= 0.9, (p, r, pred)
    order, found = bench.order_agreement(bench.gt_paragraphs(gt), [n["text"] for n in st.nodes])
    assert order >= 0.9, (order, found)


def test_multi_column_footnotes_all_linked(shared_data: Path):
    pdf = shared_data / "pdfs" / "multi-column.pdf"
    st, _ = _bench().parse_file(pdf, "layout")
    notes = {n["id"] for n in st.nodes if n["node_type"] == "NOTE"}
    linked = {e["target_id"] for e in st.edges if e["type"] == "REFERENCES_NOTE"}
    assert len(notes) >= 9 and linked == notes
    caps = {n["id"] for n in st.nodes if n["node_type"] == "CAPTION"}
    captioned = {e["target_id"] for e in st.edges if e["type"] == "IS_CAPTIONED_BY"}
    assert len(caps) == 8 and captioned == caps

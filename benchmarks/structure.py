"""Structure benchmark: heading precision/recall against docling's ground truth, node counts,
linked footnotes, page labels and time per page for every PDF in the shared data."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.ids import sha256_hex  # noqa: E402
from pipeline.structure.crossrefs import cross_references  # noqa: E402
from pipeline.structure.pdf import parse_pdf  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def norm(text: str) -> str:
    text = text.replace("\\_", "_")
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def gt_headings(md: Path) -> list[str]:
    return [
        norm(ln.lstrip("#"))
        for ln in md.read_text(encoding="utf-8").splitlines()
        if ln.startswith("#")
    ]


def prf(pred: list[str], gold: list[str]) -> tuple[float, float, int]:
    g = Counter(gold)
    p = Counter(pred)
    hit = sum((g & p).values())
    return (hit / len(pred) if pred else 0.0, hit / len(gold) if gold else 0.0, hit)


def parse_file(path: Path):  # noqa: ANN201
    data = path.read_bytes()
    doc = {
        "id": sha256_hex(data),
        "source_path": path.name,
        "title": path.stem,
        "text": "",
        "sha256": sha256_hex(data),
    }
    t = time.perf_counter()
    st = parse_pdf(doc, data)
    return st, time.perf_counter() - t


def main() -> None:
    folder = DATA / "pdfs"
    for path in sorted(folder.glob("*.pdf")):
        st, secs = parse_file(path)
        meta = json.loads(st.sections[0]["metadata"])
        n_pages = meta["pages"]
        types = Counter(n["node_type"] for n in st.nodes)
        notes = sum(1 for n in st.nodes if n["node_type"] == "NOTE")
        linked = len({e["target_id"] for e in st.edges if e["type"] == "REFERENCES_NOTE"})
        labelled = len({p["page"] for n in st.nodes for p in n["positions"] if p["page_label"]})
        print(f"== {path.name}: {n_pages} pages, {secs / n_pages * 1000:.1f} ms/page")
        print(f"   nodes by type: {dict(sorted(types.items()))}")
        print(
            f"   sections: {len(st.sections)}; edges: {dict(Counter(e['type'] for e in st.edges))}"
        )
        xrefs = len(cross_references(st))  # build_structure adds these after parsing
        print(
            f"   footnotes linked: {linked}/{notes}; "
            f"pages with logical labels: {labelled}/{n_pages}; cross-references: {xrefs}"
        )
        if st.warnings:
            print(f"   warnings: {st.warnings[:5]}")
        gt = path.with_suffix("").with_name(path.stem + ".groundtruth.md")
        if gt.exists():
            pred = [norm(n["text"]) for n in st.nodes if n["node_type"] in ("HEADING", "TITLE")]
            gold = gt_headings(gt)
            p, r, hit = prf(pred, gold)
            print(
                f"   headings: precision {p:.3f} recall {r:.3f} "
                f"({hit} of {len(pred)} predicted, {len(gold)} gold)"
            )
            if "-v" in sys.argv:
                print("   missed:", sorted((Counter(gold) - Counter(pred)).elements()))
                print("   extra:", sorted((Counter(pred) - Counter(gold)).elements()))
        if path.name == "multi-column.pdf":
            paras = [
                n["text"]
                for n in st.nodes
                if n["node_type"] == "PARAGRAPH" and n["positions"][0]["page"] == 2
            ]
            print("   first 3 paragraphs of page 2:")
            for t in paras[:3]:
                print(f"     - {t[:300]}")
    links = ROOT / "benchmarks" / "markdown_links.py"
    if links.exists():
        spec = importlib.util.spec_from_file_location("markdown_links", links)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        for line in mod.run(DATA / "markdown" / "pydantic" / "docs"):
            print(line)


if __name__ == "__main__":
    main()

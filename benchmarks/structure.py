"""Structure benchmark on every PDF of the shared data (pdfs/ and pdf-layout/): section-title
precision/recall and paragraph reading order against docling's ground truth
(*.groundtruth.md), captions and footnotes linked, page labels, cross-references, ms/page.

    python benchmarks/structure.py [--mode layout|heuristic] [-v] [--no-links]

Headings: the '#' lines of the ground truth against our HEADING/TITLE nodes (the root
section is no heading). Reading order: each ground-truth paragraph is found in our content
nodes by its normalised opening; "order" is the share of adjacent ground-truth pairs whose
nodes come in the same order (the same node twice counts as in order), "matched" how many
paragraphs were found at all.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.ids import sha256_hex  # noqa: E402
from pipeline.pdf.parse import parse_pdf  # noqa: E402
from pipeline.structure.crossrefs import cross_references  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
FOLDERS = ("pdfs", "pdf-layout")
TEXT_TYPES = ("HEADING", "TITLE")


def norm(text: str) -> str:
    """Lower case, words only. A change between right-to-left and Latin letters is a word
    break: docling writes "و Python" where the PDF has no space glyph ("وPython")."""
    text = text.replace("\\_", "_")
    text = re.sub(r"(?<=[\u0590-\u08ff])(?=[A-Za-z])|(?<=[A-Za-z])(?=[\u0590-\u08ff])", " ", text)
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def squash(text: str) -> str:
    """Letters and digits only: PDFs drop or add spaces where docling did not."""
    return re.sub(r"[\W_]+", "", text.replace("\\_", "_").lower())


def gt_headings(md: Path) -> list[str]:
    return [
        norm(ln.lstrip("#"))
        for ln in md.read_text(encoding="utf-8").splitlines()
        if ln.startswith("#")
    ]


def gt_paragraphs(md: Path) -> list[tuple[str, int]]:
    """Running-text blocks of the ground truth (no headings, lists, tables, images, math),
    each with the number of earlier lines holding its opening: a repeated
    text is matched to the node holding that occurrence."""
    out = []
    earlier: list[str] = []
    for block in re.split(r"\n\s*\n", md.read_text(encoding="utf-8")):
        b = block.strip()
        keep = bool(b) and not b.startswith(("#", "|", "<!--", "$$", "```", "- ", "* "))
        if keep and not re.match(r"^\d+\.\s", b) and len(squash(b)) >= 20:
            head = squash(b)[:40]
            out.append((b, sum(head in e for e in earlier)))
        earlier += [squash(ln) for ln in b.splitlines()]
    return out


def prf(pred: list[str], gold: list[str]) -> tuple[float, float, int]:
    g = Counter(gold)
    p = Counter(pred)
    hit = sum((g & p).values())
    if not pred and not gold:
        return 1.0, 1.0, 0
    return (hit / len(pred) if pred else 0.0, hit / len(gold) if gold else 0.0, hit)


def order_agreement(gold: list[tuple[str, int]], nodes: list[str]) -> tuple[float, int]:
    """(share of adjacent matched gold pairs in order, number of gold paragraphs matched).
    A paragraph whose opening occurs k times before it in the gold is matched to the
    (k+1)-th node holding it."""
    keys = [squash(t) for t in nodes]
    found: list[int] = []
    for para, earlier in gold:
        head = squash(para)[:40]
        hits = [i for i, k in enumerate(keys) if head in k or len(k) >= 20 and k in head]
        if hits:
            found.append(hits[min(earlier, len(hits) - 1)])
    pairs = list(zip(found, found[1:], strict=False))
    if not pairs:
        return 1.0, len(found)
    return sum(a <= b for a, b in pairs) / len(pairs), len(found)


def parse_file(path: Path, mode: str | None = None):  # noqa: ANN201
    data = path.read_bytes()
    doc = {
        "id": sha256_hex(data),
        "source_path": path.name,
        "title": path.stem,
        "text": "",
        "sha256": sha256_hex(data),
    }
    t = time.perf_counter()
    st = parse_pdf(doc, data, mode=mode)
    return st, time.perf_counter() - t


def row(path: Path, mode: str | None, verbose: bool) -> str:
    st, secs = parse_file(path, mode)
    n_pages = st.stats.get("pdf_pages", 1) or 1
    types = Counter(n["node_type"] for n in st.nodes)
    edges = Counter(e["type"] for e in st.edges)
    linked = len({e["target_id"] for e in st.edges if e["type"] == "REFERENCES_NOTE"})
    captioned = len({e["target_id"] for e in st.edges if e["type"] == "IS_CAPTIONED_BY"})
    labelled = len({p["page"] for n in st.nodes for p in n["positions"] if p["page_label"]})
    xrefs = len(cross_references(st))  # build_structure adds these after parsing
    hp = hr = order = "-"
    matched = "-"
    gt = path.with_name(path.stem + ".groundtruth.md")
    if gt.exists():
        pred = [norm(n["text"]) for n in st.nodes if n["node_type"] in TEXT_TYPES]
        gold = gt_headings(gt)
        p, r, _ = prf(pred, gold)
        hp, hr = f"{p:.2f}", f"{r:.2f}"
        paras = gt_paragraphs(gt)
        agree, found = order_agreement(paras, [n["text"] for n in st.nodes])
        order, matched = f"{agree:.2f}", f"{found}/{len(paras)}"
        if verbose:
            print(f"   {path.name} missed:", sorted((Counter(gold) - Counter(pred)).elements()))
            print(f"   {path.name} extra:", sorted((Counter(pred) - Counter(gold)).elements()))
    if verbose:
        print(f"   {path.name} nodes: {dict(sorted(types.items()))}; edges: {dict(edges)}")
        if st.warnings:
            print(f"   {path.name} warnings: {st.warnings[:5]}")
    return (
        f"| {path.name[:28]:28} | {n_pages:5} | {secs / n_pages * 1000:7.1f} | {hp:>4} | {hr:>4} "
        f"| {order:>5} | {matched:>7} | {captioned:>2}/{types['CAPTION']:<2} "
        f"| {linked:>2}/{types['NOTE']:<2} | {labelled:>3} | {xrefs:>5} | {len(st.sections):>4} |"
    )


def main() -> None:
    mode = sys.argv[sys.argv.index("--mode") + 1] if "--mode" in sys.argv else None
    verbose = "-v" in sys.argv
    print(f"mode: {mode or 'default'}")
    print(
        "| pdf                          | pages | ms/page | H P  | H R  | order | matched "
        "| capt. | notes | lab | xrefs | sect |"
    )
    print(f"|{'---|' * 12}")
    for folder in FOLDERS:
        for path in sorted((DATA / folder).glob("*.pdf")):
            print(row(path, mode, verbose))
    links = ROOT / "benchmarks" / "markdown_links.py"
    if links.exists() and "--no-links" not in sys.argv:
        spec = importlib.util.spec_from_file_location("markdown_links", links)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        for line in mod.run(DATA / "markdown" / "pydantic" / "docs"):
            print(line)


if __name__ == "__main__":
    main()

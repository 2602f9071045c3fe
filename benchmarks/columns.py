"""Multi-column PDFs made here from MuSiQue passages, read back against their own text:
two, three and four columns from three producers, each with the exact headings and
paragraphs it was made from as ground truth.

    python benchmarks/columns.py [--work DIR] [-v]

Producers (each one skipped, with a line saying so, when its program is not installed):
- pdflatex (Debian's texlive-latex-base, which has multicol): `twocolumn`
  papers, `multicol` with 2 and 3 columns;
- chromium: HTML printed with CSS `column-count` 3 and 4, narrow gutters, justified and
  ragged;
- soffice (LibreOffice Writer): column sections, and column sections between paragraphs
  across the page (unbalanced columns).

Scores as benchmarks/structure.py: heading precision and recall, paragraph reading order
(share of adjacent ground-truth paragraphs in order) and paragraphs found, for the layout
model (the default) and the heuristic parser (`structure.pdf_structure: heuristic`) side by
side. Session 14 (`pipeline/pdf/layout/gutters.py`, `stripes.py`) measured these
documents before and after its changes.
"""

from __future__ import annotations

import html
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from structure import ROOT, gt_headings, gt_paragraphs, norm, order_agreement, parse_file, prf

CORPUS = ROOT.parent / "shared" / "data" / "musique" / "musique_train_corpus.json"


class Source:
    """Headings and paragraphs drawn from MuSiQue passages by a seeded generator."""

    def __init__(self, seed: int, min_chars: int = 250):
        pool = [c for c in json.loads(CORPUS.read_text()) if len(c["text"]) > min_chars]
        rnd = random.Random(seed)
        self.picks = iter(rnd.sample(pool, 300))

    def title(self) -> str:
        return _ascii(next(self.picks)["title"])

    def text(self) -> str:
        return _ascii(next(self.picks)["text"])


def _ascii(s: str) -> str:
    return " ".join(s.encode("ascii", "ignore").decode().split())


def _sections(src: Source, n: int, per: int) -> list[tuple[str, list[str]]]:
    return [(src.title(), [src.text() for _ in range(per)]) for _ in range(n)]


def _truth(path: Path, title: str, sections: list[tuple[str, list[str]]]) -> None:
    md = [f"# {title}"] + [x for h, ps in sections for x in (f"## {h}", *ps)]
    path.with_suffix(".groundtruth.md").write_text("\n\n".join(md) + "\n")


def latex(out: Path, name: str, seed: int, opts: str, columns: int) -> Path | None:
    """A `twocolumn` paper (columns 0) or `multicol` with `columns` columns."""
    src = Source(seed)
    title = src.title() + " Revisited"
    sections = _sections(src, 8, 2)
    tex = "\n\n".join(
        f"\\section{{{_tex(h)}}}\n\n" + "\n\n".join(map(_tex, ps)) for h, ps in sections
    )
    if columns:
        tex = f"\\begin{{multicols}}{{{columns}}}\n{tex}\n\\end{{multicols}}"
    (out / f"{name}.tex").write_text(
        f"\\documentclass[{opts}]{{article}}\\usepackage[T1]{{fontenc}}\\usepackage{{lmodern}}"
        f"\\usepackage{{multicol}}\\title{{{_tex(title)}}}\\author{{C. Someone}}\\date{{}}"
        f"\\begin{{document}}\\maketitle\n{tex}\n\\end{{document}}\n"
    )
    for _ in range(2):  # twice: as LaTeX settles its layout
        subprocess.run(["pdflatex", "-interaction=batchmode", f"{name}.tex"], cwd=out,
                       capture_output=True, timeout=300)  # fmt: skip
    _truth(out / f"{name}.pdf", title, sections)
    return out / f"{name}.pdf"


def _tex(s: str) -> str:
    return "".join({c: "\\" + c for c in "&%$#_{}"}.get(c, c) for c in s)


def chrome(out: Path, name: str, seed: int, columns: int, gap: int, align: str) -> Path | None:
    src = Source(seed)
    title = src.title() + " Notes"
    sections = _sections(src, 6, 3)
    body = "".join(
        f"<h2>{html.escape(h)}</h2>" + "".join(f"<p>{html.escape(p)}</p>" for p in ps)
        for h, ps in sections
    )
    css = (
        "@page{size:A4;margin:2cm} body{font-family:serif;font-size:9pt;margin:0}"
        f".cols{{column-count:{columns};column-gap:{gap}pt;text-align:{align}}}"
        "h1{text-align:center} h2{font-size:13pt;break-after:avoid}"
    )
    page = out / f"{name}.html"
    page.write_text(
        f"<html><head><meta charset=utf-8><title>{html.escape(title)}</title><style>{css}"
        f"</style></head><body><h1>{html.escape(title)}</h1><div class=cols>{body}</div>"
        "</body></html>"
    )
    pdf = out / f"{name}.pdf"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                    "--no-pdf-header-footer", f"--print-to-pdf={pdf}", str(page)],
                   capture_output=True, timeout=300)  # fmt: skip
    _truth(pdf, title, sections)
    return pdf


def writer(out: Path, name: str, seed: int, columns: int, between: bool) -> Path | None:
    """A Writer document of column sections; `between`: each after a section across the
    page (the columns then end unbalanced)."""
    src = Source(seed)
    title = src.title() + " Report"
    sections, parts = [], []
    for _ in range(3 if between else 1):
        if between:
            sections += _sections(src, 1, 1)
            parts.append(_odt_sections(sections[-1:]))
        inner = _sections(src, 2 if between else 7, 2)
        sections += inner
        parts.append(f'<text:section text:style-name="C" text:name="S{len(parts)}">'
                     f"{_odt_sections(inner)}</text:section>")  # fmt: skip
    ns = " ".join(
        f'xmlns:{k}="urn:oasis:names:tc:opendocument:xmlns:{v}:1.0"'
        for k, v in (("office", "office"), ("style", "style"), ("text", "text"),
                     ("fo", "xsl-fo-compatible"))
    )  # fmt: skip
    styles = (
        f'<style:style style:name="C" style:family="section"><style:section-properties>'
        f'<style:columns fo:column-count="{columns}" fo:column-gap="0.4cm"/>'
        "</style:section-properties></style:style>"
        '<style:style style:name="B" style:family="paragraph"><style:paragraph-properties '
        'fo:text-align="justify" fo:margin-bottom="0.2cm"/><style:text-properties '
        'fo:font-size="9pt"/></style:style>'
        '<style:style style:name="H" style:family="paragraph"><style:paragraph-properties '
        'fo:margin-top="0.3cm" fo:keep-with-next="always"/><style:text-properties '
        'fo:font-size="13pt" fo:font-weight="bold"/></style:style>'
        '<style:style style:name="T" style:family="paragraph"><style:paragraph-properties '
        'fo:text-align="center"/><style:text-properties fo:font-size="22pt" '
        'fo:font-weight="bold"/></style:style>'
    )
    doc = out / f"{name}.fodt"
    doc.write_text(
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {ns} office:version="1.2" '
        'office:mimetype="application/vnd.oasis.opendocument.text"><office:automatic-styles>'
        f"{styles}</office:automatic-styles><office:body><office:text>"
        f'<text:h text:style-name="T" text:outline-level="1">{html.escape(title)}</text:h>'
        f"{''.join(parts)}</office:text></office:body></office:document>"
    )
    subprocess.run(["soffice", "--headless", "--convert-to", "pdf", "--outdir", str(out),
                    str(doc)], capture_output=True, timeout=300)  # fmt: skip
    _truth(out / f"{name}.pdf", title, sections)
    return out / f"{name}.pdf"


def _odt_sections(sections: list[tuple[str, list[str]]]) -> str:
    return "".join(
        f'<text:h text:style-name="H" text:outline-level="2">{html.escape(h)}</text:h>'
        + "".join(f'<text:p text:style-name="B">{html.escape(p)}</text:p>' for p in ps)
        for h, ps in sections
    )


DOCUMENTS = [  # name, producer's program, maker, arguments
    ("tex_twocol", "pdflatex", latex, (31, "twocolumn,10pt", 0)),
    ("tex_multicol2", "pdflatex", latex, (32, "10pt", 2)),
    ("tex_multicol3_a", "pdflatex", latex, (33, "10pt,a4paper", 3)),
    ("tex_multicol3_b", "pdflatex", latex, (34, "11pt,a4paper", 3)),
    ("css3_justified", "chromium", chrome, (41, 3, 10, "justify")),
    ("css3_ragged", "chromium", chrome, (42, 3, 12, "left")),
    ("css4", "chromium", chrome, (43, 4, 8, "justify")),
    ("writer3", "soffice", writer, (51, 3, False)),
    ("writer3_between", "soffice", writer, (52, 3, True)),
    ("writer4_between", "soffice", writer, (53, 4, True)),
]


def score(pdf: Path, mode: str | None) -> tuple[float, float, float, str]:
    st, _ = parse_file(pdf, mode)
    heads = [n["text"] for n in st.nodes if n["node_type"] in ("HEADING", "TITLE")]
    pred = [re.sub(r"^(\d+ )+", "", norm(h)) for h in heads]  # LaTeX numbers its sections
    truth = pdf.with_suffix(".groundtruth.md")
    p, r, _ = prf(pred, gt_headings(truth))
    paras = gt_paragraphs(truth)
    order, found = order_agreement(paras, [n["text"] for n in st.nodes])
    return p, r, order, f"{found}/{len(paras)}"


def main() -> None:
    work = Path(sys.argv[sys.argv.index("--work") + 1]) if "--work" in sys.argv else None
    out = work or Path(tempfile.mkdtemp(prefix="columns-"))
    out.mkdir(parents=True, exist_ok=True)
    print("| pdf | layout H P | H R | order | matched | heuristic H P | H R | order | matched |")
    print(f"|{'---|' * 9}")
    totals: list[tuple[float, ...]] = []
    for name, program, make, args in DOCUMENTS:
        if shutil.which(program) is None:
            print(f"| {name} | {program} not installed: skipped |")
            continue
        pdf = make(out, name, *args)
        if pdf is None or not pdf.exists():
            print(f"| {name} | {program} made no PDF |")
            continue
        cells, row = [], []
        for mode in (None, "heuristic"):
            p, r, order, found = score(pdf, mode)
            cells += [f"{p:.2f}", f"{r:.2f}", f"{order:.2f}", found]
            row += [p, r, order]
        totals.append(tuple(row))
        print(f"| {name} | " + " | ".join(cells) + " |")
    if totals:
        means = [sum(col) / len(totals) for col in zip(*totals, strict=True)]
        cells = [f"{v:.2f}" for v in means]
        print(f"| mean of {len(totals)} | {' | '.join(cells[:3])} | | {' | '.join(cells[3:])} | |")
    if work is None:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()

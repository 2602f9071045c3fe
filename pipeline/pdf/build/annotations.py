"""A PDF's link annotations: internal ones as CROSS_REFERENCES edges, the others as links
(DocStructure.links) that pipeline.structure.links resolves into REFERS_TO edges, as
Markdown's.

LaTeX's hyperref makes every citation, section, figure, table, equation and footnote
reference a link to a destination; a browser's "Save as PDF" keeps a page's anchors and
hrefs. A link's source is the content node under its rectangle. An internal one (GoTo, or a
named destination) points to the first node at or below its destination point on the
target page (in the point's column when it has one): a heading stands for its section, as
in a textual "Section 4.1" reference (pipeline.structure.crossrefs, which leaves out the
pairs a link made); one to a bibliography entry is a REFERENCES_CITATION edge (hyperref
links author-year citations, which edges.py's "[12]" markers miss). None goes to the section
its source is in (a browser's heading anchor links to itself), nor to a footnote (hyperref
gives its destination no point; the markers' REFERENCES_NOTE edges go there). A URI stays an
external link; a link to another file (GoToR, Launch) is its path, relative to this one's
folder as Markdown's are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pymupdf

from pipeline.structure.model import DocStructure
from pipeline.pdf.thresholds import LINK_ABOVE, LINK_COLUMN_SLACK

_INTERNAL = (pymupdf.LINK_GOTO, pymupdf.LINK_NAMED)
_FILES = (pymupdf.LINK_GOTOR, pymupdf.LINK_LAUNCH)
# a link to a bibliography entry is a citation (hyperref links author-year citations too,
# which edges.py's "[12]" markers miss)
_KINDS = {"BIBLIOGRAPHIC_ENTRY": "REFERENCES_CITATION"}


@dataclass
class PdfLink:
    page: int  # 0-based page of the link
    rect: tuple[float, float, float, float]  # where it is, page coordinates (top-left origin)
    text: str
    href: str | None = None  # a URI or a file path
    target: tuple[int, float, float] | None = None  # (0-based page, x, y) in page coordinates


def read_links(pdf: pymupdf.Document) -> list[PdfLink]:
    """Every link of every page that goes somewhere."""
    out: list[PdfLink] = []
    matrices: dict[int, pymupdf.Matrix] = {}  # target page -> PDF to page space
    for pno in range(pdf.page_count):
        page = pdf[pno]
        try:
            found = page.get_links()
            # once a page: get_textbox would read the whole page again for every link
            words = page.get_text("words") if found else []
        except (RuntimeError, ValueError):  # a broken annotation: the page's text still counts
            continue
        for ln in found:
            kind, rect = ln.get("kind"), tuple(ln["from"])
            text = _words_in(words, rect)
            if kind == pymupdf.LINK_URI and ln.get("uri"):
                out.append(PdfLink(pno, rect, text, href=ln["uri"]))
            elif kind in _FILES and ln.get("file"):
                out.append(PdfLink(pno, rect, text, href=ln["file"]))
            elif kind in _INTERNAL and 0 <= ln.get("page", -1) < pdf.page_count:
                to = ln.get("to") or pymupdf.Point(0, 0)
                if kind == pymupdf.LINK_NAMED:  # pymupdf reports a named one in PDF space
                    if ln["page"] not in matrices:
                        matrices[ln["page"]] = pdf[ln["page"]].transformation_matrix
                    to = pymupdf.Point(to) * matrices[ln["page"]]
                out.append(PdfLink(pno, rect, text, target=(ln["page"], to.x, to.y)))
    return out


def _words_in(words: list[tuple], rect: tuple[float, float, float, float]) -> str:
    """The words whose middle lies in `rect`, in reading order."""
    return " ".join(
        w[4]
        for w in words
        if rect[0] <= (w[0] + w[2]) / 2 <= rect[2] and rect[1] <= (w[1] + w[3]) / 2 <= rect[3]
    )


def add_links(out: DocStructure, links: list[PdfLink]) -> None:
    """External links and links to files as `out.links`; internal ones as edges of `out`
    (CROSS_REFERENCES, REFERENCES_CITATION; one per source node and target), from the
    nodes' boxes."""
    boxes: dict[int, list[tuple[tuple[float, float, float, float], dict[str, Any]]]] = {}
    for node in out.nodes:
        for pos in node.get("positions") or ():
            box = (pos["x0"], pos["y0"], pos["x1"], pos["y1"])
            boxes.setdefault(pos["page"] - 1, []).append((box, node))
    seen = {(e["source_id"], e["target_id"], e["type"]) for e in out.edges}
    for link in links:
        source = _under(boxes.get(link.page, []), link.rect)
        if source is None:
            continue
        if link.target is None:
            if (source["id"], link.href, "href") not in seen:
                seen.add((source["id"], link.href, "href"))
                row = {"source_id": source["id"], "href": link.href, "text": link.text}
                out.links.append(row | {"kind": "pdf"})
            continue
        node = _at(boxes.get(link.target[0], []), *link.target[1:])
        if node is None or node is source or node["node_type"] == "NOTE":
            continue  # footnote markers have REFERENCES_NOTE edges (build.edges) already
        kind = _KINDS.get(node["node_type"], "CROSS_REFERENCES")
        # a heading stands for its section, as a textual "Section 4.1" reference's target
        heading = node["node_type"] in ("HEADING", "TITLE")
        target = node["section_id"] if heading else node["id"]
        if (source["id"], target, kind) in seen or target == source["section_id"]:
            continue  # once per pair; none to the section it is in
        seen.add((source["id"], target, kind))
        meta = {
            "kind": "link",
            "target_type": "SECTION" if heading else node["node_type"],
            "page": link.target[0] + 1,
        }
        out.add_edge(source["id"], target, kind, marker_text=link.text, metadata=meta)


def _under(boxes, rect) -> dict[str, Any] | None:
    """The node whose box holds the middle of `rect`, else the one it overlaps most."""
    cx, cy = (rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2
    best, most = None, 0.0
    for (x0, y0, x1, y1), node in boxes:
        if x0 <= cx <= x1 and y0 <= cy <= y1:
            return node
        overlap = max(0.0, min(x1, rect[2]) - max(x0, rect[0])) * max(
            0.0, min(y1, rect[3]) - max(y0, rect[1])
        )
        if overlap > most:
            best, most = node, overlap
    return best


def _at(boxes, x: float, y: float) -> dict[str, Any] | None:
    """The first node starting at or below (x, y): in the column holding x when one does,
    else on the whole page; the page's last node when none is below (a footnote's
    destination may be the page's foot)."""
    below = [(b, n) for b, n in boxes if b[1] >= y - LINK_ABOVE]
    column = [(b, n) for b, n in below if x > 0 and b[0] - LINK_COLUMN_SLACK <= x <= b[2] + LINK_COLUMN_SLACK]
    if column or below:
        return min(column or below, key=lambda bn: (bn[0][1], bn[0][0]))[1]
    return max(boxes, key=lambda bn: (bn[0][3], bn[0][0]))[1] if boxes else None

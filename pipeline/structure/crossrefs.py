"""In-document cross-references -> CROSS_REFERENCES edges.

A paragraph, list item, caption, footnote or quotation that names a figure, table, section,
chapter, appendix or equation of the SAME document by its label ("see Figure 3", "Fig. 3a",
"Tables 5 and 6", "Section 4.1", "§ 2.3", "Appendix A", "Eq. (5)", "рис. 3", "табл. 2",
"разделе 4") gets one edge to the node or section that carries that label. Precision first:
a reference is only linked when its target exists, so no edge ever dangles.

Targets (the *definitions* of labels), per document:
- figure / table: a CAPTION, FIGURE or TABLE node whose text starts with the label
  ("Figure 3: ...", "Table 2-1 Title", "TABLE IV", "Рисунок 2 — ...") followed by a caption
  separator, an upper-case word or the end of the text — "Table 2 compares ..." (a sentence
  the PDF parser took for a caption) is a reference, not a definition. A PARAGRAPH counts
  only with an explicit separator or nothing after the label ("Table 1: Results",
  "**Figure 2.** ...", "Таблица 1"): Markdown and Russian captions are paragraphs.
- section / chapter / appendix: a section whose title is numbered with it ("4.1 Results",
  "3. Method", "A.2 Proofs", "Appendix A: Data", "Chapter 3 ...", "Приложение А"). A bare
  single-letter title ("A Distant Supervision") is an appendix label only when the document
  has the neighbouring letter too (A and B...), so "A Note on Style" is never appendix A.
  Appendix labels are their own key space: "Appendix 2" never resolves to section "2 ...".
- equation: a FORMULA node starting or ending with "(5)", or a FORMULA node or display-math
  paragraph ("$$ ... \\tag{5} $$") holding `\\tag{5}`.
Several candidates for one label: CAPTION/FIGURE/TABLE/FORMULA nodes before caption-like
paragraphs, then the first in reading order (sections: the first in document order).

A node never references itself, nor does a definition's own leading label count as a
reference, nor a node that is nothing but the label ("Chapter 1." printed over a chapter).
References to other works ("Table 2 of Smith et al. (2020)", "Section 3 in [12]") are
skipped. One edge per (source, target): marker_text is the first mention, weight 1.0,
metadata {kind, label, target_type, mentions[, captioned_id]}.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pipeline.structure.model import DocStructure

SOURCE_TYPES = frozenset({"PARAGRAPH", "LIST_ITEM", "CAPTION", "NOTE", "BLOCK_QUOTATION"})
_CAPTION_TYPES = ("CAPTION", "FIGURE", "TABLE")

# Keywords by kind (matched case-insensitively); plural forms allow label ranges "2-4".
_KEYWORDS: dict[str, str] = {
    "figure": r"figures?|figs?\.|fig\b|рис\.|рисун(?:ок|ка|ке|ком|ки|ков|кам|ках|ками)",
    "table": r"tables?|tabs?\.|табл\.|таблиц(?:а|ы|е|у|ей|ам|ах|ами)?",
    "section": (
        r"sections?|sects?\.|secs?\.|§§?|"
        r"подраздел(?:а|е|у|ом|ы|ов|ах|ам|ами)?|раздел(?:а|е|у|ом|ы|ов|ах|ам|ами)?"
    ),
    "chapter": r"chapters?|ch\.|глав(?:а|ы|е|у|ой|ам|ах|ами)",
    "appendix": r"appendix|appendices|приложени(?:е|я|и|ю|ем|ях|ям|ями)",
    "equation": r"equations?|eqs?\.|eqns?\.|eq\b|формул(?:а|ы|е|у|ой|ам|ах|ами)",
}
_PLURAL = re.compile(
    r"^(figures|figs\.|tables|tabs\.|sections|sects\.|secs\.|§§|chapters|"
    r"appendices|equations|eqs\.|eqns\.)$",
    re.I,
)
_NUM = r"\d{1,3}(?:\.\d{1,3})*"
# Labels by kind: figure/table "3", "3a", "2-1", "1.2", "IV"; sections "4.1", "A.2";
# appendices "A", "А" (Cyrillic), "B.1", "2"; equations "5", "(5)", "3.2a".
_LABELS: dict[str, str] = {
    "figure": r"\d{1,3}(?:[.\-–]\d{1,3})*[a-z]?(?!\w|[.\-–]\w)|[IVXLC]{1,6}(?!\w)",
    "table": r"\d{1,3}(?:[.\-–]\d{1,3})*[a-z]?(?!\w|[.\-–]\w)|[IVXLC]{1,6}(?!\w)",
    "section": _NUM + r"(?!\w|\.\w)|[A-ZА-Я](?:\.\d{1,3})+(?!\w|\.\w)",
    "chapter": r"\d{1,3}(?!\w|\.\w)",
    "appendix": r"[A-ZА-Я](?:\.\d{1,3})*(?!\w|\.\w)|" + _NUM + r"(?!\w|\.\w)",
    "equation": r"\(\d{1,3}(?:\.\d{1,3})?[a-z]?\)|\d{1,3}(?:\.\d{1,3})?[a-z]?(?!\w|\.\w)",
}
# Target key spaces a reference kind looks up, in order. Appendices are their own space
# ("Appendix 2" is never section 2); a letter label may be either ("Section A.1", "Appendix
# A.1" both name the heading "A.1 Proofs").
_SPACES = {
    "figure": ("figure",),
    "table": ("table",),
    "section": ("section", "appendix"),
    "chapter": ("section",),
    "appendix": ("appendix", "section"),
    "equation": ("equation",),
}
_SEP = r"[\s\u00a0~]*"
_REF = re.compile(
    "|".join(
        rf"(?<![\w\-])(?P<k_{kind}>(?i:{kw})){_SEP}(?P<l_{kind}>{_LABELS[kind]})"
        for kind, kw in _KEYWORDS.items()
    )
)
_PREFILTER = re.compile(
    r"(?i)fig|tab|sec|sect|§|chapter|ch\.|app|eq|рис|табл|раздел|глав|приложени|формул"
)
_CONT_WORD = r"\s*(?:,|and|&|or|и|или)\s*"
_EXTERNAL = re.compile(
    r"\s+(?:of|in|from|из|в)\s+(?:\[|\(\d|[A-ZА-Я][^\s,.;()]*(?:\s+(?:et\s+al\.?|и\s+др\.?|"
    r"(?:and|&|и)\s+[A-ZА-Я][^\s,.;()]*))?\s*(?:[\[(]?\d{4}|[\[(]\d|,\s*\d{4}))"
)
_BARE = re.compile(r"[\s.,:;()\[\]*_]+")
# Leading markup before a caption in Markdown: emphasis, image alt text, quotes.
_LEAD = re.compile(r"^[\s*_>#!\[(]*")
_CAPTION_DEF = {
    kind: re.compile(rf"^(?i:{_KEYWORDS[kind]}){_SEP}(?P<label>{_LABELS[kind]})")
    for kind in ("figure", "table")
}
_TITLE_KEYWORD = re.compile(
    r"^(?i:(?P<app>appendix|приложение)|section|sect\.|chapter|раздел|глава)\s+"
    r"(?P<label>(?:[A-ZА-Я]|\d{1,3})(?:\.\d{1,3})*)(?!\w|\.\w)"
)
_TITLE_NUMBER = re.compile(r"^(?P<label>" + _NUM + r"|[A-ZА-Я](?:\.\d{1,3})+)(?:\.?\s+\S|\.?$)")
_TITLE_LETTER = re.compile(r"^(?P<label>[A-ZА-Я])[.:]?\s+[A-ZА-Я]")
_DISPLAY_MATH = re.compile(r"^\s*(?:\$\$|\\\[|\\begin\{(?:equation|align|gather))")
_FORMULA_LABEL = (
    re.compile(r"^\s*\((?P<label>\d{1,3}(?:\.\d{1,3})?[a-z]?)\)"),
    re.compile(r"(?:^|[\s,])\((?P<label>\d{1,3}(?:\.\d{1,3})?[a-z]?)\)\s*[.,]?\s*$"),
    re.compile(r"\\tag\{(?P<label>\d{1,3}(?:\.\d{1,3})?[a-z]?)\}"),
)


def _norm_label(label: str) -> str:
    return label.strip("()").replace("–", "-").rstrip(".")


class _Definitions:
    """Label -> (target id, target type) per key space, first definition wins."""

    def __init__(self, doc: DocStructure) -> None:
        self.targets: dict[tuple[str, str], tuple[str, str]] = {}
        self.defined_by: dict[str, set[tuple[str, str]]] = {}  # node id -> keys it defines
        weak: dict[tuple[str, str], tuple[str, str]] = {}  # caption-like paragraphs
        for node in doc.nodes:
            ntype, text = node["node_type"], node["text"] or ""
            if ntype == "FORMULA" or _DISPLAY_MATH.match(text) and ntype in ("PARAGRAPH", "CODE"):
                for pattern in _FORMULA_LABEL:
                    if m := pattern.search(text):
                        self._add(("equation", m.group("label")), node["id"], ntype, self.targets)
                        break
                continue
            if ntype not in (*_CAPTION_TYPES, "PARAGRAPH"):
                continue
            head = _LEAD.sub("", text[:200])
            for kind, pattern in _CAPTION_DEF.items():
                m = pattern.match(head)
                if m is None:
                    continue
                after = head[m.end() :]
                if _defines(after, strict=ntype == "PARAGRAPH"):
                    table = weak if ntype == "PARAGRAPH" else self.targets
                    self._add((kind, _norm_label(m.group("label"))), node["id"], ntype, table)
        for key, value in weak.items():
            self.targets.setdefault(key, value)
        self._sections(doc)

    def _add(self, key: tuple[str, str], node_id: str, ntype: str, table: dict[Any, Any]) -> None:
        key = (key[0], _norm_label(key[1]))
        table.setdefault(key, (node_id, ntype))
        self.defined_by.setdefault(node_id, set()).add(key)

    def _sections(self, doc: DocStructure) -> None:
        letters: list[tuple[str, str]] = []
        appendix_types = set()
        for sec in doc.sections:
            if sec["parent_id"] is None or sec["component_type"] == "NOTE":
                continue
            title = (sec["title"] or "").strip()
            m = _TITLE_KEYWORD.match(title) or _TITLE_NUMBER.match(title)
            if m:
                label = _norm_label(m.group("label"))
                space = "appendix" if m.groupdict().get("app") else "section"
                self.targets.setdefault((space, label), (sec["id"], "SECTION"))
            elif m := _TITLE_LETTER.match(title):
                letters.append((m.group("label"), sec["id"]))
                if sec["component_type"] == "APPENDIX":
                    appendix_types.add(m.group("label"))
        present = {label for label, _ in letters}
        for label, sid in letters:
            prev, nxt = chr(ord(label) - 1), chr(ord(label) + 1)
            if label in appendix_types or prev in present or nxt in present:
                self.targets.setdefault(("appendix", label), (sid, "SECTION"))

    def find(self, kind: str, label: str) -> tuple[tuple[str, str], tuple[str, str]] | None:
        """(key, (target id, target type)) of a label referenced as `kind`, if defined."""
        for space in _SPACES[kind]:
            if space != _SPACES[kind][0] and not label[:1].isalpha():
                break  # numbers stay in their own space
            if (hit := self.targets.get((space, label))) is not None:
                return (space, label), hit
        return None


def _labels(match: re.Match[str], kind: str, text: str, plural: bool) -> tuple[list[str], int]:
    """The labels of one reference ("Tables 5 and 6" -> [5, 6], "Sections 3-5" -> [3, 4, 5])
    and where it ends. Figure and table labels keep their dashes ("Figure 1-2" is one label
    in chapter-numbered books); `_candidates` expands them when plural and unresolved."""
    labels = [match.group(f"l_{kind}")]
    end = match.end()
    more = re.compile(_CONT_WORD + rf"(?P<label>{_LABELS[kind]})")
    rng = re.compile(r"\s*[–\-]\s*" + rf"(?P<label>{_LABELS[kind]})")
    while m := more.match(text, end):
        labels.append(m.group("label"))
        end = m.end()
    if plural and kind not in ("figure", "table") and len(labels) == 1:
        m = rng.match(text, end)
        if m and labels[0].isdigit() and m.group("label").isdigit():
            lo, hi = int(labels[0]), int(m.group("label"))
            if 0 < hi - lo <= 20:
                labels = [str(i) for i in range(lo, hi + 1)]
                end = m.end()
        elif m:  # "Sections 3-3.2": both ends
            labels.append(m.group("label"))
            end = m.end()
    return labels, end


def _defines(after: str, strict: bool) -> bool:
    """Does the text after a caption's leading label make it a definition? A separator or
    nothing ("Table 1:", "Таблица 1"); for CAPTION/FIGURE/TABLE nodes also a word that is not
    lower case ("Table 2-1 FUNCTION_USAGE view"), never a sentence ("Table 2 compares")."""
    rest = after.lstrip("*_] \u00a0")
    if not rest or rest[0] in ":.|—–-":
        return True
    return not strict and not rest[0].islower() and not rest[0].isdigit()


def _candidates(label: str, plural: bool) -> Iterable[list[str]]:
    """Lookup keys to try for one written label, each a list of labels it stands for."""
    norm = _norm_label(label)
    yield [norm]
    if re.fullmatch(r"\d+(?:[.\-]\d+)*[a-z]", norm):  # "3a" -> figure 3
        yield [norm[:-1]]
    if plural and (m := re.fullmatch(r"(\d+)-(\d+)", norm)):  # "Figures 2-4"
        lo, hi = int(m.group(1)), int(m.group(2))
        if 0 < hi - lo <= 20:
            yield [str(i) for i in range(lo, hi + 1)]


def cross_references(doc: DocStructure) -> list[dict[str, Any]]:
    """CROSS_REFERENCES edge rows (schemas.STRUCTURE_EDGES) of one parsed document."""
    defs = _Definitions(doc)
    if not defs.targets:
        return []
    captioned = {
        e["target_id"]: e["source_id"] for e in doc.edges if e["type"] == "IS_CAPTIONED_BY"
    }
    edges: dict[tuple[str, str], dict[str, Any]] = {}
    for node in doc.nodes:
        text = node["text"] or ""
        if node["node_type"] not in SOURCE_TYPES or not _PREFILTER.search(text):
            continue
        own = defs.defined_by.get(node["id"], set())
        lead = len(text) - len(_LEAD.sub("", text))
        for m in _REF.finditer(text):
            kind = next(k for k in _KEYWORDS if m.group(f"k_{k}") is not None)
            plural = bool(_PLURAL.match(m.group(f"k_{kind}")))
            labels, end = _labels(m, kind, text, plural)
            if _EXTERNAL.match(text, end) or not _BARE.sub("", text[: m.start()] + text[end:]):
                continue  # another work's table, or a bare label ("Chapter 1." over a chapter)
            for label in labels:
                for keys in _candidates(label, plural):
                    found = [defs.find(kind, k) for k in keys]
                    if not all(found):
                        continue
                    for k, (key, (target, ttype)) in zip(keys, found, strict=True):  # type: ignore[misc]
                        if target == node["id"] or (m.start() == lead and key in own):
                            continue
                        _add_edge(
                            edges, node["id"], target, m, text, end, kind, k, ttype, captioned
                        )
                    break
    return list(edges.values())


def _add_edge(
    edges: dict[tuple[str, str], dict[str, Any]],
    source: str,
    target: str,
    m: re.Match[str],
    text: str,
    end: int,
    kind: str,
    label: str,
    ttype: str,
    captioned: dict[str, str],
) -> None:
    key = (source, target)
    if key in edges:
        meta = json.loads(edges[key]["metadata"])
        meta["mentions"] += 1
        edges[key]["metadata"] = json.dumps(meta, sort_keys=True, ensure_ascii=False)
        return
    meta: dict[str, Any] = {"kind": kind, "label": label, "target_type": ttype, "mentions": 1}
    if target in captioned:
        meta["captioned_id"] = captioned[target]
    edges[key] = {
        "source_id": source,
        "target_id": target,
        "type": "CROSS_REFERENCES",
        "weight": 1.0,
        "marker_text": text[m.start() : end],
        "metadata": json.dumps(meta, sort_keys=True, ensure_ascii=False),
    }


__all__ = ["cross_references", "SOURCE_TYPES"]

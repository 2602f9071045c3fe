"""Markdown as structure: a section tree from ATX/Setext headings, typed content nodes and
the links to resolve across documents.

A compact line-based block parser (no Markdown dependency): fenced/indented code is opaque
(no headings or links inside), pipe tables are one TABLE node, each list item (nested ones
flattened) a LIST_ITEM node, `>` quotes a BLOCK_QUOTATION. mkdocs admonitions
(`!!! note`), content tabs (`=== "Tab"`) and mkdocstrings directives (`::: x`) are
containers whose indented content becomes ordinary nodes of the current section, so they
never break the tree. Headings are only recognised at the top level (not inside list items,
quotes or containers), as mkdocs' table of contents sees them. Lists and containers nested
deeper than MAX_NESTING are flattened: there every list-marker line is one LIST_ITEM and
other lines continue it, so a list nested 1,000 deep costs no recursion and at most
MAX_NESTING passes over its lines.

Section tree: every heading opens a section under the nearest preceding heading of a lower
level (the DOCUMENT root when none). component_type is SECTION, or CHAPTER for level-1
headings when the document has several H1s (one H1 is the page title, not a chapter).
Section uris are `<source_path>#<slug>` with Python-Markdown toc slugs (explicit
`{#id}` attribute ids win); other anchors found in or just before a heading
(`[](){#old-id}`, `<a name="x">`) are kept in the section metadata as `anchors`.
Line numbers (1-based, of the file when it is available) are in node and section metadata.
A caption paragraph ("Table 1: ...", "**Table 1.** ...", "Таблица 1 — ...") right before or
after a table of the same section gets an IS_CAPTIONED_BY edge from the table, as in PDFs.
Image paragraphs stay PARAGRAPH nodes (there are no FIGURE nodes), so figure captions
("Figure 2: ...", "Рисунок 2 — ...") are recognised but link only once a FIGURE node exists.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pipeline.ingest.markdown import split_front_matter
from pipeline.ingest.text import decode_text
from pipeline.structure import register
from pipeline.structure.model import DocStructure, position

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_HR = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST = re.compile(r"^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)")
_QUOTE = re.compile(r"^ {0,3}> ?")
_ADMONITION = re.compile(r"^ {0,3}(?:!!!|\?\?\?\+?)[ \t]+([\w-]+)(?:[ \t]+\"(.*?)\")?[ \t]*$")
_TAB = re.compile(r"^ {0,3}===\+?[ \t]+\"(.*?)\"[ \t]*$")
_DIRECTIVE = re.compile(r"^ {0,3}:::[ \t]+(\S+)")
_TABLE_DELIM = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_REF_DEF = re.compile(
    r"^ {0,3}\[([^\]]+)\]:[ \t]*<?([^\s>]*)>?(?:[ \t]+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?[ \t]*$"
)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_ATTR_LIST = re.compile(r"[ \t]*\{:?[ \t]*([^{}]*)\}[ \t]*$")
_EMPTY_ANCHOR = re.compile(r"\[\]\(\)\{[ \t]*#([\w:.-]+)[^}]*\}")
# attr_list ids at the end of a line ("text {#id}", "{: #id }"): anchors of the current section
_LINE_ATTR = re.compile(r"[ \t]*\{:?[ \t]*#([\w:.-]+)[^{}\n]*\}[ \t]*$", re.M)
_HTML_ANCHOR = re.compile(r"<a\s+[^>]*?(?:name|id)=[\"']([^\"']+)[\"'][^>]*>(?:\s*</a>)?", re.I)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
# A caption paragraph: emphasis, keyword, label, then a separator or nothing ("Table 1: ...",
# "**Table 1.** ...", "*Figure 2.* ...", "Таблица 1 — ..."); "Table 1 shows ..." is a sentence.
_CAPTION = re.compile(
    r"^[\s*_]*(?:(?P<TABLE>(?i:table|tab\.|таблица))|(?P<FIGURE>(?i:figure|fig\.|рисунок|рис\.)))"
    r"[\s\u00a0]*(?:\d{1,3}(?:[.\-–]\d{1,3})*[a-z]?|[IVXLC]{1,6})(?!\w|[.\-–]\d)[*_\s]*(?:[:.|—–-]|$)"
)
_TAG = re.compile(r"</?[A-Za-z][^>]*>")

# Links: wikilinks first, then inline, then reference-style (full/collapsed, then shortcut).
_WIKILINK = re.compile(r"\[\[([^\[\]|#]*)(#[^\[\]|]*)?(?:\|([^\[\]]*))?\]\]")
_LINK_TEXT = r"((?:[^\[\]]|\[[^\[\]]*\])*)"
_INLINE = re.compile(
    r"(!?)\[" + _LINK_TEXT + r"\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
_FULL_REF = re.compile(r"(!?)\[" + _LINK_TEXT + r"\]\[([^\[\]]*)\]")
_SHORTCUT = re.compile(r"(!?)\[([^\[\]]+)\](?![(\[:])")

# Nesting levels (lists, containers) parsed as blocks; deeper content is flattened.
MAX_NESTING = 32


@dataclass
class Block:
    kind: str  # HEADING, PARAGRAPH, CODE, TABLE, LIST_ITEM, BLOCK_QUOTATION, ANCHOR
    text: str
    start: int  # 0-based line index in the parsed text
    end: int  # inclusive
    meta: dict[str, Any] = field(default_factory=dict)
    minor: int = 0  # part number inside one logical unit (a list item's later paragraphs)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _dedent(line: str, n: int) -> str:
    return line[min(n, _indent(line)) :]


def _expand(line: str) -> str:
    """Tabs in the leading whitespace to 4 spaces (indentation is what containers use)."""
    stripped = line.lstrip(" \t")
    return line[: len(line) - len(stripped)].expandtabs(4) + stripped


def _indented_block(lines: list[str], i: int, min_indent: int) -> int:
    """End (exclusive) of the run of lines from i that are blank or indented >= min_indent,
    trailing blank lines excluded."""
    j, last = i, i
    while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) >= min_indent):
        if lines[j].strip():
            last = j + 1
        j += 1
    return last


def _is_table_start(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and "|" in lines[i]
        and "|" in lines[i + 1]
        and "-" in lines[i + 1]
        and bool(_TABLE_DELIM.match(lines[i + 1]))
    )


def _interrupts(lines: list[str], i: int, top: bool) -> bool:
    """Does line i start a new block (ending a paragraph)?"""
    line = lines[i]
    if top and _ATX.match(line):
        return True
    if _FENCE.match(line) or _QUOTE.match(line) or _HR.match(line) or line.startswith("<!--"):
        return True
    if _ADMONITION.match(line) or _TAB.match(line) or _DIRECTIVE.match(line):
        return True
    m = _LIST.match(line)
    if m and line[m.end() :].strip():
        marker = m.group(2)
        if marker[0].isdigit() is False or marker[:-1] == "1":
            return True
    return _is_table_start(lines, i)


def parse_blocks(lines: list[str], base: int = 0, top: bool = True, depth: int = 0) -> list[Block]:
    """Block structure of `lines` (already dedented to their container); `base` is the line
    index of lines[0] in the document, so every block knows its own lines. `depth`: the
    nesting level of `lines`; past MAX_NESTING they are flattened (`_flat_blocks`)."""
    if depth > MAX_NESTING:
        return _flat_blocks(lines, base)
    out: list[Block] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not line.strip() or _HR.match(line):
            i += 1
            continue
        if line.lstrip().startswith("<!--"):  # HTML comment: skipped up to its end
            j = i
            while j < n and "-->" not in lines[j]:
                j += 1
            rest = lines[j].split("-->", 1)[1] if j < n else ""
            if rest.strip():
                lines = [*lines[:j], rest, *lines[j + 1 :]]
                n = len(lines)
                i = j
            else:
                i = j + 1
            continue
        if m := _FENCE.match(line):
            indent, fence, lang = m.group(1), m.group(2), m.group(3)
            close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
            j = i + 1
            while j < n and not close.match(lines[j]):
                j += 1
            body = [_dedent(x, len(indent)) for x in lines[i + 1 : j]]
            end = min(j, n - 1)
            out.append(Block("CODE", "\n".join(body), base + i, base + end, {"language": lang}))
            i = j + 1
            continue
        if _indent(line) >= 4:  # indented code (no paragraph to continue here)
            j = _indented_block(lines, i, 4)
            body = [_dedent(x, 4) for x in lines[i:j]]
            out.append(Block("CODE", "\n".join(body), base + i, base + j - 1))
            i = j
            continue
        if top and (m := _ATX.match(line)):
            out.append(
                Block("HEADING", m.group(2) or "", base + i, base + i, {"level": len(m.group(1))})
            )
            i += 1
            continue
        if (m := _ADMONITION.match(line)) or (t := _TAB.match(line)) or _DIRECTIVE.match(line):
            j = _indented_block(lines, i + 1, 4)
            inner = [_dedent(x, 4) for x in lines[i + 1 : j]]
            if m:
                container = {
                    "container": f"admonition:{m.group(1)}",
                    "container_title": m.group(2) or "",
                }
            elif t:
                container = {"container": "tab", "container_title": t.group(1)}
            else:  # mkdocstrings `::: dotted.path` + YAML options: one opaque node
                text = "\n".join([line.strip(), *inner]).rstrip()
                out.append(
                    Block(
                        "CODE", text, base + i, base + max(i, j - 1), {"directive": "mkdocstrings"}
                    )
                )
                i = max(j, i + 1)
                continue
            for b in parse_blocks(inner, base + i + 1, top=False, depth=depth + 1):
                b.meta = {**container, **b.meta}
                out.append(b)
            i = max(j, i + 1)
            continue
        if _QUOTE.match(line):
            j, body = i, []
            while (
                j < n
                and lines[j].strip()
                and (_QUOTE.match(lines[j]) or not _interrupts(lines, j, top))
            ):
                body.append(_QUOTE.sub("", lines[j], count=1))
                j += 1
            out.append(Block("BLOCK_QUOTATION", "\n".join(body).strip(), base + i, base + j - 1))
            i = j
            continue
        if m := _LIST.match(line):
            i = _list_item(lines, i, m, base, out, depth)
            continue
        if _is_table_start(lines, i):
            j = i + 2
            while j < n and lines[j].strip() and "|" in lines[j]:
                j += 1
            out.append(
                Block("TABLE", "\n".join(x.strip() for x in lines[i:j]), base + i, base + j - 1)
            )
            i = j
            continue
        # paragraph (or a Setext heading when an underline closes it at the top level)
        j, body = i, [line]
        j += 1
        heading_level = 0
        while j < n and lines[j].strip():
            if top and (s := _SETEXT.match(lines[j])):
                heading_level = 1 if s.group(1)[0] == "=" else 2
                break
            if _interrupts(lines, j, top):
                break
            body.append(lines[j])
            j += 1
        if heading_level:
            text = " ".join(x.strip() for x in body)
            out.append(Block("HEADING", text, base + i, base + j, {"level": heading_level}))
            i = j + 1
            continue
        out.append(Block("PARAGRAPH", "\n".join(x.strip() for x in body), base + i, base + j - 1))
        i = j
    return out


def _list_item(
    lines: list[str], i: int, m: re.Match[str], base: int, out: list[Block], depth: int
) -> int:
    """One list item from line i: its lines (indented continuation, lazy continuation,
    blank-separated indented paragraphs) parsed recursively; the item's own paragraphs
    become LIST_ITEM parts, nested items stay LIST_ITEM nodes (flattened, with depth)."""
    n = len(lines)
    marker_indent = len(m.group(1))
    spaces = len(m.group(3).expandtabs(4))
    content = marker_indent + len(m.group(2)) + (spaces if 0 < spaces <= 4 else 1)
    first = lines[i][m.end() :]
    item = [first]
    j = i + 1
    prev_blank = False
    while j < n:
        line = lines[j]
        if not line.strip():
            prev_blank = True
            item.append("")
            j += 1
            continue
        ind = _indent(line)
        if ind > marker_indent and (ind >= content or _LIST.match(line) or not prev_blank):
            item.append(_dedent(line, content))
        elif not prev_blank and not _interrupts(lines, j, False) and not _SETEXT.match(line):
            item.append(line.strip())  # lazy continuation
        else:
            break
        prev_blank = False
        j += 1
    while item and not item[-1].strip():
        item.pop()
    parts = parse_blocks(item, base + i, top=False, depth=depth + 1)
    minor = 0
    for b in parts:
        if b.kind == "LIST_ITEM":
            b.meta = {**b.meta, "depth": b.meta.get("depth", 0) + 1}
        elif b.kind == "PARAGRAPH":
            b.kind, b.minor = "LIST_ITEM", minor
            b.meta = {**b.meta, "depth": 0}
            minor += 1
        out.append(b)
    return i + max(1, len(item))


def _flat_blocks(lines: list[str], base: int) -> list[Block]:
    """Content nested past MAX_NESTING: a PARAGRAPH up to the first list-marker line, then
    one LIST_ITEM (depth 0 here; callers add theirs) per marker line with the non-blank
    lines after it. No recursion, one pass."""
    out: list[Block] = []
    for k, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        m = _LIST.match(stripped)
        if m and stripped[m.end() :].strip():
            out.append(Block("LIST_ITEM", stripped[m.end() :].strip(), base + k, base + k))
            out[-1].meta = {"depth": 0}
        elif out:
            out[-1].text += "\n" + stripped
            out[-1].end = base + k
        else:
            out.append(Block("PARAGRAPH", stripped, base + k, base + k))
    return out


# ---------------------------------------------------------------------------- inline text


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    """Same-length text with every match of `pattern` replaced by spaces (keeps offsets)."""
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def plain_inline(text: str) -> str:
    """Heading text as rendered (markup, tags, attribute lists dropped): what toc slugifies."""
    text = _ATTR_LIST.sub("", text)
    text = _EMPTY_ANCHOR.sub("", text)
    spans: list[str] = []

    def keep(m: re.Match[str]) -> str:
        spans.append(m.group(2).strip())
        return f"\x00{len(spans) - 1}\x00"

    text = _CODE_SPAN.sub(keep, text)
    text = _INLINE.sub(lambda m: "" if m.group(1) else m.group(2), text)
    text = _FULL_REF.sub(lambda m: m.group(2) or m.group(3), text)
    text = _TAG.sub("", text)
    text = re.sub(r"(?<![\w*])(\*{1,3}|_{1,3})(?=\S)(.+?)(?<=\S)\1(?![\w*])", r"\2", text)
    text = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)
    text = re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], text)
    return re.sub(r"\s+", " ", text).strip()


def heading_anchor(raw: str) -> tuple[str, str | None, list[str]]:
    """(title, explicit id or None, other anchors) of a heading's raw text."""
    explicit = None
    if m := _ATTR_LIST.search(raw):
        ids = re.findall(r"#([\w:.-]+)", m.group(1))
        if ids or m.group(1).strip().startswith((".", "#")) or "=" in m.group(1):
            explicit = ids[0] if ids else None
            raw = raw[: m.start()]
    anchors = _HTML_ANCHOR.findall(raw) + _EMPTY_ANCHOR.findall(raw)
    return plain_inline(raw), explicit, anchors


def _ref_key(label: str) -> str:
    return re.sub(r"\s+", " ", label.strip()).casefold()


def extract_links(text: str, refs: dict[str, str]) -> list[dict[str, str]]:
    """Links in one node's text, in order: {href, text, kind}. Code spans are opaque;
    images are no cross-document links and are skipped; `[text][label]` with a label the
    document never defines (mkdocs autorefs identifiers) is kind "autoref"."""
    scan = _blank(text, _CODE_SPAN)
    found: list[tuple[int, dict[str, str]]] = []

    def take(pattern: re.Pattern[str], fn: Any) -> None:
        nonlocal scan
        for m in pattern.finditer(scan):
            link = fn(m)
            if link is not None:
                found.append((m.start(), link))
        scan = _blank(scan, pattern)

    def label_text(m: re.Match[str], g: int) -> str:
        return plain_inline(text[m.start(g) : m.end(g)])

    take(
        _WIKILINK,
        lambda m: {
            "href": (m.group(1) or "").strip() + (m.group(2) or ""),
            "text": (m.group(3) or m.group(1) + (m.group(2) or "")).strip(),
            "kind": "wikilink",
        },
    )
    take(
        _INLINE,
        lambda m: (
            None
            if m.group(1)
            else {
                "href": text[m.start(3) : m.end(3)].strip("<>"),
                "text": label_text(m, 2),
                "kind": "inline",
            }
        ),
    )

    def full_ref(m: re.Match[str]) -> dict[str, str] | None:
        if m.group(1):
            return None
        raw_label = text[m.start(3) : m.end(3)] or text[m.start(2) : m.end(2)]
        href = refs.get(_ref_key(raw_label))
        if href is None:
            return {"href": raw_label.strip(), "text": label_text(m, 2), "kind": "autoref"}
        return {"href": href, "text": label_text(m, 2), "kind": "reference"}

    take(_FULL_REF, full_ref)

    def shortcut(m: re.Match[str]) -> dict[str, str] | None:
        href = refs.get(_ref_key(text[m.start(2) : m.end(2)]))
        if m.group(1) or href is None:
            return None
        return {"href": href, "text": label_text(m, 2), "kind": "reference"}

    take(_SHORTCUT, shortcut)
    return [link for _, link in sorted(found, key=lambda x: x[0])]


def _reference_definitions(lines: list[str]) -> tuple[dict[str, str], set[int]]:
    """Reference definitions `[id]: href` outside fenced code (anywhere, also indented in
    containers): label -> href (first wins, as in CommonMark), and their line indexes."""
    refs: dict[str, str] = {}
    where: set[int] = set()
    fence: str | None = None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            continue
        if m := _FENCE.match(stripped):
            fence = m.group(2)[:3]
            continue
        if m := _REF_DEF.match(stripped):
            refs.setdefault(_ref_key(m.group(1)), m.group(2))
            where.add(i)
    return refs, where


# ---------------------------------------------------------------------------- document


def parse_markdown(
    document_id: str,
    source_path: str,
    title: str,
    text: str,
    front_matter: dict[str, Any] | None = None,
    line_offset: int = 0,
) -> DocStructure:
    """The DocStructure of one Markdown text (front matter already removed; `line_offset`
    = the lines it took, so recorded line numbers are the file's)."""
    doc = DocStructure(document_id, source_path, title)
    root = doc.sections[0]
    root_meta: dict[str, Any] = {"front_matter": front_matter} if front_matter else {}
    lines = [_expand(x) for x in text.split("\n")]
    refs, def_lines = _reference_definitions(lines)
    for i in def_lines:  # definitions are not content
        lines[i] = ""
    blocks = parse_blocks(lines)
    n_h1 = sum(1 for b in blocks if b.kind == "HEADING" and b.meta["level"] == 1)

    stack: list[tuple[int, str]] = []  # (heading level, section id)
    anchors: dict[str, list[str]] = {}
    sec_lines: dict[str, list[int]] = {root["id"]: [1 + line_offset, len(lines) + line_offset]}
    pending: list[str] = []
    heading_levels: dict[str, int] = {}
    current = root["id"]
    order: list[tuple[str, str, str, str, str]] = []  # (section, container, kind, text, id)
    for k, b in enumerate(blocks):
        lo, hi = b.start + 1 + line_offset, b.end + 1 + line_offset
        if b.kind in ("PARAGRAPH", "LIST_ITEM") and (
            _EMPTY_ANCHOR.search(b.text) or _LINE_ATTR.search(b.text)
        ):
            ids = _EMPTY_ANCHOR.findall(b.text) + _LINE_ATTR.findall(b.text)
            b.text = _LINE_ATTR.sub("", _EMPTY_ANCHOR.sub("", b.text)).strip()
            nxt = blocks[k + 1] if k + 1 < len(blocks) else None
            if not b.text and nxt is not None and nxt.kind == "HEADING":
                pending += ids  # an anchor line right before a heading names that heading
            else:
                anchors.setdefault(current, []).extend(ids)
            if not b.text:
                continue
        if b.kind == "HEADING":
            level = b.meta["level"]
            title_text, explicit, extra = heading_anchor(b.text)
            while stack and stack[-1][0] >= level:
                closed = stack.pop()[1]
                sec_lines[closed][1] = lo - 1
            parent = stack[-1][1] if stack else root["id"]
            ctype = "CHAPTER" if level == 1 and n_h1 > 1 else "SECTION"
            sid = doc.add_section(parent, ctype, title_text or f"(untitled h{level})", 1, explicit)
            sec_lines[sid] = [lo, len(lines) + line_offset]
            if extra or pending:
                anchors[sid] = [*pending, *extra]
            pending = []
            stack.append((level, sid))
            current = sid
            heading_levels[sid] = level
            hid = doc.add_node(
                sid,
                "HEADING",
                title_text,
                [position(1)],
                metadata={"line_start": lo, "line_end": hi, "level": level},
            )
            order.append((sid, "", "HEADING", b.text, hid))
            continue
        if "directive" in b.meta:  # mkdocstrings renders `::: a.b` with anchor ids a.b...
            anchors.setdefault(current, []).append(b.text.split()[1])
        meta = {"line_start": lo, "line_end": hi, **b.meta}
        nid = doc.add_node(current, b.kind, b.text, [position(1)], seq_minor=b.minor, metadata=meta)
        order.append((current, b.meta.get("container", ""), b.kind, b.text, nid))
        if b.kind != "CODE":
            for link in extract_links(b.text, refs):
                doc.links.append({"source_id": nid, **link, "line": lo})
    _caption_edges(doc, order)
    for sec in doc.sections:
        meta = json.loads(sec["metadata"])
        if sec["id"] == root["id"]:
            meta.update(root_meta)
        else:
            meta["heading_level"] = heading_levels[sec["id"]]
        start, end = sec_lines[sec["id"]]
        meta.update(line_start=start, line_end=max(start, end))
        if sec["id"] in anchors:
            meta["anchors"] = anchors[sec["id"]]
        sec["metadata"] = json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str)
    return doc


def _caption_edges(doc: DocStructure, order: list[tuple[str, str, str, str, str]]) -> None:
    """Table/figure -> caption (IS_CAPTIONED_BY, weight 1.0, as the PDF parser links them):
    the caption paragraph right before the node, else the one right after it, in the same
    section and container. Each caption captions one node, so in "T1 / Table 1: ... / T2 /
    Table 2: ..." (captions below) the first caption goes to T1 and the second to T2."""
    taken: set[int] = set()
    for k, (section, container, kind, _, node_id) in enumerate(order):
        if kind not in ("TABLE", "FIGURE"):
            continue
        for j in (k - 1, k + 1):
            if j in taken or not 0 <= j < len(order):
                continue
            sec2, cont2, kind2, text, cap_id = order[j]
            m = _CAPTION.match(text) if kind2 == "PARAGRAPH" else None
            if m and m.group(kind) and (sec2, cont2) == (section, container):
                doc.add_edge(node_id, cap_id, "IS_CAPTIONED_BY")
                taken.add(j)
                break


@register("text/markdown")
def parse_markdown_document(
    doc: dict[str, Any], raw: bytes | None, settings: Any = None
) -> DocStructure:
    """Parses documents.text (what chunking sees); the file, when still there, only gives
    the front matter's line count so node line numbers are the file's."""
    text = doc["text"] or ""
    meta, body, _ = split_front_matter(text)  # in case the loader kept it (invalid YAML)
    offset = text[: len(text) - len(body)].count("\n")
    if raw is not None:
        try:
            full = decode_text(raw)
            if full.endswith(body):
                offset = full[: len(full) - len(body)].count("\n")
        except Exception:  # noqa: BLE001 - line numbers then count from the text
            pass
    if not meta:
        try:
            meta = json.loads(doc.get("metadata") or "{}")
        except (TypeError, json.JSONDecodeError):
            meta = {}
    return parse_markdown(doc["id"], doc["source_path"], doc["title"], body, meta, offset)

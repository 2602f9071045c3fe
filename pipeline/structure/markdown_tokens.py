"""markdown-it's token stream as the blocks a Markdown document's nodes are made of.

The stream is flat (open/close tokens with a nesting level), so one loop with a stack of
open containers reads it, however deep the document nests. Per block kind:

- HEADING only outside any container (as mkdocs' table of contents sees headings); inside
  one, a heading is a paragraph of its container;
- PARAGRAPH, or LIST_ITEM inside a list item (`depth` = enclosing items - 1, later
  paragraphs of one item numbered by `minor`) or a definition (`term` in its metadata, the
  term leading its first paragraph's text, so a definition never loses what it defines);
- BLOCK_QUOTATION and NOTE (a footnote definition, `marker` = its label): one node each,
  whatever they hold, with the links of everything inside; a GitHub alert or Obsidian
  callout (`> [!NOTE]`, `> [!tip]- Title`) is no quote but a container of its blocks;
- TABLE: the table's lines, its cells as `rows` in the metadata; CODE: fenced, indented
  and mkdocstrings `::: x` directives, opaque;
- admonitions, content tabs, colon-fenced containers (`:::tip`), pymdown blocks
  (`/// tip`) and MyST directives (```` ```{note} ````) add `container` / `container_title`
  to what they hold, as do Hugo shortcodes, Liquid tags and JSX components (`{{< hint >}}`,
  `{% hint %}`, `<Callout>`); a container's title is its first PARAGRAPH (`role:
  container_title`); a MyST code directive is CODE with `directive` in its metadata;
- SNIPPET (`--8<-- "file.md"`, MyST's `{include}`): no node, the included files as
  `snippet` links; a MyST `{toctree}`: its pages as `toctree` links;
- ANCHOR: ids alone (`{#id}` lines, MyST's `(label)=` and a directive's `:name:`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from markdown_it.token import Token

from pipeline.structure.images import html_images, is_data_uri
from pipeline.structure.markdown_inline import (
    HTML_ANCHOR,
    HTML_LINK_OPEN,
    ICON,
    heading_ids,
    inline_links,
    markdown_images,
    strip_line_attrs,
)
from pipeline.structure.markdown_myst import render_roles, uses_myst
from pipeline.structure.markdown_syntax import alert_opened, code_info, fenced_tag, markdown_parser
from pipeline.structure.markdown_templates import BLOCK_ID, included, link_tags, strip_markup

_LIST_MARK = re.compile(r"^(?:[ \t]*>)*[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_QUOTE_MARKS = re.compile(r"^(?:[ \t]*>)+[ \t]?", re.M)


@dataclass
class Block:
    kind: str  # HEADING, PARAGRAPH, CODE, TABLE, LIST_ITEM, BLOCK_QUOTATION, NOTE, ANCHOR,
    # SNIPPET (no node: links of its section, e.g. the files a pymdown snippet includes)
    text: str
    start: int  # 0-based line index in the parsed text
    end: int  # inclusive
    meta: dict[str, Any] = field(default_factory=dict)
    minor: int = 0  # part number inside one logical unit (a list item's later paragraphs)
    links: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # footnote labels it references
    ids: list[str] = field(default_factory=list)  # anchor ids declared in it


def _span(token: Token, lines: list[str]) -> tuple[int, int]:
    """(first, last) 0-based line of a block token, trailing blank lines left out."""
    lo, hi = token.map or (0, 1)
    hi = max(lo, min(hi, len(lines)) - 1)
    while hi > lo and not lines[hi].strip():
        hi -= 1
    return lo, hi


def _close(tokens: list[Token], i: int) -> int:
    """Index of the token closing the container opened at tokens[i]."""
    depth = 0
    for j in range(i, len(tokens)):
        depth += tokens[j].nesting
        if depth == 0:
            return j
    return len(tokens) - 1


class _Reader:
    """One pass over the tokens; `stack` holds the open containers (type, data)."""

    def __init__(self, tokens: list[Token], lines: list[str], env: dict[str, Any]) -> None:
        self.tokens, self.lines, self.env = tokens, lines, env
        self.out: list[Block] = []
        self.stack: list[tuple[str, dict[str, Any]]] = []

    def container(self) -> dict[str, Any]:
        for kind, data in reversed(self.stack):
            if kind == "container":
                title = ICON.sub("", data["title"]).strip()  # `=== ":octicons-x: Tab"`
                return {"container": data["name"], "container_title": title}
        return {}

    def open_container(self, name: str, title: str, token: Token, **extra: Any) -> None:
        """Enters a container. Its title (an admonition's, a tab's label, a step's) is text
        of the page too: the container's first PARAGRAPH (`role: container_title`), so
        chunks and search see it."""
        self.stack.append(("container", {"name": name, "title": title, **extra}))
        if title := ICON.sub("", title).strip():
            line = (token.map or [0])[0]
            self.add("PARAGRAPH", title, (line, line), role="container_title")

    def add(self, kind: str, text: str, span: tuple[int, int], **meta: Any) -> Block:
        block = Block(kind, text, span[0], span[1], {**self.container(), **meta})
        self.out.append(block)
        return block

    def rendered(self, text: str) -> str:
        """Inline text without a site generator's or note app's markup (`strip_markup`:
        `{{% badge %}}1.0{{% /badge %}}` reads 1.0), MyST roles as their text."""
        text = strip_markup(text)
        return render_roles(text) if self.env.get("myst") else text

    def text_block(
        self, text: str, span: tuple[int, int], children: list[Token], anchors: list[str]
    ) -> None:
        """A paragraph's text where it stands: PARAGRAPH or a list item's / definition's
        part; anchors-only text ([](){#id}, {#id}) is an ANCHOR block. `anchors`: ids it
        has besides those in its text (a heading's slug)."""
        links, notes, ids = inline_links(children)
        text, pictures = _imaged(text, children)
        links += pictures
        if "::" in text:  # Logseq's `id:: uuid`: the block `((uuid))` refers to
            ids += BLOCK_ID.findall(text)
        text = self.rendered(text)
        text, line_ids = strip_line_attrs("\n".join(x.strip() for x in text.split("\n")))
        ids += line_ids + anchors
        if "<" in text and not HTML_ANCHOR.sub("", text).strip():
            text = ""  # `<a id="x"></a>` alone: an anchor, like a `{#x}` line
        item = next(((k, d) for k, d in reversed(self.stack) if k in ("item", "dd")), None)
        if not text:  # anchors alone, or markup alone (`type:: [[Feature]]`): its links
            block = self.add("SNIPPET" if links else "ANCHOR", "", span)  # are the section's
        elif item is None:
            block = self.add("PARAGRAPH", text, span)
        else:
            kind, data = item
            depth = sum(1 for k, _ in self.stack if k in ("item", "dd")) - 1
            meta: dict[str, Any] = {"depth": depth}
            if kind == "dd":
                meta["term"] = data["term"]
                if data["parts"] == 0:  # the definition's first part starts at its term
                    text = f"{data['term']}: {text}"
                    span = (min(span[0], data["term_line"]), span[1])
                    links = data["term_links"] + links
                    ids = data["term_ids"] + ids
            block = self.add("LIST_ITEM", text, span, **meta)
            block.minor = data["parts"]
            data["parts"] += 1
        block.links, block.notes, block.ids = links, notes, ids

    def captured(self, i: int, kind: str, **meta: Any) -> int:
        """A quote or footnote from tokens[i]: one node, with the links of all inside."""
        end = _close(self.tokens, i)
        lo, hi = _span(self.tokens[i], self.lines)
        if kind == "NOTE":
            parts = [t.content.strip() for t in self.tokens[i:end] if t.type in _CONTENT]
            text = "\n\n".join(p for p in parts if p)
        else:
            text = _QUOTE_MARKS.sub("", "\n".join(self.lines[lo : hi + 1])).strip()
        block = self.add(kind, text, (lo, hi), **meta)
        for k in range(i, end):
            t = self.tokens[k]
            if t.type == "inline":
                self.gather(block, t.children or [])
            elif t.type == "heading_open":
                block.ids += heading_ids(self.tokens[k + 1].content)
            elif t.type == "flat":  # nested past FLAT_LEVEL: its text was not parsed yet
                flat = _QUOTE_MARKS.sub("", t.content)
                parser = markdown_parser(self.env["myst"])
                self.gather(block, parser.parseInline(flat, self.env)[0].children)
        block.text, pictures = html_images(block.text)
        block.links += pictures
        return end

    @staticmethod
    def gather(block: Block, children: list[Token] | None) -> None:
        """Adds the links, footnote markers and anchor ids of inline tokens to `block`, and
        reads their Markdown images in its text as their words."""
        block.text = markdown_images(block.text, children or [])
        links, notes, ids = inline_links(children or [])
        block.links += links
        block.notes += notes
        block.ids += ids

    def table(self, i: int) -> int:
        end = _close(self.tokens, i)
        lo, hi = _span(self.tokens[i], self.lines)
        rows: list[list[str]] = []
        block = self.add("TABLE", "\n".join(x.strip() for x in self.lines[lo : hi + 1]), (lo, hi))
        for t in self.tokens[i:end]:
            if t.type == "tr_open":
                rows.append([])
            elif t.type == "inline":
                rows[-1].append(_imaged(t.content, t.children)[0])
                self.gather(block, t.children)
        block.text, pictures = html_images(block.text)
        block.links += pictures
        block.meta["rows"] = rows
        if self.tokens[i].meta.get("synthetic"):  # a MyST list-table: no table lines to show
            title = self.tokens[i].meta.get("title", "")
            lines = ["| " + " | ".join(r) + " |" for r in rows]
            block.text = "\n".join([title, *lines] if title else lines)
        return end

    def flat(self, token: Token) -> None:
        """Content nested past FLAT_LEVEL: a LIST_ITEM per list-marker line (the first line
        too, inside a list item) with the lines after it, otherwise a PARAGRAPH."""
        lo = (token.map or (0, 0))[0]
        in_item = any(k in ("item", "dd") for k, _ in self.stack)
        depth = sum(1 for k, _ in self.stack if k in ("item", "dd"))
        parts: list[tuple[str, list[str], int, int]] = []  # kind, lines, first line, depth
        for k, line in enumerate(token.content.split("\n")):
            mark = _LIST_MARK.match(line)
            body = (line[mark.end() :] if mark else _QUOTE_MARKS.sub("", line)).strip()
            if not body:
                continue
            if mark:
                parts.append(("LIST_ITEM", [body], lo + k, depth))
            elif not parts:  # the rest of the enclosing item's (or container's) text
                parts.append(("LIST_ITEM" if in_item else "PARAGRAPH", [body], lo + k, depth - 1))
            else:
                parts[-1][1].append(body)
        parser = markdown_parser(self.env["myst"])
        for kind, body, start, level in parts:
            text = "\n".join(body)
            children = parser.parseInline(text, self.env)[0].children or []
            meta = {"depth": level} if kind == "LIST_ITEM" else {}
            text, pictures = _imaged(text, children)
            block = self.add(kind, text, (start, start + len(body) - 1), **meta)
            block.links, block.notes, block.ids = inline_links(children)
            block.links += pictures

    def read(self) -> list[Block]:
        tokens, i = self.tokens, 0
        while i < len(tokens):
            t = tokens[i]
            kind = t.type
            if kind == "heading_open":
                inline = tokens[i + 1]
                span = _span(t, self.lines)
                if not self.stack:
                    level = int(t.tag[1])
                    self.out.append(Block("HEADING", inline.content, *span, {"level": level}))
                else:
                    mark = t.markup + " " if t.markup.startswith("#") else ""
                    ids = heading_ids(inline.content)
                    self.text_block(mark + inline.content, span, inline.children or [], ids)
                i += 3
                continue
            if kind == "paragraph_open":
                inline = tokens[i + 1]
                self.text_block(inline.content, _span(t, self.lines), inline.children or [], [])
                i += 3
                continue
            if kind in ("fence", "code_block"):
                text = t.content[:-1] if t.content.endswith("\n") else t.content
                meta = code_info(t.info)
                if t.meta.get("directive"):  # a MyST code directive (`{code-block}`, `{math}`)
                    meta["directive"] = t.meta["directive"]
                code = self.add(
                    "CODE", text, _span(t, self.lines), **(meta if kind == "fence" else {})
                )
                # a fence of one include line (`{!> ../src/x.py !}`): the file it shows
                code.links = [{"href": p, "text": "", "kind": "snippet"} for p in included(text)]
            elif kind == "snippet":  # the page refers to the files it includes
                block = self.add("SNIPPET", "", _span(t, self.lines))
                link_kind = t.meta.get("kind", "snippet")  # or a MyST toctree's pages
                block.links = [{"href": p, "text": "", "kind": link_kind} for p in t.meta["paths"]]
            elif kind == "directive":
                self.add("CODE", t.content, _span(t, self.lines), directive="mkdocstrings")
                self.out[-1].ids.append(t.info)
            elif kind == "myst_target":  # `(label)=`, a directive's `:name:`
                self.add("ANCHOR", "", _span(t, self.lines)).ids = [t.content.strip()]
            elif kind == "html_block":
                self.html(t)
            elif kind == "flat":
                self.flat(t)
            elif kind == "blockquote_open" and (alert := alert_opened(tokens, i)) is not None:
                name = f"admonition:{alert[0]}"  # `> [!NOTE]`: a note, not a quote
                self.open_container(name, alert[1], t, alert=True)
                if not tokens[i + 2].content.strip():
                    i += 3  # the marker was all of its first paragraph
            elif kind == "blockquote_close" and self.stack and self.stack[-1][1].get("alert"):
                self.stack.pop()
            elif kind == "blockquote_open":
                i = self.captured(i, "BLOCK_QUOTATION")
            elif kind == "footnote_reference_open":
                i = self.captured(i, "NOTE", marker=t.meta["label"])
            elif kind == "table_open":
                i = self.table(i)
            elif kind in ("admonition_open", "tab_open"):
                name = f"admonition:{t.meta['tag']}" if kind == "admonition_open" else "tab"
                self.open_container(name, t.info, t)
            elif kind in ("container_fenced_open", "container_blocks_open"):
                tag, title = fenced_tag(t.info)
                self.open_container(f"admonition:{tag}", title, t)
                nxt = tokens[i + 1] if i + 1 < len(tokens) else None
                under = nxt is not None and (nxt.map or [0])[0] == (t.map or [0])[0] + 1
                if kind == "container_blocks_open" and under and nxt.type == "code_block":
                    i += 1  # the block's YAML options, right under its header
            elif kind == "site_container_open":
                self.open_container(t.meta["tag"], t.meta["title"], t)
            elif kind == "list_item_open":
                self.stack.append(("item", {"parts": 0}))
            elif kind == "dd_open":  # its term is the enclosing dl's latest
                dl = self.stack[-1][1] if self.stack else {}
                term = {k: dl.get(k, v) for k, v in (("term", ""), ("term_line", 0))}
                term["term_links"] = dl.get("term_links", [])
                term["term_ids"] = dl.get("term_ids", [])
                self.stack.append(("dd", {"parts": 0, **term}))
            elif kind == "dl_open":
                self.stack.append(("dl", {"term": "", "term_line": 0}))
            elif kind == "dt_open":
                term = _imaged(tokens[i + 1].content, tokens[i + 1].children)[0]
                term, term_ids = strip_line_attrs(self.rendered(term.strip()))
                term_links = inline_links(tokens[i + 1].children or [])[0]
                self.stack[-1][1].update(
                    term=term, term_line=(t.map or [0])[0], term_links=term_links, term_ids=term_ids
                )
                i += 2
            elif t.nesting == 1 and kind in _CONTAINERS:
                self.stack.append(("other", {}))
            elif t.nesting == -1 and kind in _CLOSERS and self.stack:
                self.stack.pop()
            i += 1
        return self.out

    def html(self, t: Token) -> None:
        """Raw HTML (and MDX's JSX): comments, `<style>` and `<script>` are skipped, tags
        alone (`</details>`, `<Tabs>`) hold no text, `<a id=...></a>`-only blocks are
        anchors (of the heading after them, like `{#id}` lines), other HTML is a paragraph
        of its text (its tags left out, an `<img>` read as its alt text), with the links of
        its `<a href>` and `<img src>` tags."""
        text = t.content.strip()
        if text.startswith("<!--") or _NOT_TEXT.match(text):
            return
        text, pictures = html_images(text)  # `<img alt="...">`: its words
        ids = HTML_ANCHOR.findall(text)
        rest = "\n".join(x.strip() for x in _TAG.sub("", HTML_ANCHOR.sub("", text)).split("\n"))
        rest = rest.strip()
        kind = "PARAGRAPH" if rest else "SNIPPET" if pictures else "ANCHOR"  # an image's links
        block = self.add(kind, rest, _span(t, self.lines))
        block.ids, block.links = ids, pictures
        for m in _HTML_LINK.finditer(text):  # `<a href="x">text</a>`: a link of the block
            label = " ".join(_TAG.sub("", m.group(2)).split())
            if not is_data_uri(m.group(1)):
                block.links.append({"href": m.group(1), "text": label, "kind": "inline"})


def _imaged(text: str, children: list[Token] | None) -> tuple[str, list[dict[str, str]]]:
    """`text` with its images as their words (the Markdown ones markdown-it found in
    `children`, and `<img>` tags), and the links of its `<img>` tags (inline_links has
    those of the Markdown ones)."""
    return html_images(markdown_images(text, children or []))


_CONTENT = frozenset({"inline", "fence", "code_block"})
_TAG = re.compile(r"<[^<>]*>")
_HTML_LINK = re.compile(HTML_LINK_OPEN.pattern + r"(.*?)</a\s*>", re.I | re.S)
_NOT_TEXT = re.compile(r"<(?:style|script)\b", re.I)
_CONTAINERS = frozenset({"bullet_list_open", "ordered_list_open"})
_CLOSERS = frozenset(
    {
        "bullet_list_close",
        "ordered_list_close",
        "list_item_close",
        "dd_close",
        "dl_close",
        "admonition_close",
        "tab_close",
        "container_fenced_close",
        "container_blocks_close",
        "site_container_close",
    }
)


def parse_tokens(text: str) -> tuple[list[Block], dict[str, Any]]:
    """(blocks, markdown-it env) of one Markdown text; lines are 0-based in `text`."""
    text = link_tags(text)  # `[x]({{< ref "page.md" >}})`: a link once the site renders it
    env: dict[str, Any] = {"myst": uses_myst(text)}
    tokens = markdown_parser(env["myst"]).parse(text, env)
    return _Reader(tokens, text.split("\n"), env).read(), env


def parse_blocks(lines: list[str]) -> list[Block]:
    """Block structure of a document given as lines."""
    return parse_tokens("\n".join(lines))[0]

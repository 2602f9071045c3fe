"""Inline Markdown: heading text as rendered (what toc slugs are made of), attribute lists
(`{#id}`, `{: #id .cls }`, `{ id="x" }`, Python-Markdown's attr_list) and the links, footnote
markers, anchor ids and images of one block, read from markdown-it's inline tokens, so code
spans, escapes and reference definitions follow CommonMark rather than a regex's guess.

`plain_markup` reads inline Markdown as text over a polars column: what descriptions and
report sentences taken from a page's text show (a link as its text, no tags, no emphasis).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl
from markdown_it.common.utils import normalizeReference
from markdown_it.token import Token

from pipeline.sentences import wordset
from pipeline.structure.images import image_link, image_words, is_data_uri
from pipeline.structure.markdown_myst import role_link, role_parts
from pipeline.structure.markdown_syntax import markdown_parser
from pipeline.structure.markdown_templates import BLOCK_REF
from pipeline.structure.model import slugify

# An attribute list closing a line: `{#id}`, `{: #id .cls }`, `{ id="x" key=v }`.
ATTR_LIST = re.compile(r"[ \t]*\{:?[ \t]*([^{}\n]*)\}[ \t]*$")
_AFTER_ATTR = re.compile(r"(?<=[)\]`:])\{:?[ \t]*([^{}\n]*)\}")
_ATTR_AT = re.compile(r"\{:?[ \t]*([^{}\n]*)\}")  # an attribute list where it starts
# mkdocs-material's icons (pymdownx.emoji): decoration, no text
ICON = re.compile(r"(?<![\w:]):(?:material|octicons|fontawesome|simple|twemoji)-[\w-]+:(?![\w:])")
_LINE_ATTR = re.compile(r"[ \t]*\{:?[ \t]*([^{}\n]*)\}[ \t]*$", re.M)
_ATTR = re.compile(r"""([#.])([\w:.-]+)|([\w:-]+)=(?:"([^"]*)"|'([^']*)'|(\S+))""")
_OBSIDIAN_ID = re.compile(r"(?:^|[ \t])\^([A-Za-z0-9-]+)[ \t]*$")  # ` ^id`, a block's end
# `[](){#id}`: an autorefs anchor, an empty link carrying an id
EMPTY_ANCHOR = re.compile(r"\[\]\(\)\{:?[ \t]*#([\w:.-]+)[^}]*\}")
HTML_LINK_OPEN = re.compile(r"<a\s[^>]*?\bhref=[\"']([^\"']*)[\"'][^>]*>", re.I)
HTML_LINK_CLOSE = re.compile(r"</a\s*>", re.I)
HTML_ANCHOR = re.compile(r"<a\s+[^>]*?(?:name|id)=[\"']([^\"']+)[\"'][^>]*>(?:\s*</a>)?", re.I)
AUTODOC_HEADING = re.compile(r"^[ \t]*:::[ \t]+([^\s{}]+)[ \t]*$")  # `## ::: pkg.Thing`
_SPACE = re.compile(r"\s+")


def attr_ids(attrs: str) -> list[str]:
    """The ids an attribute list's inner text sets (`#id` or `id=...`)."""
    out = []
    for m in _ATTR.finditer(attrs):
        if m.group(1) == "#":
            out.append(m.group(2))
        elif m.group(3) == "id":
            out.append(next(g for g in m.groups()[3:] if g is not None))
    return out


def _is_attr_list(inner: str) -> bool:
    """Does `{inner}` read as an attribute list (every part `#x`, `.x` or `k=v`)?"""
    rest = _ATTR.sub("", inner)
    return bool(inner.strip()) and not rest.strip()


def strip_line_attrs(text: str) -> tuple[str, list[str]]:
    """(text without `[](){#id}` anchors, attribute lists at line ends and right after a
    link, code span or icon (`[x](y){.internal-link}`, `:icon:{ .big }`), an Obsidian block
    id ending it (` ^id`) and mkdocs-material icon shortcodes (`:octicons-tag-24:`), the ids
    these set): attr_list puts those ids on the block or element, mkdocs-autorefs on an
    anchor there, Obsidian on the block."""
    ids = EMPTY_ANCHOR.findall(text)
    if ids:
        text = EMPTY_ANCHOR.sub("", text)
    if "}" in text:

        def attr(m: re.Match[str]) -> str:
            if not _is_attr_list(m.group(1)):
                return m.group(0)
            ids.extend(attr_ids(m.group(1)))
            return ""

        text = _LINE_ATTR.sub(attr, _AFTER_ATTR.sub(attr, text))
    if "^" in text and (m := _OBSIDIAN_ID.search(text)):  # the id as `[[Page#^id]]` names it
        ids.append("^" + m.group(1))
        text = text[: m.start()]
    if ":" in text:
        text = ICON.sub("", text)
    return text.strip(), ids


def plain_text(children: Sequence[Token]) -> str:
    """The rendered text of inline tokens: markup, tags and images dropped."""
    parts = []
    for t in children:
        if t.type in ("text", "code_inline"):
            parts.append(t.content)
        elif t.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif t.type == "wikilink":
            parts.append(t.meta["text"])
        elif t.type == "myst_role":
            parts.append(role_parts(t.content)[0])
    return _SPACE.sub(" ", "".join(parts)).strip()


def plain_inline(text: str) -> str:
    """Heading text as rendered (markup, tags, attribute lists dropped): what toc slugifies."""
    if (m := ATTR_LIST.search(text)) and _is_attr_list(m.group(1)):
        text = text[: m.start()]
    text = ICON.sub("", EMPTY_ANCHOR.sub("", text))
    parser = markdown_parser(myst="}`" in text)  # a MyST role renders as its text
    return plain_text(parser.parseInline(text, {})[0].children or [])


def heading_anchor(raw: str) -> tuple[str, str | None, list[str]]:
    """(title, explicit id or None, other anchors) of a heading's raw text: a closing
    attribute list's id (`{#id}`, `{: #id }`, `{ id="x" }`) is the heading's id, as in
    Python-Markdown; `[](){#old}` and `<a name="old">` in it are other anchors. A heading
    `## ::: pkg.Thing` (mkdocstrings' autodoc at that level) is the object's: id and title
    `pkg.Thing`."""
    explicit = None
    if (m := ATTR_LIST.search(raw)) and _is_attr_list(m.group(1)):
        ids = attr_ids(m.group(1))
        explicit = ids[-1] if ids else None
        raw = raw[: m.start()]
    anchors = HTML_ANCHOR.findall(raw) + EMPTY_ANCHOR.findall(raw)
    if thing := autodoc_object(raw):  # mkdocstrings renders the object's heading there
        return thing, explicit or thing, anchors
    return plain_inline(raw), explicit, anchors


def autodoc_object(raw: str) -> str | None:
    """The object of a heading `## ::: pkg.Thing` (attribute list aside), else None."""
    if (m := ATTR_LIST.search(raw)) and _is_attr_list(m.group(1)):
        raw = raw[: m.start()]
    return m.group(1) if (m := AUTODOC_HEADING.match(raw)) else None


def heading_ids(raw: str) -> list[str]:
    """The anchors a heading that opens no section (one inside a list item, quote or
    container) still has in the rendered page: its toc id and other anchors."""
    title, explicit, extra = heading_anchor(raw)
    own = explicit or slugify(title)
    return [own, *extra] if own else extra


def inline_links(children: Sequence[Token]) -> tuple[list[dict[str, str]], list[str], list[str]]:
    """(links, footnote labels referenced, anchor ids set by inline attributes) of one
    inline token's children. Links: {href, text, kind} with kind inline, reference,
    wikilink, block_ref (Logseq's `((uuid))`), autoref (MyST's `{doc}` role inline,
    `{ref}` autoref, an HTML `<a href>` inline) or image (its alt text the link's text);
    `[](){#id}` anchors and anything at a data URI are no links."""
    links: list[dict[str, str]] = []
    notes: list[str] = []
    ids: list[str] = []
    open_link: dict[str, str] | None = None
    text: list[Token] = []
    for t in children:
        if t.type == "image":  # an image in a link (a badge) too
            links += image_link(str(t.attrs.get("src", "")), plain_text(t.children or []))
        html_a = t.type == "html_inline" and t.content[:2].lower() in ("<a", "</")
        closing = t.type in ("link_close", "autoref_close") or (
            html_a and HTML_LINK_CLOSE.match(t.content) is not None
        )
        if open_link is not None and not closing:
            text.append(t)
            continue
        kind = "link_close" if closing else t.type
        if html_a and (m := HTML_LINK_OPEN.match(t.content)):  # `<a href="x">` in a line
            open_link, text = {"href": m.group(1), "kind": "inline"}, []
            continue
        if kind == "link_open" or kind == "autoref_open":
            if t.attrs.get("id"):
                ids.append(str(t.attrs["id"]))
            if kind == "autoref_open":
                open_link = {"href": t.meta["label"], "kind": "autoref"}
            else:
                link_kind = "reference" if "label" in t.meta else "inline"
                open_link = {"href": str(t.attrs.get("href", "")), "kind": link_kind}
            text = []
        elif kind in ("link_close", "autoref_close") and open_link is not None:
            label = plain_text(text)
            if open_link["href"] or label:
                links.append({"href": open_link["href"], "text": label, "kind": open_link["kind"]})
            open_link = None
        elif kind == "wikilink":
            links.append({**t.meta, "kind": "wikilink"})
        elif kind == "text" and "((" in t.content:  # Logseq's `((uuid))`: its block
            links += [
                {"href": b, "text": "", "kind": "block_ref"} for b in BLOCK_REF.findall(t.content)
            ]
        elif kind == "myst_role" and (link := role_link(t.meta.get("name", ""), t.content)):
            links.append(link)
        elif kind == "footnote_ref":
            notes.append(t.meta["label"])
        elif kind in ("image", "code_inline") and t.attrs.get("id"):
            ids.append(str(t.attrs["id"]))
        elif kind == "html_inline" and (m := HTML_ANCHOR.match(t.content)):
            ids.append(m.group(1))
    return [lk for lk in links if not is_data_uri(lk.get("href", ""))], notes, ids


def markdown_images(text: str, children: Sequence[Token]) -> str:
    """`text` (a block's inline Markdown) with each image markdown-it found in it
    (`children`, the source each keeps in `meta["markup"]`) as its words: alt text and
    title (pipeline.structure.images); its address is a link (`inline_links`), not text."""
    for t in children:
        markup = t.meta.get("markup") if t.type == "image" else None
        if not markup or (at := text.find(markup)) < 0:
            continue
        end = at + len(markup)
        if (m := _ATTR_AT.match(text, end)) and _is_attr_list(m.group(1)):
            end = m.end()  # `![x](y){.big}`: its attributes (their id is the image's) go too
        words = image_words(plain_text(t.children or []), str(t.attrs.get("title") or ""))
        text = text[:at] + words + text[end:]
    return text


def references_env(refs: dict[str, str]) -> dict[str, Any]:
    """A markdown-it env holding reference definitions label -> href."""
    return {
        "references": {normalizeReference(k): {"href": v, "title": ""} for k, v in refs.items()}
    }


def extract_links(text: str, refs: dict[str, str]) -> list[dict[str, str]]:
    """Links in a piece of inline Markdown (a note's details), in order: {href, text, kind};
    `refs`: reference definitions label -> href the text may use."""
    tokens = markdown_parser().parseInline(text, references_env(refs))
    return inline_links(tokens[0].children or [])[0]


# ---- inline Markdown as text, over a polars column (no parse: millions of sentences) -----

_CODE = r"(`+[^`]*`+)"  # kept whole while links are read, so a link in code stays code
_URL = r"\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)"  # `(url "title")`, `(a_(b))`
_LINKS = "|".join(
    (
        _CODE,
        r"\[\[(?:[^\[\]|]*\|)?([^\[\]|]+)\]\]",  # [[Page|text]] -> text
        r"!\[([^\[\]]*)\]" + _URL,  # ![alt](src) -> alt
        r"\[([^\[\]]*)\]" + _URL,  # [text](url) -> text
        r"\[([^\[\]]+)\]\[[^\[\]]*\]",  # [text][ref] -> text
    )
)
# HTML elements a page's text holds inline; `<DW53>` in a plain-text corpus is a word, not a tag
HTML_ELEMENTS = wordset(
    """a abbr b bdi bdo big blockquote br button caption center cite code dd del details dfn
    div dl dt em figcaption figure font h1 h2 h3 h4 h5 h6 hr i iframe img input ins kbd label
    li mark ol p picture pre q s samp section small source span strike strong sub summary sup
    table tbody td th thead tr tt u ul var video wbr"""
)
_TAG = "|".join(
    (
        r"<!--.*?-->",
        r"</?(?i:" + "|".join(sorted(HTML_ELEMENTS)) + r")(?:\s[^<>]*)?/?>",  # a known element
        r"</[A-Za-z][\w.:-]*\s*>",  # any closing tag
        r"<[A-Za-z][\w.:-]*(?:\s+[\w:.-]+=(?:\"[^\"]*\"|'[^']*'|[^\s<>\"']+))+\s*/?>",  # attrs
        r"<[A-Za-z][\w.:-]*\s*/>",  # self-closing
    )
)
# an escaped character or a code span: what it holds is no markup
_KEPT = r"(\\[!-/:-@\[-`{-~]|`+[^`]*`+)"
_UNKEPT = r"\\([!-/:-@\[-`{-~])|`+([^`]*)`+"
_INLINE = "|".join(
    (
        _KEPT,  # as written, until the last step
        r"<((?:https?|ftp|mailto):[^<>\s]*)>",  # <https://...> -> the address
        _TAG,
        r"\*\*([^*\s](?:[^*]*?[^*\s])?)\*\*",  # **strong**
        r"__([^_\s](?:[^_]*?[^_\s])?)__",  # __strong__
        r"~~([^~\s](?:[^~]*?[^~\s])?)~~",  # ~~struck~~
        r"\*([^*\s](?:[^*]*?[^*\s])?)\*",  # *emphasis*
        # _emphasis_ (Gutenberg's italics too), never from inside a word (snake_case)
        r"(^|[^\p{L}\p{N}_])_([^_\s](?:[^_]*?[^_\s])?)_",
    )
)
# a heading's, quote's or list item's marks opening the text
_BLOCK_MARKS = r"^(?:[ \t]*(?:#{1,6}|>|[-*+•]|\d{1,3}[.)])[ \t]+)+"


def plain_markup(text: pl.Expr) -> pl.Expr:
    """Inline Markdown and HTML in a string column read as text: a link or wikilink as its
    text, an image as its alt text, an autolink as its address, tags and comments dropped,
    emphasis marks (`**`, `__`, `*`, `_`, `~~`) and code span backticks dropped (what code
    spans hold stays as written), a heading's, quote's or list item's marks at the start
    dropped."""
    for _ in range(2):  # twice: an image inside a link (a badge) is read first
        text = text.str.replace_all(_LINKS, "${1}${2}${3}${4}${5}")
    for _ in range(2):  # twice: emphasis inside emphasis (`**a *b* c**`)
        text = text.str.replace_all(_INLINE, "${1}${2}${3}${4}${5}${6}${7}${8}")
    return (
        text.str.replace_all(_UNKEPT, "${1}${2}")
        .str.replace_all(_BLOCK_MARKS, "")
        .str.replace_all(r"\s{2,}", " ")
        .str.strip_chars()
    )

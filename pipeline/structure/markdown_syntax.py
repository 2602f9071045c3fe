"""The Markdown dialect of mkdocs sites on markdown-it-py: the CommonMark parser with the
mdit-py-plugins extensions (front matter, footnotes, definition lists, inline attributes,
GFM tables) and the rules no plugin covers as mkdocs does, written here:

- admonitions (`!!! note "Title"`, `??? note`, `???+ note`) and content tabs
  (`=== "Tab"`): containers whose content is the run of lines indented by 4 after the
  marker, blank lines included, as in Python-Markdown (`admonition_open` with the plugin's
  `meta["tag"]`, `tab_open`). mdit-py-plugins' admonition rule ends a block at two blank
  lines, which cuts mkdocs admonitions holding code with blank lines in two;
- mkdocstrings directives (`::: pkg.mod` + indented YAML options): one `directive` token,
  opaque, since what it renders comes from code, not from the page;
- colon-fenced containers, closed by a line of colons: Docusaurus admonitions (`:::tip`,
  `:::note[Title]`, `:::info Title`), VitePress and markdown-it-container (`::: warning`,
  `::: details Click`), Pandoc fenced divs and MyST (`::: {.note}`, `:::{note}`),
  remark-directive (`:::name{attrs}`), nested by longer fences: mdit-py-plugins'
  container plugin (`container_fenced_open`; `fenced_tag` reads its kind and title). A
  `::: x` line with no closing fence after it is a mkdocstrings directive;
- pymdown-extensions blocks (`/// tip | Title` ... `///`, as FastAPI's docs write admonitions
  and details): the same plugin with `/` fences (`container_blocks_open`); their indented
  YAML options after the header are no text;
- pymdown-extensions snippets (`--8<-- "file.md"`, or a `--8<--` line, file names one a
  line, `--8<--`): one `snippet` token naming the files (`meta["paths"]`, sections and line
  ranges after `:` left out), not a paragraph of markers. What a snippet includes is
  another file's text: the page refers to it (resolved as a link), it is not copied, so an
  edit of the included file re-indexes that file alone;
- content nested past FLAT_LEVEL (a list 1,000 deep): one `flat` token holding its lines,
  instead of markdown-it's own limit, which drops such content, and instead of recursing
  further (every nesting level costs Python stack frames);
- wikilinks (`[[Page#anchor|text]]`) and mkdocs-autorefs links (`[text][pkg.Thing]` with a
  label the page does not define): `wikilink` and `autoref_open` / `autoref_close` tokens;
- MyST (Jupyter Book, Sphinx): directives, roles, targets and comments, in
  `markdown_myst`; Hugo shortcodes and Liquid tags (GitBook, Jekyll) in `markdown_templates`;
- inline parsing only where something is read from it: headings (their rendered text is
  the slug), `parseInline` calls and text with `[`, `<`, `{` or `((` (links, footnote
  markers, anchors, Logseq's block references); other inline
  tokens keep no children, which halves the inline parse time of a typical page.

Link destinations are kept as written (no percent-encoding, no scheme filter): resolution
across documents reads them, nothing is rendered. An image token keeps its source as written
(`meta["markup"]`), which a block's text replaces by the image's words (pipeline.structure.images).
`alert_opened` reads a GitHub alert or Obsidian callout (`> [!NOTE]`) at a quote's start.
"""

from __future__ import annotations

import re
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline import image as image_rule
from markdown_it.token import Token
from mdit_py_plugins.attrs import attrs_plugin
from mdit_py_plugins.container import container_plugin
from mdit_py_plugins.deflist import deflist_plugin
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from mdit_py_plugins.utils import is_code_block

from pipeline.structure.markdown_myst import line_text, myst_plugin, push_snippet
from pipeline.structure.markdown_templates import template_plugin

# Token nesting level from which content is taken flat (lists add 2 levels each, so about
# 32 nested lists are parsed as blocks); MAX_NESTING (markdown-it's maxNesting) stays above
# it so markdown-it never drops content, and bounds inline nesting.
FLAT_LEVEL = 64
MAX_NESTING = 100

_TAB = re.compile(r"===\+?[ \t]+\"(.*?)\"[ \t]*$")
_ADMONITION = re.compile(
    r"(?:!!!|\?\?\?\+?)[ \t]*([\w-]+(?:[ \t]+[\w-]+)*)(?:[ \t]+\"(.*?)\")?[ \t]*$"
)
_DIRECTIVE = re.compile(r":::[ \t]+(\S+)")
_CLOSING_FENCE = re.compile(r":{3,}[ \t]*$")
# A fenced container's opening: `tip Title`, `note[Title]`, `{.note}`, `{note} Title`,
# `info{title="x"}`: the kind, then a title in brackets or after it.
_FENCED = re.compile(r"\{?\.?([\w-]+)\}?(?:\[(.*?)\])?(?:\{[^}]*\})?(.*)$")
_CODE_TITLE = re.compile(r"""title=(?:"([^"]*)"|'([^']*)'|(\S+))""")
_CODE_LABEL = re.compile(r"\[([^\]]+)\]")
_TRAILING_ATTRS = re.compile(r"[ \t]*\{[^{}]*\}$")
_BLOCK = re.compile(r"[ \t]*[\w-]+[ \t]*(?:\|.*)?$")  # `/// name | Title`
_SNIPPET = re.compile(r"-+8<-+(?:[ \t]+([\"'])(.+?)\1)?[ \t]*$")
_MARKERS = frozenset({"===", ":::", "!!!", "???"})
_READ_INLINE = re.compile(r"[\[<{]|\(\(")
_WIKILINK = re.compile(r"\[\[([^\[\]|#\n]*)(#[^\[\]|\n]*)?(?:\|([^\[\]\n]*))?\]\]")


def _indented_end(state: StateBlock, start: int, end: int, indent: int) -> int:
    """End (exclusive) of the run of lines after `start` that are blank or indented by at
    least `indent` columns, trailing blank lines left out."""
    last = line = start + 1
    while line < end:
        if not state.isEmpty(line):
            if state.sCount[line] < indent:
                break
            last = line + 1
        line += 1
    return last


def _container(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """Admonitions, content tabs and mkdocstrings directives (see the module docstring)."""
    pos = state.bMarks[start] + state.tShift[start]
    if state.src[pos : pos + 3] not in _MARKERS or is_code_block(state, start):
        return False
    text = line_text(state, start)
    admonition = _ADMONITION.match(text) if text[0] in "!?" else None
    tab = _TAB.match(text) if text[0] == "=" else None
    directive = _DIRECTIVE.match(text) if text[0] == ":" else None
    if directive is not None and _closed(state, start):
        directive = None  # a fenced container (the container plugin's)
    if admonition is None and tab is None and directive is None:
        return False
    if silent:
        return True
    indent = state.sCount[start] + 4
    stop = _indented_end(state, start, end, indent)
    if directive is not None:
        token = state.push("directive", "div", 0)
        body = [text.strip()] + [
            state.src[state.bMarks[k] : state.eMarks[k]][indent:] for k in range(start + 1, stop)
        ]
        token.content = "\n".join(body).rstrip()
        token.info = directive.group(1)
        token.map = [start, stop]
        state.line = stop
        return True
    name = "admonition" if admonition else "tab"
    old = state.parentType, state.lineMax, state.blkIndent
    state.parentType, state.lineMax, state.blkIndent = name, stop, indent
    token = state.push(f"{name}_open", "div", 1)
    if admonition:
        token.meta = {"tag": admonition.group(1).split()[0].lower()}
        token.info = admonition.group(2) or ""
    else:
        token.info = tab.group(1) if tab else ""
    token.map = [start, stop]
    state.md.block.tokenize(state, start + 1, stop)
    state.push(f"{name}_close", "div", -1)
    state.parentType, state.lineMax, state.blkIndent = old
    state.line = stop
    return True


def _closed(state: StateBlock, start: int) -> bool:
    """Whether a line of colons alone closes the fence opened at line `start`: the
    document's colon fences paired off in order, once a parse (`state.env`)."""
    closed = state.env.get("colon_fences_closed")
    if closed is None:
        closed, open_at = set(), []
        for k, line in enumerate(state.src.split("\n")):
            line = line.strip()
            if not line.startswith(":::"):
                continue
            if not _CLOSING_FENCE.match(line):
                open_at.append(k)
            elif open_at:
                closed.add(open_at.pop())
        state.env["colon_fences_closed"] = closed
    return start in closed


def fenced_tag(info: str) -> tuple[str, str]:
    """(kind, title) of a colon-fenced container's opening line after its colons."""
    m = _FENCED.match(info.strip())
    if m is None:
        return "div", info.strip()
    title = (m.group(2) or m.group(3) or "").strip().lstrip("|").strip()
    return m.group(1).lower(), _TRAILING_ATTRS.sub("", title)  # `details Title {open}`


def code_info(info: str) -> dict[str, str]:
    """A fence's language (lower-cased, its flags left out: `js{4}`, `ts:line-numbers`) and
    title (`title="app.js"`, VitePress' `[npm]`, Mintlify's file name after the language)."""
    words = info.split()
    if not words:
        return {"language": ""}
    meta = {"language": re.split(r"[{:\[]", words[0], maxsplit=1)[0].lower()}
    if m := _CODE_TITLE.search(info):
        meta["title"] = next(g for g in m.groups() if g is not None)
    elif m := _CODE_LABEL.search(info):
        meta["title"] = m.group(1)
    elif len(words) > 1 and "=" not in words[1] and words[1][0] not in "{[(":
        meta["title"] = words[1]
    return meta


def snippet_path(spec: str) -> str:
    """The file of a snippet spec: `file.md:3:5` / `file.md:name` -> `file.md` (a URL whole)."""
    spec = spec.strip()
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", spec):
        return spec
    return spec.split(":", 1)[0]


def _snippet(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """pymdown-extensions snippets (see the module docstring); `;--8<--` is escaped text."""
    if is_code_block(state, start):
        return False
    pos = state.bMarks[start] + state.tShift[start]
    if state.src[pos] != "-" or "8<" not in state.src[pos : pos + 16]:
        return False
    m = _SNIPPET.match(line_text(state, start))
    if m is None:
        return False
    if silent:
        return True
    stop, specs = start + 1, [m.group(2)] if m.group(2) else []
    if not specs:  # the block form: a file a line up to the closing marker
        while stop < end and not _SNIPPET.match(line_text(state, stop)):
            line = line_text(state, stop).strip()
            if line and not line.startswith(";"):  # ';' comments a file out
                specs.append(line)
            stop += 1
        stop = min(stop + 1, end)
    push_snippet(state, list(map(snippet_path, specs)), (start, stop))
    state.line = stop
    return True


def _deep_flat(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """Past FLAT_LEVEL: the container's remaining lines as one `flat` token, no recursion."""
    if state.level < FLAT_LEVEL:
        return False
    if silent:
        return True
    line = last = start
    while line < end:
        if not state.isEmpty(line):
            if state.sCount[line] < state.blkIndent and line > start:
                break
            last = line + 1
        line += 1
    token = state.push("flat", "", 0)
    token.content = "\n".join(line_text(state, k) for k in range(start, last))
    token.map = [start, last]
    state.line = last
    return True


def _wikilink(state: StateInline, silent: bool) -> bool:
    if not state.src.startswith("[[", state.pos):
        return False
    m = _WIKILINK.match(state.src, state.pos, state.posMax)
    if m is None:
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        page, anchor, alias = m.group(1) or "", m.group(2) or "", m.group(3)
        token.meta = {"href": page.strip() + anchor, "text": (alias or page + anchor).strip()}
    state.pos = m.end()
    return True


def _autoref(state: StateInline, silent: bool) -> bool:
    """`[text][label]` / `[label][]` whose label is no reference of the page (the link rule,
    which runs first, failed on it): an mkdocs-autorefs identifier. Not after `!` (an image)."""
    pos = state.pos
    if state.src[pos] != "[" or state.linkLevel > 0 or (pos and state.src[pos - 1] == "!"):
        return False
    label_end = state.md.helpers.parseLinkLabel(state, pos, True)
    if label_end < 0 or label_end + 1 >= state.posMax or state.src[label_end + 1] != "[":
        return False
    ref_end = state.md.helpers.parseLinkLabel(state, label_end + 1)
    if ref_end < 0:
        return False
    label = state.src[label_end + 2 : ref_end] or state.src[pos + 1 : label_end]
    if not silent:
        maximum = state.posMax
        token = state.push("autoref_open", "a", 1)
        token.meta = {"label": label.strip()}
        state.pos, state.posMax = pos + 1, label_end
        state.linkLevel += 1
        state.md.inline.tokenize(state)
        state.linkLevel -= 1
        state.push("autoref_close", "a", -1)
        state.posMax = maximum
    state.pos = ref_end + 1
    return True


def _image(state: StateInline, silent: bool) -> bool:
    """markdown-it's image rule, keeping the image's source as written (`meta["markup"]`):
    where it stands in a block's text it reads as its words (markdown_inline.markdown_images)."""
    start = state.pos
    if not image_rule(state, silent):
        return False
    if not silent:
        state.tokens[-1].meta["markup"] = state.src[start : state.pos]
    return True


def _inline_where_read(state: StateCore) -> None:
    """markdown-it's core `inline` rule, for the inline tokens anything is read from."""
    tokens = state.tokens
    for i, token in enumerate(tokens):
        if token.type != "inline":
            continue
        if token.children is None:
            token.children = []
        heading = i > 0 and tokens[i - 1].type == "heading_open"
        if heading or state.inlineMode or _READ_INLINE.search(token.content):
            state.md.inline.parse(token.content, state.md, state.env, token.children)


@cache
def markdown_parser(myst: bool = False) -> MarkdownIt:
    """The shared parser: CommonMark + GFM tables + the mkdocs extensions above; with `myst`,
    the one for documents that use MyST (`markdown_myst`)."""
    md = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING, "store_labels": True})
    md.enable("table")
    md.normalizeLink = lambda url: url  # type: ignore[method-assign]
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    md.use(front_matter_plugin).use(deflist_plugin)
    md.use(footnote_plugin, inline=False, move_to_end=False)
    md.use(attrs_plugin, after=("image", "code_inline", "link_close"))
    md.block.ruler.before("table", "deep_flat", _deep_flat)
    alt = {"alt": ["paragraph", "reference", "blockquote", "list"]}
    md.block.ruler.before("fence", "container", _container, alt)
    md.block.ruler.before("fence", "snippet", _snippet, alt)
    if myst:  # before the container plugin: it takes `:::{note}` with options
        md.use(myst_plugin)
    md.use(template_plugin)
    # after `container`, which leaves it the `::: x` lines a colon fence closes
    container_plugin(md, "fenced", validate=lambda params, *_: bool(params.strip()))
    container_plugin(md, "blocks", marker="/", validate=lambda p, *_: bool(_BLOCK.match(p)))
    md.core.ruler.at("inline", _inline_where_read)
    md.inline.ruler.before("link", "wikilink", _wikilink)
    md.inline.ruler.after("link", "autoref", _autoref)
    md.inline.ruler.at("image", _image)
    return md


ALERT = re.compile(r"\[!([\w-]+)\][+-]?[ \t]*([^\n]*)(?:\n|$)")


def alert_opened(tokens: list[Token], i: int) -> tuple[str, str] | None:
    """(kind, title) of a GitHub alert or Obsidian callout opened at tokens[i] (`> [!NOTE]`,
    `> [!tip]- Title` first in a quote), its marker line taken out of the first
    paragraph's text; None for any other quote."""
    if i + 2 >= len(tokens) or tokens[i + 1].type != "paragraph_open":
        return None
    inline = tokens[i + 2]
    m = ALERT.match(inline.content)
    if m is None:
        return None
    inline.content = inline.content[m.end() :]
    return m.group(1).lower(), m.group(2).strip()

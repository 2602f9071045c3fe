"""Template tags of static site generators in Markdown pages, read as what they render:
Hugo shortcodes (`{{< hint info >}}` ... `{{< /hint >}}`, `{{% notice tip %}}` ...
`{{% /notice %}}`) and Liquid tags (GitBook's `{% hint style="info" %}` ... `{% endhint %}`,
`{% tabs %}` / `{% tab title="Linux" %}`, Jekyll's `{% highlight python %}`).

A line holding one tag alone is no text. A tag its closing tag pairs (the document's tags
paired by name once a parse, nesting kept) holds Markdown: a container
(`site_container_open`), admonition-like ones (`hint`, `notice`, `alert`, `callout`, ...)
as `admonition:<kind>` (kind from `style=`, `type=`, `color=` or the first bare argument),
the others as `directive:<name>`, titled by `title=`, `header=` or the first quoted
argument; Liquid's `if` / `for` / `raw` hold their lines without a container, `comment`
hides them, and `highlight`, `mermaid`, `code`, `output`, ... (or any tag with a `lang=`)
are code. A tag alone may still carry text or a file: a figure's caption (a paragraph), an
include's file (a snippet link), an embed's URL (a link).

Tags inside a line of text are markup, not text: `strip_markup` drops them from a
paragraph's text (what they wrap stays: `{{% badge %}}0.126{{% /badge %}}` reads 0.126).
Link destinations that are tags (`[text]({{< ref "page.md" >}})`, `{% link page.md %}`,
`{% post_url 2020-01-01-name %}`, `{{ '/x/' | relative_url }}`) are no CommonMark links
(they hold spaces): `link_tags` rewrites them, outside code, to the paths they name before
parsing, on the same lines.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from mdit_py_plugins.utils import is_code_block

from pipeline.ingest.markdown import in_fences
from pipeline.structure.markdown_myst import line_text, push_container, push_snippet

# A tag's arguments never run past the end of the tag (`{{< a >}} text {{< /a >}}` is two)
_HUGO = re.compile(
    r"\{\{([<%])[ \t]*(/)?[ \t]*([\w./-]+)((?:(?![>%]\}\}).)*?)[ \t]*(/)?[ \t]*[>%]\}\}"
)
_LIQUID = re.compile(r"\{%-?[ \t]*([\w-]+)((?:(?!-?%\}).)*?)[ \t]*-?%\}")
# A JSX component (MDX: `<Callout type="info">`, `</Steps>`, `<Badge text="new" />`) or one
# of the HTML elements sites wrap Markdown in, alone on its line.
_JSX = re.compile(
    r"<(/)?([A-Z][\w.]*|details|div|section|aside|figure)((?:[ \t]+[^<>]*?)?)[ \t]*(/)?>"
)
# Tags inside a line of text (`{{% badge %}}0.126{{% /badge %}}`, `{% include x.html %}`):
# markup of the site, not text; what they wrap stays.
INLINE_TAG = re.compile(r"\{\{[<%](?:(?![>%]\}\}).)*[>%]\}\}|\{%-?(?:(?!%\}).)*%\}")
_MARKUP = re.compile(r"\{\{|\{%|<|%%|==|::|\(\(")  # any of the markup below, maybe
_NOTE_COMMENT = re.compile(r"%%.*?%%", re.S)
_HIGHLIGHT = re.compile(r"(?<![=\w])==(?=\S)(.+?)(?<=\S)==(?![=\w])")
_PROPERTY = re.compile(r"^[ \t]*[\w-]+::(?:[ \t].*)?$\n?", re.M)
BLOCK_REF = re.compile(r"\(\(([0-9a-f]{8}-[0-9a-f-]{27})\)\)")  # Logseq's ((uuid))
# a Logseq block's own id (`id:: uuid`, the property Logseq writes for a referenced block)
BLOCK_ID = re.compile(r"^[ \t]*id::[ \t]*([0-9a-f]{8}-[0-9a-f-]{27})[ \t]*$", re.M)
# Logseq macros that show other blocks, pages or media (`{{embed ((uuid))}}`, `{{query x}}`):
# no text of this page (an embed's reference stays a link)
_MACRO = re.compile(r"\{\{(?:embed|query|renderer|video|youtube|tweet|namespace)\b[^{}]*\}\}")
_HTML_TAG = re.compile(r"</?[A-Za-z][\w.:-]*(?:[ \t\n]+[^<>]*)?/?>")
_CODE_SPAN = re.compile(r"(`+[^`]*`+)")
_ARG = re.compile(r"""([\w-]+)=(?:"([^"]*)"|'([^']*)'|(\S+))|"([^"]*)"|'([^']*)'|(\S+)""")
_LINK_TAG = re.compile(
    r"\]\([ \t]*(?:\{\{[^{}<%]*\}\})?(?:"
    r"\{\{[<%][ \t]*(?:rel)?ref[ \t]+[\"']?([^\"'\s]+?)[\"']?[ \t]*[>%]\}\}"
    r"|\{%-?[ \t]*link[ \t]+/?(\S+?)[ \t]*-?%\}"
    r"|\{%-?[ \t]*post_url[ \t]+(\S+?)[ \t]*-?%\}"
    r"|\{\{[ \t]*[\"']([^\"']+)[\"'][ \t]*\|[ \t]*(?:relative|absolute)_url[ \t]*\}\})"
)
ADMONITIONS = frozenset(
    {"hint", "notice", "alert", "callout", "admonition", "note", "tip", "warning", "info"}
    | {"aside", "caution", "danger", "check", "important"}
)
TRANSPARENT = frozenset({"raw", "if", "unless", "for", "case", "capture"})
# Tags whose body is code or a diagram, not Markdown (and any tag with a `lang=`).
CODE_TAGS = frozenset(
    {"highlight", "code", "output", "mermaid", "plantuml", "katex", "math", "code-toggle"}
    | {"multiconfig", "kroki", "chart"}
)
INCLUDES = frozenset({"include", "include_relative", "readfile", "include-markdown"})
_CAPTION_KEYS = ("caption", "title", "alt")
_INCLUDE_LINE = re.compile(
    r"<<<[ \t]+(\S+)(?:[ \t].*)?|\{!>?[ \t]*(\S+?)[ \t]*!\}|\{\*[ \t]*(\S+?)(?:[ \t][^*]*)?\*\}"
)
_TOC_MARKERS = frozenset({"[[toc]]", "[toc]", "[[_toc_]]"})
_TITLE_KEYS = ("title", "header", "label", "summary")
# Containers of tabs, steps or columns: a quoted argument of theirs is an id, no title.
_GROUPS = frozenset({"tabs", "tab-set", "columns", "steps", "cards", "code-group"})


def parse_tag(line: str) -> tuple[str, bool, str] | None:
    """(name, closing, arguments) of a line that is one template tag alone, else None."""
    line = line.strip()
    if (m := _HUGO.fullmatch(line)) is not None:
        if m.group(1) == "<" and not line.endswith(">}}") or m.group(3).startswith("/*"):
            return None
        return m.group(3).lower(), bool(m.group(2)), m.group(4)
    if (m := _LIQUID.fullmatch(line)) is not None:
        name = m.group(1).lower()
        closing = name.startswith("end") and len(name) > 3
        return (name[3:] if closing else name), closing, m.group(2)
    if (m := _JSX.fullmatch(line)) is not None:  # self-closing: never paired, a tag alone
        return m.group(2).lower() + ("/" if m.group(4) else ""), bool(m.group(1)), m.group(3)
    return None


def arguments(text: str) -> tuple[dict[str, str], list[str]]:
    """(named, positional) arguments of a tag: `key="v"` / `key=v`, `"quoted"`, `bare`."""
    named: dict[str, str] = {}
    positional: list[str] = []
    for m in _ARG.finditer(text):
        if m.group(1):
            named[m.group(1).lower()] = next(g for g in m.groups()[1:4] if g is not None)
        else:
            positional.append(next(g for g in m.groups()[4:] if g is not None))
    return named, positional


def _pairs(state: StateBlock) -> dict[int, int]:
    """Opening tag line -> its closing tag's line, for the whole document, once a parse."""
    pairs = state.env.get("template_pairs")
    if pairs is None:
        pairs, open_at = {}, {}
        for k, line in enumerate(state.src.split("\n")):
            if ("{" not in line and "<" not in line) or (tag := parse_tag(line)) is None:
                continue
            name, closing, _ = tag
            if closing and open_at.get(name):
                pairs[open_at[name].pop()] = k
            elif not closing:
                open_at.setdefault(name, []).append(k)
        state.env["template_pairs"] = pairs
    return pairs


def _template(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    pos = state.bMarks[start] + state.tShift[start]
    if state.src[pos] not in "{<" or is_code_block(state, start):
        return False
    tag = parse_tag(line_text(state, start))
    if tag is None:
        return False
    if silent:
        return True
    name, closing, args = tag
    if name in TRANSPARENT:  # its lines are the page's own: the tag lines alone go
        state.line = start + 1
        return True
    close = None if closing else _pairs(state).get(start)
    if close is not None and close >= end:  # closed outside this container: a tag alone
        close = None
    named, positional = arguments(args)
    if close is None:
        _alone(state, start, name, named, positional)
        state.line = start + 1
        return True
    span = (start, close + 1)
    language = named.get("lang") or named.get("language")
    if name in CODE_TAGS or language:
        bare = positional[0] if positional and name == "highlight" else ""
        token = state.push("fence", "code", 0)
        token.info = language or bare or ("" if name in ("code", "output") else name)
        token.content = state.getLines(start + 1, close, state.sCount[start], True)
        token.map = list(span)
    elif name != "comment":
        kind = named.get("style") or named.get("type") or named.get("color")
        bare = [p for p in positional if not _quoted(args, p)]
        if name in ADMONITIONS:
            tag_name = f"admonition:{(kind or (bare[0] if bare else name)).lower()}"
        else:
            tag_name = f"directive:{name}"
        quoted = [p for p in positional if _quoted(args, p) and name not in _GROUPS]
        title = next((named[k] for k in _TITLE_KEYS if named.get(k)), quoted[0] if quoted else "")
        jsx = state.src[pos] == "<"
        push_container(state, tag_name, title, span, start + 1, close, dedent=jsx)
    state.line = close + 1
    return True


def _quoted(args: str, value: str) -> bool:
    return f'"{value}"' in args or f"'{value}'" in args


def _alone(
    state: StateBlock, start: int, name: str, named: dict[str, str], positional: list[str]
) -> None:
    """A tag no closing tag pairs: an include's file, else a figure-like tag's caption."""
    name = name.rstrip("/")
    if name in INCLUDES:
        path = named.get("file") or (positional[0] if positional else "")
        if path:
            push_snippet(state, [path], (start, start + 1))
        return
    text = next((named[k] for k in _CAPTION_KEYS if named.get(k)), "")
    if name == "embed" and (url := named.get("url") or "").startswith(("http://", "https://")):
        text = f"<{url}>"  # GitBook's embed: a link to what it shows
    if text:
        push_text(state, f"directive:{name}", text, start)


def push_text(state: StateBlock, tag: str, text: str, line: int) -> None:
    """A paragraph `text` of line `line`, in a container `tag`."""
    span = [line, line + 1]
    state.push("site_container_open", "div", 1).meta = {"tag": tag, "title": ""}
    state.push("paragraph_open", "p", 1).map = span
    inline = state.push("inline", "", 0)
    inline.content, inline.map, inline.children = text, span, []
    state.push("paragraph_close", "p", -1)
    state.push("site_container_close", "div", -1)


def link_tags(text: str) -> str:
    """`](tag)` link destinations that are template tags, as the paths they name, outside
    code fences (on the same lines)."""
    if "](" not in text or "{" not in text or _LINK_TAG.search(text) is None:
        return text

    def path(m: re.Match[str]) -> str:
        ref, link, post, url = m.group(1), m.group(2), m.group(3), m.group(4)
        if ref or url:
            return f"]({ref or url}"
        return f"](/{link}" if link else f"](/_posts/{post}"

    lines = text.split("\n")
    code = in_fences(lines)
    return "\n".join(
        line if code[k] or "](" not in line else _LINK_TAG.sub(path, line)
        for k, line in enumerate(lines)
    )


def strip_markup(text: str) -> str:
    """Text without the markup of sites and note apps in it, code spans left as written:
    template tags and HTML / JSX tags (what they wrap stays), Obsidian `%%comments%%` and
    `==highlights==` (the text stays), Logseq / Dataview `key:: value` property lines, and
    Logseq's `((block-ref))` ids and `{{embed ...}}` macros."""
    if not _MARKUP.search(text):
        return text
    parts = _CODE_SPAN.split(text)
    for k in range(0, len(parts), 2):  # the even parts are outside code spans
        part = _HTML_TAG.sub("", INLINE_TAG.sub("", parts[k]))
        part = _HIGHLIGHT.sub(r"\1", _NOTE_COMMENT.sub("", part))
        parts[k] = BLOCK_REF.sub("", _MACRO.sub("", _PROPERTY.sub("", part)))
    return "".join(parts).strip()


def _include_line(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """A line that includes a file (VitePress `<<< @/snippets/x.js{2}`, mdx_include's
    `{!> ../docs_src/x.py !}`, FastAPI's `{* ../docs_src/x.py hl[3] *}`: a snippet link)
    or places a table of contents (`[[toc]]`, `[TOC]`: nothing)."""
    pos = state.bMarks[start] + state.tShift[start]
    if state.src[pos] not in "<{[" or is_code_block(state, start):
        return False
    line = line_text(state, start).strip()
    m = _INCLUDE_LINE.fullmatch(line)
    if m is None and line.lower() not in _TOC_MARKERS:
        return False
    if silent:
        return True
    if m is not None:
        push_snippet(state, included(line), (start, start + 1))
    state.line = start + 1
    return True


def included(line: str) -> list[str]:
    """The file an include line names (`<<< @/x.js{2}` -> x.js), none for other lines."""
    line = line.strip()
    if not line.startswith(("<<<", "{!", "{*")):
        return []
    m = _INCLUDE_LINE.fullmatch(line)
    path = re.sub(r"^@/|[{#\[].*$", "", next(filter(None, m.groups()), "") if m else "")
    return [path] if path else []


def template_plugin(md: MarkdownIt) -> None:
    alt: dict[str, Any] = {"alt": ["paragraph", "reference", "blockquote", "list"]}
    md.block.ruler.before("fence", "template_tag", _template, alt)
    md.block.ruler.before("fence", "include_line", _include_line, alt)

"""MyST Markdown (Jupyter Book, Sphinx with myst-parser) on markdown-it-py: directives,
roles, targets and comments, so a MyST site reads as its pages render rather than as code.

- directives: a fence whose info is `{name} argument` (backticks, tildes, or MyST's colon
  fence `:::{name}`), its options first in the body (`:key: value` lines, or a `---` YAML
  block). By name: code-like ones (`code-block`, `code-cell`, `math`, `eval-rst`,
  `mermaid`, ...) are a `fence` token (the language from the argument); `list-table` and
  `csv-table` the tokens of a table; `toctree` a
  `snippet` token of kind `toctree` naming its entries (the site's page tree: links of the
  section); `include` / `literalinclude` a snippet of their file; every other one (`note`,
  `warning`, `admonition`, `dropdown`, `figure`, `tab-item`, `card`, ...) a container whose
  body is Markdown (`site_container_open` / `_close`, meta `tag` and `title`), as myst-parser and
  sphinx-design render them. Its `name` / `label` option is an anchor (a `myst_target`
  token), what `{ref}` and `{numref}` point to;
- roles (`{doc}`path``, `{ref}`text <label>``): mdit-py-plugins' `myst_role` tokens, read
  as links by `markdown_inline.inline_links` (`role_link`);
- targets `(label)=` (the anchor of the heading after them), `+++` block breaks and `%`
  comment lines: mdit-py-plugins' MyST block rules.

These rules make a parser of their own (`markdown_syntax.markdown_parser(myst=True)`), for
the documents that use MyST (`uses_myst`: a directive fence, a role or a target in them):
elsewhere a line may start with a percent sign, and other pages pay nothing for the rules.
"""

from __future__ import annotations

import csv
import re
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from mdit_py_plugins.myst_blocks import myst_block_plugin
from mdit_py_plugins.myst_role import myst_role_plugin
from mdit_py_plugins.utils import is_code_block

# `{name}` or the old `{admonition,tip}` (the name, then a class)
_OPEN = re.compile(
    r"(`{3,}|~{3,}|:{3,})[ \t]*\{([A-Za-z][\w:.+-]*)(?:,([\w-]+))?\}[ \t]*(.*?)[ \t]*$"
)
_OPTION = re.compile(r":([\w-]+):(?:[ \t]+(.*?))?[ \t]*$")
_ROLE_TARGET = re.compile(r"(.*?)\s*<([^<>]+)>\s*$", re.S)
# What shows a document uses MyST: a directive fence, a role or a `(label)=` target.
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,}|:{3,})[ \t]*\{[A-Za-z][\w:.+-]*\}", re.M)
_FENCE_ANYWHERE = re.compile(r"(?:```|~~~|:::)[ \t]*\{[A-Za-z]")  # no `^`: a fast first look
_ROLE = re.compile(r"\{[A-Za-z][\w:+-]*\}`")
_ROLE_USE = re.compile(r"(?<!`)\{[A-Za-z][\w:+-]*\}`([^`]+)`")
_TARGET = re.compile(r"^\([^\s()]+\)=[ \t]*$", re.M)

# Directives whose body is not Markdown: a CODE node, language = argument or this value.
CODE = {
    "code-block": "",
    "code": "",
    "sourcecode": "",
    "code-cell": "",
    "math": "math",
    "eval-rst": "rst",
    "raw": "",
    "mermaid": "mermaid",
    "graphviz": "dot",
    "plantuml": "plantuml",
    "jupyter-execute": "python",
    "ipython": "python",
}
# A fence `{python}` / `{r}` is a code cell of Quarto or R Markdown, not a directive.
LANGUAGES = frozenset(
    "python r julia bash sh sql js javascript ojs c cpp rust go java dot stan ruby "  # noqa: SIM905
    "powershell yaml json toml html css scala octave matlab".split()
)
ADMONITIONS = frozenset(
    "admonition attention caution danger error hint important note seealso tip todo "  # noqa: SIM905
    "warning versionadded versionchanged deprecated dropdown".split()
)
INCLUDES = frozenset({"include", "literalinclude"})
TABLES = frozenset({"list-table", "csv-table"})
# The argument of these is a file, not a title.
_PATH_ARGUMENT = frozenset({"figure", "image", "bibliography"})
ROLE_LINKS = {"doc": "inline", "download": "inline", "ref": "autoref", "numref": "autoref"}


def uses_myst(text: str) -> bool:
    if "}`" in text and _ROLE.search(text):
        return True
    if ")=" in text and _TARGET.search(text):
        return True
    return _FENCE_ANYWHERE.search(text) is not None and _FENCE.search(text) is not None


def line_text(state: StateBlock, line: int) -> str:
    """A line's content from where its container says it starts."""
    return state.src[state.bMarks[line] + state.tShift[line] : state.eMarks[line]]


def _closing(state: StateBlock, start: int, end: int, fence: str) -> tuple[int, int]:
    """(end of the body, line after the directive): the first line of at least the fence's
    characters alone, else where the enclosing container ends (CommonMark's fence rule)."""
    line = start + 1
    while line < end:
        if not state.isEmpty(line) and state.sCount[line] < state.blkIndent:
            break
        text = line_text(state, line).rstrip()
        if (
            state.sCount[line] - state.blkIndent < 4
            and len(text) >= len(fence)
            and text == fence[0] * len(text)
        ):
            return line, line + 1
        line += 1
    return line, line


def _options(state: StateBlock, first: int, stop: int) -> tuple[dict[str, Any], int]:
    """(options, first line of the content) of a directive body starting at line `first`."""
    options: dict[str, Any] = {}
    line = first
    if line < stop and line_text(state, line).rstrip() == "---":
        ends = (k for k in range(line + 1, stop) if line_text(state, k).rstrip() == "---")
        close = next(ends, None)
        if close is not None:
            block = "\n".join(line_text(state, k) for k in range(line + 1, close))
            try:
                loaded = yaml.safe_load(block)
            except yaml.YAMLError:
                loaded = None
            return (loaded if isinstance(loaded, dict) else {}), close + 1
    while line < stop and (m := _OPTION.match(line_text(state, line))):
        options[m.group(1)] = m.group(2) or ""
        line += 1
    while options and line < stop and state.isEmpty(line):  # the blank line after them
        line += 1
    return options, line


def _directive(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    if is_code_block(state, start):
        return False
    pos = state.bMarks[start] + state.tShift[start]
    if state.src[pos] not in "`~:":
        return False
    m = _OPEN.match(line_text(state, start))
    if m is None or (m.group(1)[0] == "`" and "`" in m.group(4)):
        return False
    if silent:
        return True
    fence, name, argument = m.group(1), m.group(2).lower(), m.group(4)
    body_end, after = _closing(state, start, end, fence)
    options, content = _options(state, start + 1, body_end)
    if m.group(3):
        options.setdefault("class", m.group(3))
    for key in ("name", "label"):
        if label := str(options.get(key) or "").strip():
            anchor = state.push("myst_target", "", 0)
            anchor.content, anchor.map = label, [start, start + 1]
    if name in TABLES:
        _table(state, (start, after), name, argument, options, content, body_end)
    elif name in CODE or name in LANGUAGES or name == "toctree" or name in INCLUDES:
        _leaf(state, start, after, name, argument, content, body_end)
    else:
        kind = name
        if name == "admonition":  # `:class: tip` gives a generic admonition its look
            kind = (str(options.get("class") or "").split() or [name])[0]
        tag = f"admonition:{kind}" if name in ADMONITIONS else f"directive:{name}"
        title = "" if name in _PATH_ARGUMENT else argument
        push_container(state, tag, title, (start, after), content, body_end)
    state.line = after
    return True


def push_container(
    state: StateBlock,
    tag: str,
    title: str,
    span: tuple[int, int],
    first: int,
    stop: int,
    dedent: bool = False,
) -> None:
    """A container of a site generator's syntax (a MyST directive, a Hugo shortcode, a
    Liquid tag, a JSX component) spanning `span`, its lines `first`..`stop` (exclusive)
    parsed as Markdown; with `dedent`, as indented as its least indented line (MDX indents
    a component's content, which is no code block)."""
    old = state.parentType, state.lineMax, state.blkIndent
    state.parentType, state.lineMax = "site_container", stop
    if dedent:
        indents = [state.sCount[k] for k in range(first, stop) if not state.isEmpty(k)]
        state.blkIndent = max(state.blkIndent, min(indents, default=0))
    token = state.push("site_container_open", "div", 1)
    token.meta, token.map = {"tag": tag, "title": title}, list(span)
    state.md.block.tokenize(state, first, stop)
    state.push("site_container_close", "div", -1)
    state.parentType, state.lineMax, state.blkIndent = old


def _leaf(
    state: StateBlock, start: int, after: int, name: str, arg: str, content: int, body_end: int
) -> None:
    """A directive that holds no Markdown: a page tree, an included file or code."""
    if name == "toctree":
        lines = (line_text(state, k).strip() for k in range(content, body_end))
        paths = [_entry(x) for x in lines if x and x != "self" and not re.search(r"[*?]", x)]
        push_snippet(state, paths, (start, after), "toctree")
    elif name in INCLUDES:
        push_snippet(state, [arg.strip()], (start, after))
    else:
        token = state.push("fence", "code", 0)
        token.info = name if name in LANGUAGES else CODE[name] or (arg.split() or [""])[0]
        token.content = state.getLines(content, body_end, state.sCount[start], True)
        token.meta, token.map = {"directive": name}, [start, after]


def _table(
    state: StateBlock,
    span: tuple[int, int],
    name: str,
    title: str,
    options: dict[str, Any],
    content: int,
    body_end: int,
) -> None:
    """A `list-table` (rows of a bullet list of cells) or a `csv-table` (its body, and a
    `:header:` option, as CSV), as the tokens of a GFM table: one TABLE node, its cells
    read (and their links found) as any table's; its title leads the node's text."""
    rows: list[list[tuple[str, int]]] = []  # cells: (inline Markdown, line)
    if name == "csv-table":
        header = str(options.get("header") or "")
        lines = [(header, span[0])] if header else []
        lines += [(line_text(state, k), k) for k in range(content, body_end)]
        for line, k in lines:
            for cells in csv.reader([line], skipinitialspace=True):
                if cells:
                    rows.append([(c.strip(), k) for c in cells])
    else:
        mark, old = len(state.tokens), state.lineMax
        state.lineMax = body_end
        state.md.block.tokenize(state, content, body_end)
        state.lineMax = old
        depth = 0
        for t in state.tokens[mark:]:
            if t.type.endswith(("_list_open", "_list_close")):
                depth += t.nesting
            elif t.type == "list_item_open" and depth == 1:
                rows.append([])
            elif t.type == "list_item_open" and depth == 2 and rows:
                rows[-1].append(("", (t.map or [content])[0]))
            elif t.type == "inline" and depth >= 2 and rows and rows[-1]:
                text, line = rows[-1][-1]
                rows[-1][-1] = ((text + " " + t.content).strip(), line)
        del state.tokens[mark:]
    table = state.push("table_open", "table", 1)
    table.map, table.meta = list(span), {"title": title, "synthetic": True}
    for row in rows:
        state.push("tr_open", "tr", 1)
        for text, line in row:
            state.push("td_open", "td", 1)
            inline = state.push("inline", "", 0)
            inline.content, inline.map, inline.children = text, [line, line + 1], []
            state.push("td_close", "td", -1)
        state.push("tr_close", "tr", -1)
    state.push("table_close", "table", -1)


def push_snippet(
    state: StateBlock, paths: list[str], span: tuple[int, int], kind: str = "snippet"
) -> None:
    """A `snippet` token: the files a line includes (or a toctree's pages, `kind`), which
    become links of the section, no node."""
    token = state.push("snippet", "", 0)
    token.meta, token.map = {"paths": [p for p in paths if p], "kind": kind}, list(span)


def _entry(line: str) -> str:
    """A toctree entry's document: `Title <path>` or `path`."""
    m = _ROLE_TARGET.match(line)
    return m.group(2).strip() if m else line


def role_parts(content: str) -> tuple[str, str]:
    """(text, target) of a role's content: `text <target>` or `target` (its own text)."""
    m = _ROLE_TARGET.match(content)
    if m and m.group(1):
        return m.group(1), m.group(2).strip()
    return content.strip(), content.strip()


def render_roles(text: str) -> str:
    """`text` with each role as the text it renders (`H{sub}`2`O` -> H2O, `{ref}`the
    model <tide-model>`` -> the model): the role's name is markup, not text."""
    if "}`" not in text:
        return text
    return _ROLE_USE.sub(lambda m: role_parts(m.group(1))[0], text)


def role_link(name: str, content: str) -> dict[str, str] | None:
    """The link a role is ({doc}, {download}, {ref}, {numref}), else None."""
    kind = ROLE_LINKS.get(name)
    if kind is None:
        return None
    text, target = role_parts(content)
    return {"href": target, "text": text, "kind": kind}


def myst_plugin(md: MarkdownIt) -> None:
    """Directives before fences, and mdit-py-plugins' MyST block and role rules."""
    alt = {"alt": ["paragraph", "reference", "blockquote", "list"]}
    md.block.ruler.before("fence", "myst_directive", _directive, alt)
    md.use(myst_block_plugin).use(myst_role_plugin)

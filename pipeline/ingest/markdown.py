"""Markdown loader: YAML (or Hugo's TOML) front matter into metadata, title from the
first heading. A page without front matter that opens with `key:: value` lines (Logseq's
page properties, Dataview's inline fields) has those as its metadata: `title::` names the
page, `alias::` gives the other names wikilinks find it by (the lines stay in the text,
where the structure reads their links).

The Markdown itself is kept: its headings are the strongest chunk boundaries. A page of
front matter alone (an mkdocs redirect page) is a document with no text, so links to it
resolve; one with empty front matter too is an empty file.

MDX (Docusaurus, Nextra, Mintlify pages) is Markdown with JavaScript: its ESM blocks
(`import` / `export` lines up to a blank line) and `{/* comments */}` are code of the site,
not text of the page, and become blank lines (line numbers stay the file's); JSX elements
are read as the HTML they look like.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from pipeline.ingest.formats import LoadedDoc, LoadError, register
from pipeline.ingest.text import decode_text

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_TOML_FRONT_MATTER = re.compile(r"\A\+\+\+[ \t]*\n(.*?\n)?\+\+\+[ \t]*(?:\n|\Z)", re.DOTALL)
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}(?!.*`)|~{3,})")
_ESM = re.compile(r"^(?:import|export)\b")
_MDX_COMMENT = re.compile(r"\{/\*.*?\*/\}", re.DOTALL)


def split_front_matter(text: str) -> tuple[dict[str, Any], str, list[str]]:
    """(metadata, text without front matter, warnings): YAML between `---` lines, or TOML
    between `+++` lines (Hugo)."""
    if (m := _TOML_FRONT_MATTER.match(text)) is not None:
        try:
            return tomllib.loads(m.group(1) or ""), text[m.end() :], []
        except tomllib.TOMLDecodeError as e:
            return {}, text, [f"invalid TOML front matter: {type(e).__name__}"]
    m = _FRONT_MATTER.match(text)
    if not m:
        return {}, text, []
    try:
        meta = yaml.safe_load(m.group(1) or "") or {}
    except yaml.YAMLError as e:
        return {}, text, [f"invalid YAML front matter: {type(e).__name__}"]
    if not isinstance(meta, dict):
        return {}, text, ["front matter is not a mapping; kept as text"]
    return {str(k): v for k, v in meta.items()}, text[m.end() :], []


_PAGE_PROPERTY = re.compile(r"([A-Za-z][\w-]*)::(?:[ \t]+(.*))?")
# properties whose value is a comma-separated list of page names ([[...]] or bare)
_NAME_LISTS = ("alias", "aliases", "tags")


def page_properties(text: str) -> dict[str, Any]:
    """The `key:: value` lines that open `text` (before its first other line), keys
    lower-cased; `alias`, `aliases` and `tags` as lists of page names."""
    out: dict[str, Any] = {}
    for line in text.lstrip("\n").split("\n"):
        m = _PAGE_PROPERTY.fullmatch(line.strip())
        if m is None:
            break
        key, value = m.group(1).lower(), (m.group(2) or "").strip()
        if key in _NAME_LISTS:
            names = (n.strip().removeprefix("[[").removesuffix("]]") for n in value.split(","))
            out[key] = [n.strip() for n in names if n.strip()]
        else:
            out[key] = value
    return out


def in_fences(lines: list[str]) -> list[bool]:
    """Whether each line belongs to a fenced code block (its fences included): a fence
    closes with at least as many of its own characters (CommonMark), so a ```` block may
    hold ``` lines and a ``` block ~~~ lines."""
    out, fence = [], ""
    for line in lines:
        m = _FENCE.match(line)
        if not fence and m:
            fence = m.group(1)[0] * len(m.group(1))
            out.append(True)
            continue
        out.append(bool(fence))
        if fence and m and line.strip() == line.strip()[0] * len(line.strip()):
            fence = "" if line.strip().startswith(fence) else fence
    return out


def first_heading(text: str) -> str | None:
    """Text of the first ATX or Setext heading outside fenced code."""
    lines = text.split("\n")
    for i, (line, code) in enumerate(zip(lines, in_fences(lines), strict=True)):
        if code:
            continue
        if m := _ATX.match(line):
            return m.group(1).strip()
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and _SETEXT.match(nxt) and not _SETEXT.match(line):
            return line.strip()
    return None


def mdx_markdown(text: str) -> str:
    """`text` with MDX's ESM blocks and comments outside code fences blanked, line for
    line."""
    out: list[str] = []
    prose: list[str] = []  # lines outside fences since the last fence line

    def flush() -> None:
        if not prose:
            return
        blanked = _MDX_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), "\n".join(prose))
        esm = False
        for line in blanked.split("\n"):
            esm = bool(line.strip()) and (esm or _ESM.match(line) is not None)
            out.append("" if esm else line)
        prose.clear()

    lines = text.split("\n")
    for line, code in zip(lines, in_fences(lines), strict=True):
        if code:
            flush()
            out.append(line)
        else:
            prose.append(line)
    flush()
    return "\n".join(out)


@register(".md", ".markdown", ".mdx", ".qmd", ".rmd")
def load_markdown(path: Path, data: bytes) -> LoadedDoc:
    text = decode_text(data)
    meta, body, warnings = split_front_matter(text)
    if path.suffix.lower() == ".mdx":
        body = mdx_markdown(body)
    meta = meta or page_properties(body)
    fm_title = meta.get("title")
    title = str(fm_title).strip() if fm_title else (first_heading(body) or path.stem)
    if not body.strip() and not meta:
        raise LoadError("empty file (front matter only)")
    return LoadedDoc(
        title=title, mime_type="text/markdown", text=body, metadata=meta, warnings=warnings
    )

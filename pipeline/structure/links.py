"""Cross-document links -> REFERS_TO edges (and REIFIES edges of notebook notes).

Every link a parser found (`DocStructure.links`: source_id, href, text, kind, optional
type) becomes one edge row: source = the content node (or section) holding the link,
target = the section it points to — the target document's root for a document-level link,
the heading's section for `#anchor` — or None when it cannot be resolved, with the reason
in the metadata ("external URL", "target document not in corpus", ...). An anchor that is
not found still points to the document root, with `anchor_resolved: false`.

Resolution, in order: a note uri (exact); an external scheme (http:, mailto:, ...); a path
relative to the linking file (`../`, `./`, `/` = corpus root, URL-encoded characters,
missing `.md` / `.mdx`, directory -> index / README page, `.html` -> `.md`), and one that is
not there and starts with neither `./` nor `../` from the corpus root (as Hugo's `ref` does;
`from_root` in its metadata); wikilinks by path, file stem or title (notes: note title).
Anchors match section slugs, then other anchors a section declares (`anchors` in its
metadata), then the slugified anchor text. An mkdocs-autorefs identifier
(`[text][pkg.Thing]`, `[heading-slug][]`, MyST's `{ref}` label) is looked up across the
whole corpus as mkdocs-autorefs does: anchors sections declare (`{#id}`, `[](){#id}`, a `:::
pkg.mod` directive), then heading ids, then the longest dotted prefix that a mkdocstrings
directive or `## ::: pkg.mod` heading documents (its members `pkg.mod.*`); where several
documents have it, the linking document's own, else the first path (marked `ambiguous`). One
found nowhere is another site's (an inventory): left unresolved. A wikilink also finds a
page by an alias its front matter declares (Obsidian's `aliases`, Logseq's `alias::`), and a
Logseq namespace page by its name (`[[projects/gozo]]`: `projects___gozo.md`). A link that
finds nothing else (`[text](label)`, `[](#label)`, `[](scheme:label)`) goes to an anchor a
page declares, as MyST resolves its `(label)=` targets (`label` in its metadata), as does a
Logseq block reference (`((uuid))`: the section of the block whose `id::` it is). A
pymdown-extensions snippet (`--8<-- "file.md"`) names its file from the snippets' base
path, mkdocs' working folder: from the corpus root, else from the including file's folder;
a file outside the input folder (README.md beside docs/) stays unresolved with that reason.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any
from urllib.parse import unquote

import polars as pl

from pipeline.structure.model import DocStructure, slugify

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_DOC_SUFFIXES = (".md", ".markdown", ".mdx", ".qmd")
_LANGUAGE = re.compile(r"(.+)\.[a-z]{2}(?:-[A-Za-z]{2,4})?(\.md|\.mdx|\.markdown)$")
_INDEX_PAGES = ("index", "_index", "README")  # a folder's page (Hugo's branch: `_index`)


def _pages(base: str, *names: str) -> list[str]:
    """Page files a link to `base` may mean: `base.md` (or .mdx), or with `names`, those
    pages inside the folder `base`."""
    stems = [posixpath.join(base, n) for n in names] if names else [base]
    return [stem + suffix for stem in stems for suffix in (".md", ".mdx", ".qmd")]


def _page_aliases(doc: DocStructure) -> list[str]:
    """The other names a page answers wikilinks to: Obsidian's `aliases` (or `alias`) in
    its front matter, a list or one name."""
    meta = json.loads(doc.sections[0]["metadata"] or "{}") if doc.sections else {}
    front = meta.get("front_matter") or {}
    names = front.get("aliases", front.get("alias")) if isinstance(front, dict) else None
    names = [names] if isinstance(names, str) else names
    return [str(n) for n in names if n] if isinstance(names, list) else []


def _namespace(file_stem: str) -> str:
    """The page name a note app wrote as this file name: Logseq writes the namespace page
    `projects/gozo` as `projects___gozo.md` (or, in older graphs, `projects%2Fgozo.md`)."""
    return unquote(file_stem).replace("___", "/")


def _norm_name(name: str) -> str:
    """Wikilink page name key: case, spaces, hyphens and underscores do not matter."""
    return re.sub(r"[\s_-]+", " ", name).strip().casefold()


class _Corpus:
    """Lookup tables over all parsed documents (built once, a dict lookup per link)."""

    def __init__(self, docs: list[DocStructure]) -> None:
        self.by_path: dict[str, DocStructure] = {}
        self.anchors: dict[str, dict[str, str]] = {}
        self.note_uri: dict[str, str] = {}
        self.note_title: dict[str, list[tuple[str, str]]] = {}  # key -> [(doc id, section)]
        self.page: dict[str, list[DocStructure]] = {}  # wikilink page keys
        # autorefs identifiers, corpus-wide: declared anchors, heading slugs -> [(doc, section)]
        self.declared: dict[str, list[tuple[DocStructure, str]]] = {}
        self.slugs: dict[str, list[tuple[DocStructure, str]]] = {}
        self.objects: dict[str, list[tuple[DocStructure, str]]] = {}  # mkdocstrings `:::`
        for d in sorted(docs, key=lambda d: d.source_path):
            self.by_path.setdefault(d.source_path, d)
            anchors: dict[str, str] = {}
            aliases: dict[str, str] = {}
            for s in d.sections:
                uri = s["uri"] or ""
                if s["component_type"] == "NOTE":
                    self.note_uri.setdefault(uri, s["id"])
                    key = _norm_name(s["title"])
                    self.note_title.setdefault(key, []).append((d.document_id, s["id"]))
                    continue
                if s["parent_id"] is not None and "#" in uri:
                    anchors.setdefault(uri.split("#", 1)[1], s["id"])
                meta = json.loads(s["metadata"] or "{}")
                for a in meta.get("anchors", []):
                    aliases.setdefault(a, s["id"])
                for a in meta.get("objects", []):
                    self.objects.setdefault(a, []).append((d, s["id"]))
            self.anchors[d.document_id] = {**aliases, **anchors}
            for table, found in ((self.declared, aliases), (self.slugs, anchors)):
                for a, sid in found.items():
                    table.setdefault(a, []).append((d, sid))
            stem = posixpath.splitext(d.source_path)[0]
            name = _namespace(posixpath.basename(stem))
            for key in {stem, posixpath.basename(stem), name, d.title, *_page_aliases(d)}:
                self.page.setdefault(_norm_name(key), []).append(d)
        for path, d in list(self.by_path.items()):  # Hugo's `page.en.md`: also `page.md`
            if m := _LANGUAGE.match(path):
                self.by_path.setdefault(m.group(1) + m.group(2), d)
        # a page by the end of its path (`guides/i18n.mdx` of `docs/src/content/docs/...`):
        # a site's `/`-links start at its content folder, which may lie below the input's
        self.tails: dict[str, DocStructure | None] = {}
        for path, d in self.by_path.items():
            parts = path.split("/")
            for k in range(1, len(parts)):
                tail = "/".join(parts[k:])
                self.tails[tail] = d if self.tails.get(tail, d) is d else None

    def find_path(
        self, path: str, table: dict[str, DocStructure | None] | None = None
    ) -> DocStructure | None:
        """The page a relative path means in `table` (by_path, or `tails`)."""
        table = self.by_path if table is None else table
        candidates = [path]
        stem, ext = posixpath.splitext(path)
        if path.endswith("/") or not path:  # a folder's index page, or the page (`/guide/`)
            candidates = _pages(path.rstrip("/"), *_INDEX_PAGES) + _pages(path.rstrip("/"))
        elif ext.lower() in (".html", ".htm"):
            candidates += _pages(stem) + _pages(posixpath.dirname(stem), "index")
        elif ext.lower() not in _DOC_SUFFIXES:
            candidates += _pages(path) + _pages(path, *_INDEX_PAGES)
        for c in candidates:
            c = posixpath.normpath(c) if c else c
            if table.get(c) is not None:
                return table[c]
        return None

    def anchor(self, doc: DocStructure, anchor: str) -> str | None:
        """Section id for `anchor` in `doc` (slug, declared anchor, slugified text, or the
        longest declared dotted prefix: `pkg.mod.Class` under a `::: pkg.mod` directive)."""
        table = self.anchors.get(doc.document_id, {})
        sid = table.get(anchor) or table.get(anchor.lower()) or table.get(slugify(anchor))
        parts = anchor.split(".")
        for k in range(len(parts) - 1, 0, -1):
            if sid is not None:
                break
            sid = table.get(".".join(parts[:k]))
        return sid

    def autoref(self, identifier: str, src: DocStructure) -> list[tuple[DocStructure, str]]:
        """Where an autorefs identifier is (see the module docstring), the linking
        document's own first; empty when nowhere in the corpus."""
        found = self.declared.get(identifier) or self.slugs.get(identifier)
        found = found or self.objects.get(identifier)
        parts = identifier.split(".")
        for k in range(len(parts) - 1, 0, -1):  # pkg.mod.Class under `::: pkg.mod`
            if found:
                break
            found = self.objects.get(".".join(parts[:k]))
        return sorted(found or [], key=lambda hit: hit[0] is not src)


def _edge(link: dict[str, Any], target: str | None, **meta: Any) -> dict[str, Any]:
    meta = {"href": link["href"], "kind": link.get("kind", "inline"), **meta}
    if "line" in link:
        meta["line"] = link["line"]
    return {
        "source_id": link["source_id"],
        "target_id": target,
        "type": link.get("type", "REFERS_TO"),
        "weight": 1.0,
        "marker_text": link.get("text", ""),
        "metadata": json.dumps(meta, sort_keys=True, ensure_ascii=False),
    }


def _resolve(corpus: _Corpus, src: DocStructure, link: dict[str, Any]) -> dict[str, Any]:
    href = (link.get("href") or "").strip()
    kind = link.get("kind", "inline")
    if not href:
        return _edge(link, None, reason="empty link target")
    if href in corpus.note_uri:
        return _edge(link, corpus.note_uri[href], target_uri=href)
    if kind == "object":  # a reification note's object that no note in the corpus has
        return _edge(link, None, reason="object note not in corpus")
    if kind == "autoref":
        hits = corpus.autoref(href, src)
        if not hits:
            return _edge(link, None, reason="autorefs identifier not in corpus (another site's?)")
        return _first_hit(link, hits, href)
    if kind == "wikilink":
        return _resolve_wikilink(corpus, src, link, href)
    if kind == "block_ref":  # Logseq's `((uuid))`: the block with that `id::`, on any page
        return _label(corpus, src, link, href) or _edge(
            link, None, reason="no block with that id in corpus"
        )
    if _SCHEME.match(href):
        return _label(corpus, src, link, href) or _edge(link, None, reason="external URL")
    if kind == "snippet":
        return _resolve_snippet(corpus, src, link, href)
    path, _, anchor = href.partition("#")
    path = unquote(path.split("?", 1)[0])
    extra: dict[str, Any] = {}
    anchor = unquote(anchor)
    if not path:
        target = src
        if corpus.anchor(src, anchor) is None and (edge := _label(corpus, src, link, anchor)):
            return edge
    else:
        base = "" if path.startswith("/") else posixpath.dirname(src.source_path)
        joined = posixpath.normpath(posixpath.join(base, path.lstrip("/")))
        if joined == ".." or joined.startswith("../"):
            return _edge(link, None, reason="target outside corpus")
        joined = joined + "/" if path.endswith("/") and joined != "." else joined
        target = corpus.find_path("" if joined == "." else joined)
        if target is None and base and not path.startswith("."):  # Hugo's ref: the root's
            target = corpus.find_path(posixpath.normpath(path))
            extra = {"from_root": True}
        elif target is None and not base:  # `/guides/x/` of a site in a folder of the input
            target = corpus.find_path("" if joined == "." else joined, corpus.tails)
            extra = {"content_folder": True}
        if target is None:
            edge = _label(corpus, src, link, path) if "/" not in path else None
            return edge or _edge(
                link, None, reason="target document not in corpus", target_path=joined
            )
    return _with_anchor(corpus, link, target, anchor, **extra)


def _label(
    corpus: _Corpus, src: DocStructure, link: dict[str, Any], label: str
) -> dict[str, Any] | None:
    """A link to a label a page declares (MyST: `[text](label)`, `[](#label)` and
    `[](scheme:label)` point to a `(label)=` target anywhere in the project), or None."""
    hits = sorted(corpus.declared.get(label, []), key=lambda hit: hit[0] is not src)
    return _first_hit(link, hits, label, label=True) if hits else None


def _first_hit(
    link: dict[str, Any], hits: list[tuple[DocStructure, str]], anchor: str, **meta: Any
) -> dict[str, Any]:
    """The edge to the first of the sections an identifier names (`ambiguous` when more)."""
    (target, sid), extra = hits[0], {"ambiguous": True} if len(hits) > 1 else {}
    return _edge(link, sid, target_path=target.source_path, anchor=anchor, **meta, **extra)


def _resolve_snippet(
    corpus: _Corpus, src: DocStructure, link: dict[str, Any], href: str
) -> dict[str, Any]:
    """A snippet's file from the corpus root, else beside the including file."""
    path = unquote(href).lstrip("/")
    for base in ("", posixpath.dirname(src.source_path)):
        joined = posixpath.normpath(posixpath.join(base, path))
        if not joined.startswith("../") and (target := corpus.by_path.get(joined)) is not None:
            return _edge(link, target.root_id, target_path=target.source_path)
    return _edge(
        link,
        None,
        reason="snippet file not in corpus (outside the input folder?)",
        target_path=path,
    )


def _with_anchor(
    corpus: _Corpus, link: dict[str, Any], target: DocStructure, anchor: str, **extra: Any
) -> dict[str, Any]:
    found = {"target_path": target.source_path, **extra}
    if not anchor:
        return _edge(link, target.root_id, **found)
    sid = corpus.anchor(target, anchor)
    if sid is None:
        return _edge(
            link,
            target.root_id,
            anchor=anchor,
            anchor_resolved=False,
            reason=f"anchor not found in {target.source_path}",
            **found,
        )
    return _edge(link, sid, anchor=anchor, anchor_resolved=True, **found)


def _resolve_wikilink(
    corpus: _Corpus, src: DocStructure, link: dict[str, Any], href: str
) -> dict[str, Any]:
    page, _, anchor = href.partition("#")
    if not page:
        return _with_anchor(corpus, link, src, anchor)
    key = _norm_name(page)
    notes = corpus.note_title.get(key, [])
    if notes:  # prefer a note of the same notebook
        same = [sid for did, sid in notes if did == src.document_id]
        extra = {"ambiguous": True} if len(notes) > 1 else {}
        return _edge(link, (same or [notes[0][1]])[0], **extra)
    target = (
        corpus.find_path(posixpath.normpath(page)) if page.lower().endswith(_DOC_SUFFIXES) else None
    )
    if target is None:
        candidates = corpus.page.get(key, [])
        if not candidates:
            return _edge(link, None, reason="no document or note with that name")
        src_dir = posixpath.dirname(src.source_path)
        target = min(
            candidates,
            key=lambda d: (
                posixpath.dirname(d.source_path) != src_dir,
                len(d.source_path),
                d.source_path,
            ),
        )
    return _with_anchor(corpus, link, target, anchor)


def resolve_links(docs: list[DocStructure]) -> list[dict[str, Any]]:
    """REFERS_TO / REIFIES edge rows (schemas.STRUCTURE_EDGES) for every link of every doc."""
    corpus = _Corpus(docs)
    edges = []
    for d in docs:
        for link in d.links:
            edges.append(_resolve(corpus, d, link))
    return edges


_LINK_KEYS = ("source_id", "href", "text", "kind", "type", "line")


def link_rows(docs: list[DocStructure]) -> list[dict[str, Any]]:
    """The documents' links, unresolved, as DOCUMENT_LINKS rows (one shard's part)."""
    return [
        {"document_id": d.document_id, **{k: link.get(k) for k in _LINK_KEYS}}
        for d in docs
        for link in d.links
    ]


def structures(documents: pl.DataFrame, sections: pl.DataFrame) -> dict[str, DocStructure]:
    """Each document (id, source_path, title) with its sections (only the columns
    resolution reads), root first, by id; a document without sections is left out."""
    by_doc: dict[str, list[dict[str, Any]]] = {}
    cols = ["id", "document_id", "parent_id", "component_type", "title", "uri", "metadata"]
    for row in sections.select(cols).iter_rows(named=True):
        rows = by_doc.setdefault(row["document_id"], [])
        rows.insert(0, row) if row["parent_id"] is None else rows.append(row)  # root first
    return {
        d["id"]: DocStructure(d["id"], d["source_path"], d["title"] or "", sections=by_doc[d["id"]])
        for d in documents.select("id", "source_path", "title").iter_rows(named=True)
        if d["id"] in by_doc
    }


def link_of(row: dict[str, Any]) -> dict[str, Any]:
    """A DOCUMENT_LINKS row as the link `_resolve` takes."""
    return {k: v for k, v in row.items() if k in _LINK_KEYS and v is not None}


def resolve_link_table(
    documents: pl.DataFrame, sections: pl.DataFrame, links: pl.DataFrame
) -> list[dict[str, Any]]:
    """`resolve_links` over tables: every shard's DOCUMENT_LINKS rows against the sections
    of the whole corpus (only the columns resolution reads; nothing when there are no links)."""
    if links.is_empty():
        return []
    docs = structures(documents, sections)
    corpus = _Corpus(list(docs.values()))
    edges = []
    for row in links.iter_rows(named=True):
        src = docs.get(row["document_id"])
        if src is None:
            continue
        edges.append(_resolve(corpus, src, link_of(row)))
    return edges

"""Cross-document link resolution on the pydantic docs (89 Markdown files).

Loads the folder with pipeline.ingest.load_folder + pipeline.structure.build_structure and
checks every inline link to another .md file against an answer computed here, from the
href alone: the right document is the href's path normalised relative to the linking file
(`../`, `./`, missing `.md`, directory -> index.md, URL-encoded characters); the right
section is one whose slug (the fragment of its uri) equals the anchor. Reference-style
links and wikilinks are counted separately; mkdocs-autorefs links are checked against the
files that declare their identifiers; unresolved reasons are tallied.
`--kinds inline,reference` checks reference-style links to .md files too (sites such as the
Node.js API docs link almost only that way).

    python benchmarks/markdown_links.py [folder] [--kinds inline,reference]
"""

from __future__ import annotations

import json
import posixpath
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.ingest import load_folder  # noqa: E402
from pipeline.structure import build_structure, slugify  # noqa: E402

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared/data/markdown/pydantic/docs"


def expected_path(source: str, href_path: str, known: set[str]) -> str:
    """The document an href path means, worked out independently of the resolver."""
    p = unquote(href_path)
    base = "" if p.startswith("/") else posixpath.dirname(source)
    full = posixpath.normpath(posixpath.join(base, p.lstrip("/")))
    if p.endswith("/") or full in {d.rsplit("/", 1)[0] for d in known if "/" in d}:
        return posixpath.join(full, "index.md")
    if not full.endswith(".md") and full + ".md" in known:
        return full + ".md"
    return full


def _id_lines(path: Path, anchor: str) -> list[int]:
    """1-based lines of `path` that declare `anchor` other than as a heading slug."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError:
        return []
    marks = (f"#{anchor}}}", f"#{anchor} ", f'name="{anchor}"', f'id="{anchor}"')
    hits = [i + 1 for i, x in enumerate(lines) if any(m in x for m in marks)]
    if not hits:  # mkdocstrings: `::: pkg.mod` (or a heading `## ::: pkg.mod`) documents pkg.mod.*
        autodoc = (x.lstrip("#").lstrip() for x in lines)
        hits = [
            i + 1
            for i, x in enumerate(autodoc)
            if x.startswith("::: ") and (anchor + ".").startswith(x[4:].strip() + ".")
        ]
    return hits


def _generated(path: Path, anchor: str) -> bool:
    """Whether `anchor` can only come from content a directive generates at build time: the
    file holds a `::: x` directive and no heading whose slug the anchor is."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError:
        return False
    heads = (x.lstrip("#").split("{")[0].strip() for x in lines if x.startswith("#"))
    directive = any(x.lstrip("#").lstrip().startswith("::: ") for x in lines)
    return directive and all(slugify(h) != anchor for h in heads)


def _declares(path: Path, identifier: str) -> bool:
    """Whether the file declares an mkdocs-autorefs identifier: an id (`{#id}`, `id=`), a
    `::: pkg.mod` directive covering it, or a heading whose toc slug it is."""
    if _id_lines(path, identifier):
        return True
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    heads = (x.lstrip("#").split("{")[0].strip() for x in text.split("\n") if x.startswith("#"))
    return any(slugify(h) == identifier for h in heads)


def _autorefs(folder: Path, links: pl.DataFrame, paths: list[str]) -> list[str]:
    """mkdocs-autorefs links (`[text][pkg.Thing]`), checked against the files themselves:
    resolved right = to a file that declares the identifier; an identifier no file declares
    is another site's (mkdocstrings inventories) and right when left unresolved."""
    refs = links.filter(pl.col("kind") == "autoref").select("href", "target_doc").rows()
    declared: dict[str, bool] = {}
    right = wrong = missed = foreign = 0
    for identifier, target in refs:
        if target is not None:
            ok = _declares(folder / target, identifier)
            right += ok
            wrong += not ok
            continue
        if identifier not in declared:
            declared[identifier] = any(_declares(folder / p, identifier) for p in paths)
        missed += declared[identifier]
        foreign += not declared[identifier]
    inside = right + wrong + missed
    share = f"{100 * right / inside:.1f}%" if inside else "n/a"
    return [
        f"  autorefs links {len(refs)}: identifier declared in the corpus {inside}, resolved to a "
        f"file declaring it {right} ({share}), to another file {wrong}, unresolved {missed}; "
        f"declared nowhere here (another site's) {foreign}"
    ]


def run(folder: str | Path = DEFAULT, kinds: tuple[str, ...] = ("inline",)) -> list[str]:
    folder = Path(folder)
    checked = "/".join(kinds)
    t0 = time.perf_counter()
    docs, rejected = load_folder(folder)
    built = build_structure(docs, folder)
    sections, nodes, edges = built.tables
    warnings = built.warnings
    seconds = time.perf_counter() - t0

    paths = dict(zip(docs["id"], docs["source_path"], strict=True))
    sec = sections.select(
        pl.col("id").alias("target_id"),
        pl.col("document_id").replace_strict(paths).alias("target_doc"),
        pl.col("uri").str.split("#").list.get(1, null_on_oob=True).alias("target_slug"),
        pl.col("metadata").str.json_path_match("$.line_start").cast(pl.Int64).alias("lo"),
        pl.col("metadata").str.json_path_match("$.line_end").cast(pl.Int64).alias("hi"),
    )
    node_doc = nodes.select(
        pl.col("id").alias("source_id"),
        pl.col("document_id").replace_strict(paths).alias("source_doc"),
    )
    links = (
        edges.filter(pl.col("type") == "REFERS_TO")
        .join(node_doc, on="source_id", how="left")
        .join(sec, on="target_id", how="left")
        .with_columns(
            pl.col("metadata").str.json_path_match("$.href").alias("href"),
            pl.col("metadata").str.json_path_match("$.kind").alias("kind"),
            pl.col("metadata").str.json_path_match("$.reason").alias("reason"),
        )
    )
    known = set(docs["source_path"])
    inline = links.filter(
        pl.col("kind").is_in(list(kinds))
        & pl.col("href").str.split("#").list.first().str.contains(r"(?i)\.md$")
        & ~pl.col("href").str.contains(r"^[A-Za-z][A-Za-z0-9+.-]*:")
    )
    rows = inline.select("source_doc", "href", "target_doc", "target_slug", "lo", "hi").rows()
    right_doc = anchored = right_section = other = other_ok = toc_slug = generated = 0
    for source, href, target_doc, slug, lo, hi in rows:
        path, _, anchor = href.partition("#")
        want = expected_path(source, path, known)
        ok = target_doc == want
        right_doc += ok
        if anchor:
            anchored += 1
            right_section += ok and slug == unquote(anchor)
            toc_slug += ok and slug != unquote(anchor) and slug == slugify(unquote(anchor))
            where = _id_lines(folder / want, unquote(anchor)) if ok else []
            if where and slug != unquote(anchor):  # a non-heading id: the section holding it
                other += 1
                other_ok += any(lo - 3 <= w <= hi for w in where)
            elif ok and slug != unquote(anchor) and _generated(folder / want, unquote(anchor)):
                generated += 1
    rows = [r[:4] for r in rows]

    def pct(a: int, b: int) -> str:
        return f"{100 * a / b:.1f}%" if b else "n/a"

    kinds = Counter(links["kind"].to_list())
    resolved = Counter(links.filter(pl.col("target_id").is_not_null())["kind"].to_list())
    reasons = Counter(r for r in links["reason"].to_list() if r)
    lines = [
        f"markdown links: {folder}",
        f"  documents {docs.height} (rejected {rejected.height}), sections {sections.height}, "
        f"content nodes {nodes.height}, REFERS_TO edges {links.height}, "
        f"parse warnings {sum(len(w) for w in warnings.values())}; load+structure {seconds:.2f} s",
        f"  {checked} cross-doc links found {len(rows)}; resolved to the right document "
        f"{right_doc} ({pct(right_doc, len(rows))})",
        f"  anchored {anchored}; resolved to the right section {right_section} "
        f"({pct(right_section, anchored)})",
        f"  of those, anchors that are no heading ({{#id}} attributes, [](){{#id}}, ::: API "
        f"directives) {other}; resolved to the section holding the id {other_ok}; "
        f"right document or section overall {right_section + other_ok} "
        f"({pct(right_section + other_ok, anchored)})",
        f"  anchors another slugger wrote (e.g. `--flag`, which toc makes `-flag`): resolved to "
        f"the section whose toc slug is the anchor's {toc_slug}; with those "
        f"{right_section + other_ok + toc_slug} "
        f"({pct(right_section + other_ok + toc_slug, anchored)})",
    ]
    found = right_section + other_ok + toc_slug
    lines.append(
        f"  anchors in content a build-time directive makes (a page of `::: mkdocs-click` and "
        f"the like, no such heading or id in the source) {generated}; right section among the "
        f"anchors the sources hold {found} of {anchored - generated} "
        f"({pct(found, anchored - generated)})"
    )
    lines += _autorefs(folder, links, list(known))
    for kind in ("inline", "reference", "wikilink", "autoref", "snippet"):
        lines.append(f"  {kind:9} links {kinds.get(kind, 0):5}  resolved {resolved.get(kind, 0):5}")
    lines.append("  unresolved / partly resolved reasons (top 10):")
    lines += [f"    {n:5}  {r}" for r, n in reasons.most_common(10)]
    wrong = [
        (s, h, t)
        for s, h, t, slug in rows
        if t != expected_path(s, h.partition("#")[0], known)
        or ("#" in h and slug != unquote(h.partition("#")[2]))
    ]
    if wrong:
        lines.append("  strict misses (slug != anchor or wrong doc): source, href, target doc")
        lines += [f"    {json.dumps(w)}" for w in wrong[:8]]
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=DEFAULT)
    parser.add_argument("--kinds", default="inline", help="link kinds to check, comma-separated")
    args = parser.parse_args()
    print("\n".join(run(args.folder, tuple(args.kinds.split(",")))))

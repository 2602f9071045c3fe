"""Focus context (the Doughnut "notes seed"): one note or section and its related notes.

Given a uri (a notebook note's own uri, or a Markdown/PDF section's `path#slug`, or a
document's path), the context holds the focus node itself — title, details, parent,
object, contextual path, and the uri-and-titles of its children, referrings and prior /
younger siblings — then related nodes ranked by priority until a token budget is spent:

    P1 parent, object, contextual path, object's contextual path   (all of P1 first)
    P2 children, reified children, prior siblings, younger siblings, referring notes
    P3 reified children's objects, parent's siblings, object's parent's siblings,
       referring subjects
    P4 cousins, object cousins, referring paths, referring cousins, distant object links

After P1, the classes are drawn 3:2:1 (three notes from P2, two from P3, one from P4,
repeat; an exhausted class drops out and the others go on). Within a class the relation
types take turns, one note each (so a small budget still sees every kind). A note counts
once, at its highest-priority occurrence (classes are claimed P1 -> P4, each in its
turn order), and the focus node never appears among its related notes. A note that does
not fit the remaining budget is skipped (it is not a draw); later, smaller ones may fit.
The budget covers the whole context text, the focus note first (its details take at
most FOCUS_DETAILS_SHARE of the budget, less if the focus block alone would not fit).
Bounds for hubs: LIST_LIMIT entries per focus list, CANDIDATES_PER_RELATION notes per
relation type, and drawing stops once not even an empty note fits (or after
MAX_CONSECUTIVE_SKIPS notes in a row over budget).

Definitions (all derived from sections / content_nodes / structure_edges):
  parent = parent_id; children = sections under it by seq; siblings = the parent's other
  children (prior nearest first, younger nearest first); contextual path = ancestors from
  the document root down to the parent (as related notes: nearest first); details = the
  first text nodes (PARAGRAPH, LIST_ITEM, BLOCK_QUOTATION) of the section; object = target
  of the REIFIES edge from the section; reified children = children with an object (the
  other children are "children"); referring notes = sources of REFERRING_EDGES into the
  section (a content-node endpoint, source or target, maps to its section; a section's
  reference to itself is dropped), in table order; referring subject = a referring note's
  parent; referring path = a referring note's ancestors;
  referring cousins = the referring subjects' children; cousins = children of the parent's
  siblings; object cousins = children of the object's parent's siblings; distant object
  links = notes referring to the focus's object or to a reified child's object.

Output shapes (the Doughnut graph RAG design), uri_and_title = "[title](uri)":
  BareNote {uri_and_title, details_truncated, parent_uri_and_title, object_uri_and_title}
  NoteWithContextualPath {contextualPath[], ...BareNote}
  FocusNote {children[], referrings[], prior_siblings[], younger_siblings[],
             ...NoteWithContextualPath}
  Overall {focusNote, related_notes[]}
A related note carries its contextualPath (NoteWithContextualPath) when it was reached
over a link (object, reified child's object, referring note, referring subject, distant
object link): its place in the tree then does not follow from the focus note's path.
Notes reached over the tree are BareNotes (their parent link places them).

Which edges refer: REIFIES and REFERS_TO (notes: a reification, a link in a note's details;
Markdown: a link to a document or heading) and CROSS_REFERENCES (PDF and Markdown: a
"see Section 3" / "Figure 2" in a content node, pointing at another section or at a node in
it) all say "this section is about / points the reader to that one". REFERENCES_NOTE and
REFERENCES_CITATION do not: a footnote or endnote is part of the section that calls it (its
text belongs there, not to another note), and a citation points to a bibliography entry —
the work cited, not a section of this corpus — so every citing section would become a
"referring note" of the References list, a hub that says nothing about the focus.

Speed: the lookups (rows by uri, parent, children by seq, object, referrers,
details) are built once per index with polars and cached on it; a query is dict lookups
plus token counting of the notes it considers (~1-3 ms at 100k sections).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any

import polars as pl

from pipeline.query.result import SearchResult
from pipeline.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables

RELATED_DETAILS_TOKENS = 80  # a related note's details are cut to this many tokens
FOCUS_DETAILS_TOKENS = 600  # the focus note's details (shortened further to fit a budget)
FOCUS_DETAILS_SHARE = 0.4  # ... and at most this share of the budget (room for related notes)
ANSWER_DETAILS_TOKENS = 40  # details shown in the offline answer
LIST_LIMIT = 50  # entries of each focus-note list (children, referrings, siblings)
CANDIDATES_PER_RELATION = 200  # notes considered per relation type (a hub has thousands)
MAX_CONSECUTIVE_SKIPS = 64  # this many notes in a row over budget: the budget is spent
DETAIL_NODE_TYPES = ("PARAGRAPH", "LIST_ITEM", "BLOCK_QUOTATION")
DETAIL_NODES = 4  # a section's details: its first text nodes
DETAILS_CHAR_CAP = 8 * FOCUS_DETAILS_TOKENS  # kept per section (token cuts need no more)
# see "Which edges refer" above; REFERENCES_NOTE / REFERENCES_CITATION deliberately not
REFERRING_EDGES = ("REIFIES", "REFERS_TO", "CROSS_REFERENCES")
ELLIPSIS = "…"

# (priority, relation types in turn order); "contextual" relations carry their path.
P1 = ("parent", "object", "contextual_path", "object_contextual_path")
P2 = ("child", "reified_child", "prior_sibling", "younger_sibling", "referring_note")
P3 = ("reified_child_object", "parent_sibling", "object_parent_sibling", "referring_subject")
P4 = ("cousin", "object_cousin", "referring_path", "referring_cousin", "distant_object_link")
PRIORITIES = {1: P1, 2: P2, 3: P3, 4: P4}
DRAWS = {2: 3, 3: 2, 4: 1}  # after P1: P2:P3:P4 drawn 3:2:1
WITH_PATH = frozenset(
    {"object", "reified_child_object", "referring_note", "referring_subject", "distant_object_link"}
)

PROMPT_FOCUS = (
    "The focus note, as JSON. Every note is named by its uri_and_title, the Markdown link "
    "[title](uri); relations between notes can be inferred from the uri_and_title fields "
    "(parent_uri_and_title, object_uri_and_title, contextualPath: the ancestors from the "
    "root down to the parent, children, referrings: notes that refer to it, prior_siblings, "
    "younger_siblings). A note with an object is a reification: its parent is the subject, "
    "its title the predicate."
)
PROMPT_RELATED = "Related notes, most relevant first, one JSON object per line:"


@dataclass
class NoteGraph:
    """Sections as rows with the lookups a focus query needs (built once per index)."""

    ids: list[str]
    uris: list[str]
    titles: list[str]
    documents: list[str]
    parent: list[int]  # row of the parent, -1 for a document root
    row_of_uri: dict[str, int]
    children: dict[int, list[int]]  # rows by seq
    object: dict[int, int]  # reification row -> object row
    referrers: dict[int, list[int]]  # row -> rows of the sections referring to it
    details: dict[int, str]
    units: dict[str, list[str]]  # section id -> text unit ids
    _link_cache: dict[int, str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ids)

    def link(self, row: int | None) -> str | None:
        """uri_and_title: the Markdown inline link `[title](uri)`."""
        if row is None or row < 0:
            return None
        out = self._link_cache.get(row)
        if out is None:
            out = f"[{self.titles[row]}]({self.uris[row]})"
            self._link_cache[row] = out
        return out

    def ancestors(self, row: int | None) -> list[int]:
        """Parent, grandparent, ... up to the document root (nearest first)."""
        out: list[int] = []
        cur = self.parent[row] if row is not None and row >= 0 else -1
        while cur >= 0 and len(out) < 256:  # depth guard against a malformed cycle
            out.append(cur)
            cur = self.parent[cur]
        return out

    def siblings(self, row: int | None) -> list[int]:
        """The other children of `row`'s parent, in sibling order."""
        if row is None or row < 0 or self.parent[row] < 0:
            return []
        return [r for r in self.children.get(self.parent[row], []) if r != row]


def note_graph(index: IndexTables) -> NoteGraph:
    """The index's NoteGraph, built on first use and cached on the index object."""
    cached = getattr(index, "_focus_graph", None)
    if cached is None:
        cached = build_graph(
            index.table("sections"),
            index.table("content_nodes"),
            index.table("structure_edges"),
            index.table("text_units"),
        )
        index._focus_graph = cached  # type: ignore[attr-defined]
    return cached


def build_graph(
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    edges: pl.DataFrame,
    text_units: pl.DataFrame | None = None,
) -> NoteGraph:
    """Vectorised build of every lookup; only the final dicts are made in Python."""
    s = sections.select(
        "id",
        "document_id",
        "parent_id",
        "title",
        "seq",
        pl.col("uri").fill_null(pl.col("id")),
    ).with_row_index("row")
    rows = s.select(pl.col("id"), pl.col("row").cast(pl.Int64))
    s = s.join(
        rows.rename({"id": "parent_id", "row": "parent_row"}),
        on="parent_id",
        how="left",
        maintain_order="left",
    ).with_columns(pl.col("parent_row").fill_null(-1))
    kids = (
        s.filter(pl.col("parent_row") >= 0)
        .sort("parent_row", "seq", "row")
        .group_by("parent_row", maintain_order=True)
        .agg(pl.col("row").cast(pl.Int64))
    )
    # the first row with a uri owns it (uris are unique in practice)
    firsts = s.select("uri", "row").unique("uri", keep="first", maintain_order=True)

    # edge endpoints as section rows: a content node maps to its section (a cross-reference
    # may point at a figure or heading node; a link sits in a paragraph)
    node_sec = content_nodes.select(pl.col("id"), pl.col("section_id")).join(
        rows.rename({"id": "section_id"}), on="section_id", how="inner"
    )
    where = pl.concat([rows, node_sec.select("id", "row")]).unique("id", keep="first")
    e = (
        edges.filter(pl.col("type").is_in(REFERRING_EDGES) & pl.col("target_id").is_not_null())
        .select("source_id", "target_id", "type")
        .with_row_index("edge")
        .join(where.rename({"id": "source_id", "row": "src"}), on="source_id", how="inner")
        .join(where.rename({"id": "target_id", "row": "dst"}), on="target_id", how="inner")
        .filter(pl.col("src") != pl.col("dst"))
    )
    sec_ids = rows["id"].implode()
    objs = (  # a reification is a section about a section: both ends are sections
        e.filter(
            (pl.col("type") == "REIFIES")
            & pl.col("source_id").is_in(sec_ids)
            & pl.col("target_id").is_in(sec_ids)
        )
        .sort("edge")
        .unique("src", keep="first", maintain_order=True)
    )
    refs = (
        e.select("dst", "src")
        .unique()
        .sort("dst", "src")
        .group_by("dst", maintain_order=True)
        .agg("src")
    )
    det = (
        content_nodes.filter(
            pl.col("node_type").is_in(DETAIL_NODE_TYPES) & pl.col("text").str.strip_chars().ne("")
        )
        .select("section_id", "seq_major", "seq_minor", "text")
        .sort("section_id", "seq_major", "seq_minor")
        .group_by("section_id", maintain_order=True)
        .agg(pl.col("text").head(DETAIL_NODES).str.join("\n\n").str.slice(0, DETAILS_CHAR_CAP))
        .join(rows.rename({"id": "section_id"}), on="section_id", how="inner")
    )
    units: dict[str, list[str]] = {}
    if text_units is not None and text_units.height:
        held = (
            text_units.select("section_id", "id")
            .with_row_index("r")
            .drop_nulls("section_id")
            .group_by("section_id", maintain_order=True)
            .agg(pl.col("id").sort_by("r"))
        )
        units = dict(zip(held["section_id"].to_list(), held["id"].to_list(), strict=True))
    return NoteGraph(
        ids=s["id"].to_list(),
        uris=s["uri"].to_list(),
        titles=s["title"].fill_null("").to_list(),
        documents=s["document_id"].to_list(),
        parent=s["parent_row"].to_list(),
        row_of_uri=dict(zip(firsts["uri"].to_list(), firsts["row"].to_list(), strict=True)),
        children=dict(zip(kids["parent_row"].to_list(), kids["row"].to_list(), strict=True)),
        object=dict(zip(objs["src"].to_list(), objs["dst"].to_list(), strict=True)),
        referrers=dict(zip(refs["dst"].to_list(), refs["src"].to_list(), strict=True)),
        details=dict(zip(det["row"].to_list(), det["text"].to_list(), strict=True)),
        units=units,
    )


# ---- candidates ------------------------------------------------------------------------


def _flat(lists: Iterable[list[int]]) -> list[int]:
    it: Iterator[int] = (r for rows in lists for r in rows)
    return list(islice(it, CANDIDATES_PER_RELATION))


def candidates(g: NoteGraph, row: int) -> dict[str, list[int]]:
    """Rows of each relation type of the focus row, in their draw order (capped)."""
    parent = g.parent[row]
    obj = g.object.get(row)
    kids = g.children.get(row, [])
    reified = [k for k in kids if k in g.object]
    sibs = g.children.get(parent, []) if parent >= 0 else []
    pos = sibs.index(row) if row in sibs else len(sibs)
    refs = g.referrers.get(row, [])
    parent_sibs = g.siblings(parent)
    obj_parent = g.parent[obj] if obj is not None else -1
    obj_parent_sibs = g.siblings(obj_parent)
    subjects = [g.parent[r] for r in refs if g.parent[r] >= 0]
    objects = ([obj] if obj is not None else []) + [g.object[k] for k in reified]
    cap = CANDIDATES_PER_RELATION
    return {
        "parent": [parent] if parent >= 0 else [],
        "object": [obj] if obj is not None else [],
        "contextual_path": g.ancestors(row)[:cap],
        "object_contextual_path": g.ancestors(obj)[:cap] if obj is not None else [],
        "child": [k for k in kids if k not in g.object][:cap],
        "reified_child": reified[:cap],
        "prior_sibling": sibs[:pos][::-1][:cap],
        "younger_sibling": sibs[pos + 1 :][:cap],
        "referring_note": refs[:cap],
        "reified_child_object": [g.object[k] for k in reified][:cap],
        "parent_sibling": parent_sibs[:cap],
        "object_parent_sibling": obj_parent_sibs[:cap],
        "referring_subject": subjects[:cap],
        "cousin": _flat(g.children.get(p, []) for p in parent_sibs),
        "object_cousin": _flat(g.children.get(p, []) for p in obj_parent_sibs),
        "referring_path": _flat(g.ancestors(r) for r in refs),
        "referring_cousin": _flat(g.children.get(p, []) for p in subjects),
        "distant_object_link": _flat(g.referrers.get(o, []) for o in objects),
    }


def priority_streams(
    g: NoteGraph, row: int, cands: dict[str, list[int]]
) -> dict[int, list[tuple[str, int]]]:
    """Each class's (relation, row) list: relation types take turns, one note each; a uri
    is claimed by its first occurrence in P1, P2, P3, P4 order (the focus by none)."""
    seen = {g.uris[row]}
    out: dict[int, list[tuple[str, int]]] = {}
    for prio, relations in PRIORITIES.items():
        queues = [(rel, iter(cands[rel])) for rel in relations]
        stream: list[tuple[str, int]] = []
        while queues:
            alive = []
            for rel, it in queues:
                for r in it:  # the next unseen note of this relation, if any
                    if g.uris[r] not in seen:
                        seen.add(g.uris[r])
                        stream.append((rel, r))
                        alive.append((rel, it))
                        break
            queues = alive
        out[prio] = stream
    return out


def select(
    streams: dict[int, list[tuple[str, int]]], take: Callable[[int, str, int], bool | None]
) -> None:
    """P1 whole, then P2:P3:P4 drawn 3:2:1. `take` returns True when the note was added,
    False when it did not fit (not a draw: the class goes on), None to stop."""
    for rel, r in streams.get(1, []):
        if take(1, rel, r) is None:
            return
    pos = {p: 0 for p in DRAWS}
    while any(pos[p] < len(streams.get(p, [])) for p in DRAWS):
        for p, quota in DRAWS.items():
            items = streams.get(p, [])
            drawn = 0
            while drawn < quota and pos[p] < len(items):
                rel, r = items[pos[p]]
                pos[p] += 1
                ok = take(p, rel, r)
                if ok is None:
                    return
                drawn += ok


# ---- notes -----------------------------------------------------------------------------


def _details(g: NoteGraph, row: int, max_tokens: int) -> str:
    text = g.details.get(row, "")
    if not text:
        return ""
    cut = truncate_tokens(text, max_tokens)
    return cut if cut == text else cut.rstrip() + ELLIPSIS


def bare_note(g: NoteGraph, row: int, max_tokens: int = RELATED_DETAILS_TOKENS) -> dict[str, Any]:
    parent = g.parent[row]
    return {
        "uri_and_title": g.link(row),
        "details_truncated": _details(g, row, max_tokens),
        "parent_uri_and_title": g.link(parent),
        "object_uri_and_title": g.link(g.object.get(row)),
    }


def note_with_path(g: NoteGraph, row: int, max_tokens: int = RELATED_DETAILS_TOKENS) -> dict:
    return {**bare_note(g, row, max_tokens), "contextualPath": _path(g, row)}


def _path(g: NoteGraph, row: int) -> list[str]:
    return [g.link(a) for a in reversed(g.ancestors(row))]  # type: ignore[misc]


def focus_note(g: NoteGraph, row: int, details_tokens: int, limit: int) -> dict[str, Any]:
    parent = g.parent[row]
    sibs = g.children.get(parent, []) if parent >= 0 else []
    pos = sibs.index(row) if row in sibs else len(sibs)
    return {
        **note_with_path(g, row, details_tokens),
        "children": [g.link(k) for k in g.children.get(row, [])[:limit]],
        "referrings": [g.link(r) for r in g.referrers.get(row, [])[:limit]],
        "prior_siblings": [g.link(s) for s in sibs[max(0, pos - limit) : pos]],
        "younger_siblings": [g.link(s) for s in sibs[pos + 1 : pos + 1 + limit]],
    }


@lru_cache(maxsize=1)
def _min_note_tokens() -> int:
    """Tokens of the smallest possible related note (empty details, no parent/object)."""
    empty = {k: None for k in ("uri_and_title", "parent_uri_and_title", "object_uri_and_title")}
    return count_tokens(_dumps({**empty, "uri_and_title": "[](x)", "details_truncated": ""}))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _focus_block(note: dict[str, Any]) -> str:
    return (
        f"-----Focus note-----\n{PROMPT_FOCUS}\n{_dumps(note)}\n"
        f"-----Related notes-----\n{PROMPT_RELATED}\n"
    )


def _fit_focus(g: NoteGraph, row: int, budget: int) -> tuple[dict[str, Any], str, int]:
    """The focus note and its context block within the budget: details at most
    FOCUS_DETAILS_SHARE of it, shortened further, then the lists, until the block fits; a
    budget too small for even that is an error."""
    details_tokens = min(FOCUS_DETAILS_TOKENS, int(budget * FOCUS_DETAILS_SHARE))
    limit = LIST_LIMIT
    while True:
        note = focus_note(g, row, details_tokens, limit)
        block = _focus_block(note)
        cost = count_tokens(block)
        if cost <= budget:
            return note, block, cost
        if details_tokens > 0:
            details_tokens = max(0, min(details_tokens, count_tokens(note["details_truncated"])))
            details_tokens = max(0, details_tokens - (cost - budget) - 1)
        elif limit > 0:
            limit //= 2
        else:
            raise ValueError(
                f"budget of {budget} tokens is too small for the focus note "
                f"{g.link(row)} alone (it needs {cost} tokens)"
            )


# ---- the query -------------------------------------------------------------------------


def focus_context(index: IndexTables, uri: str, budget_tokens: int | None) -> SearchResult:
    """Focus note `uri` and its related notes by priority within `budget_tokens`
    (default settings.query.focus_budget_tokens); `data` is the Overall JSON."""
    g = note_graph(index)
    if g.n == 0:
        return index.empty_result(uri, "focus")
    row = g.row_of_uri.get(uri)
    if row is None:
        raise ValueError(
            f"no note or section with uri {uri!r} in the index at {index.root} "
            "(a note's own uri, a section's 'path#slug', or a document's path)"
        )
    budget = index.settings.query.focus_budget_tokens if budget_tokens is None else budget_tokens
    return focus_result(g, row, int(budget), query=uri)


def focus_result(g: NoteGraph, row: int, budget: int, query: str) -> SearchResult:
    """The selection on a built NoteGraph (no index needed: benchmarks and tests)."""
    focus, block, used = _fit_focus(g, row, budget)
    cands = candidates(g, row)
    streams = priority_streams(g, row, cands)
    trace = [
        f"focus {g.link(row)}: {len(g.children.get(row, []))} children, "
        f"{len(g.referrers.get(row, []))} referring, budget {budget} tokens",
        f"focus note: {used} tokens",
        "candidates after dedup: "
        + ", ".join(f"P{p} {len(streams[p])}" for p in PRIORITIES)
        + " ("
        + ", ".join(f"{rel} {len(rows)}" for rel, rows in cands.items() if rows)
        + ")",
    ]

    chosen: list[tuple[int, str, int, str, int]] = []  # priority, relation, row, line, cost
    state = {"used": used, "skipped": 0, "in_row": 0}

    floor = _min_note_tokens()

    def take(prio: int, rel: str, r: int) -> bool | None:
        if budget - state["used"] < floor:  # not even an empty note fits any more
            return None
        note = note_with_path(g, r) if rel in WITH_PATH else bare_note(g, r)
        line = _dumps(note)
        cost = count_tokens(line) + 1  # + the newline
        if state["used"] + cost > budget:
            state["skipped"] += 1
            state["in_row"] += 1
            if state["in_row"] >= MAX_CONSECUTIVE_SKIPS:
                trace.append(f"{MAX_CONSECUTIVE_SKIPS} notes in a row over budget: stop")
                return None
            return False
        state["in_row"] = 0
        chosen.append((prio, rel, r, line, cost))
        state["used"] += cost
        return True

    select(streams, take)
    skipped = state["skipped"]
    context = block + "\n".join(c[3] for c in chosen)
    tokens = count_tokens(context)
    while tokens > budget and chosen:  # the per-line sum is an estimate; the total is exact
        chosen.pop()
        context = block + "\n".join(c[3] for c in chosen)
        tokens = count_tokens(context)
    by_prio = Counter(c[0] for c in chosen)
    trace.append(
        f"selected {len(chosen)} related notes ("
        + ", ".join(f"P{p} {by_prio[p]}" for p in sorted(by_prio))
        + f"), skipped {skipped} over budget; context {tokens} of {budget} tokens"
    )

    related = [json.loads(c[3]) for c in chosen]
    records = [
        {
            "kind": "note",
            "id": g.ids[r],
            "uri": g.uris[r],
            "title": g.titles[r],
            "document_id": g.documents[r],
            "rank": rank,
            "priority": prio,
            "relation": rel,
            "score": 1.0 / rank,  # rank-based: selection is by priority, not by a score
            "tokens": cost,
            "note": note,
        }
        for rank, ((prio, rel, r, _, cost), note) in enumerate(
            zip(chosen, related, strict=True), start=1
        )
    ]
    unit_ids: list[str] = []
    for r in [row, *(c[2] for c in chosen)]:
        unit_ids += [u for u in g.units.get(g.ids[r], []) if u not in unit_ids]
    return SearchResult(
        query=query,
        mode="focus",
        answer=_answer(g, row, chosen),
        context_text=context,
        records=records,
        text_unit_ids=unit_ids,
        trace=trace,
        context_tokens=tokens,
        data={"focusNote": focus, "related_notes": related},
    )


def _answer(g: NoteGraph, row: int, chosen: list[tuple[int, str, int, str, int]]) -> str:
    """Offline answer: the focus note, its details in brief, what the context holds."""
    head = f"{g.titles[row]} ({g.uris[row]})"
    details = _details(g, row, ANSWER_DETAILS_TOKENS)
    if details:
        head += f": {details}"
    if not chosen:
        return head + "\nNo related notes fit the budget."
    counts = Counter(c[1] for c in chosen)
    order = [rel for rels in PRIORITIES.values() for rel in rels]
    parts = [f"{counts[rel]} {rel.replace('_', ' ')}" for rel in order if counts[rel]]
    return head + f"\n{len(chosen)} related notes: " + ", ".join(parts) + "."

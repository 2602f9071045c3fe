"""Focus context itself: the focus note and related notes fitted to a token budget.

The focus block first (its details shortened to fit), then related notes as drawn by
priority until the budget is spent; the Overall JSON, the prompt text and an offline answer.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pipeline.query.focus.graph import FOCUS_DETAILS_TOKENS, NoteGraph, note_graph
from pipeline.query.focus.note_shapes import (
    bare_note,
    focus_note,
    note_with_path,
    truncated_details,
)
from pipeline.query.focus.priority import (
    PRIORITIES,
    WITH_PATH,
    candidates,
    priority_streams,
    select,
)
from pipeline.query.records import note_record
from pipeline.query.result import SearchResult
from pipeline.tokens import count_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


FOCUS_DETAILS_SHARE = 0.4  # the focus details' most of the budget (room for related notes)
ANSWER_DETAILS_TOKENS = 40  # details shown in the offline answer
LIST_LIMIT = 50  # entries of each focus-note list (children, referrings, siblings)
MAX_CONSECUTIVE_SKIPS = 64  # this many notes in a row over budget: the budget is spent
PROMPT_FOCUS = (
    "The focus note, as JSON. Every note is named by its uri_and_title, the Markdown link "
    "[title](uri); relations between notes can be inferred from the uri_and_title fields "
    "(parent_uri_and_title, object_uri_and_title, contextualPath: the ancestors from the "
    "root down to the parent, children, referrings: notes that refer to it, prior_siblings, "
    "younger_siblings). A note with an object is a reification: its parent is the subject, "
    "its title the predicate."
)


PROMPT_RELATED = "Related notes, most relevant first, one JSON object per line:"


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
def focus_context(index: IndexTables, uri: str, budget_tokens: int) -> SearchResult:
    """Focus note `uri` and its related notes by priority within `budget_tokens`;
    `data` is the Overall JSON."""
    g = note_graph(index)
    if g.n == 0:
        return index.empty_result(uri, "focus")
    row = g.row_of_uri.get(uri)
    if row is None:
        raise ValueError(
            f"no note or section with uri {uri!r} in the index at {index.root} "
            "(a note's own uri, a section's 'path#slug', or a document's path)"
        )
    return focus_result(g, row, int(budget_tokens), query=uri)


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
        note_record(g.ids[r], g.uris[r], g.titles[r], g.documents[r], rank, prio, rel, cost, note)
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
    details = truncated_details(g, row, ANSWER_DETAILS_TOKENS)
    if details:
        head += f": {details}"
    if not chosen:
        return head + "\nNo related notes fit the budget."
    counts = Counter(c[1] for c in chosen)
    order = [rel for rels in PRIORITIES.values() for rel in rels]
    parts = [f"{counts[rel]} {rel.replace('_', ' ')}" for rel in order if counts[rel]]
    return head + f"\n{len(chosen)} related notes: " + ", ".join(parts) + "."

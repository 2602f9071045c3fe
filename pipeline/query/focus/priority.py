"""Related notes by priority: the candidates of each relation type, P1..P4, drawn 3:2:1.

A note counts once, at its highest-priority occurrence; within a class the relation types
take turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice

from pipeline.query.focus.graph import NoteGraph

CANDIDATES_PER_RELATION = 200  # notes considered per relation type (a hub has thousands)
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

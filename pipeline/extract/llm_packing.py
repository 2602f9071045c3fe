"""Packing text units into LLM extraction calls.

Why packs: the extraction prompt (the NEREL type lists, a compact schema and one tiny example,
620 tokens) is paid per call, so short text units of one document share a call. Packs never
cross documents, so adding a document leaves every other document's calls (and LLM cache
keys) unchanged. How many text tokens a pack may hold is the extractor's
(`LlmExtractor.pack_tokens`: the answer, not the prompt, bounds a pack).
"""

from __future__ import annotations

__all__ = ["pack_units"]


def pack_units(
    unit_ids: list[str],
    n_tokens: list[int],
    groups: list[str] | None = None,
    max_tokens: int = 1200,
    max_units: int = 12,
) -> list[list[int]]:
    """Row indices packed greedily in input order: a pack holds consecutive units of one group
    (document) whose tokens sum to <= max_tokens (a longer unit goes alone) and at most
    max_units. Deterministic; a unit id seen twice is packed once (its first row)."""
    packs: list[list[int]] = []
    cur: list[int] = []
    cur_tok = 0
    cur_group: str | None = None
    seen: set[str] = set()
    for i, (uid, n) in enumerate(zip(unit_ids, n_tokens, strict=True)):
        if uid in seen:
            continue
        seen.add(uid)
        g = groups[i] if groups is not None else ""
        if cur and (g != cur_group or cur_tok + n > max_tokens or len(cur) >= max_units):
            packs.append(cur)
            cur, cur_tok = [], 0
        cur.append(i)
        cur_tok += n
        cur_group = g
    if cur:
        packs.append(cur)
    return packs

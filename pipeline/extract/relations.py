"""Relations between the mentions of a unit: pairs in the same sentence (weight 1) and
sentence heads up to `max_relation_distance` sentences apart (weight 1/(1+d)); a few verb
patterns between two typed mentions give a NEREL class, else RELATED_TO."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.extract.mentions import Mention, evidence

MAX_MENTIONS_PER_SENTENCE = 12
PAIR_WINDOW = 2  # a named mention is related to the next 2 of its sentence, not to all
# Mentions related only to their nearest named mention (they would be hubs otherwise).
_ATTACHED = frozenset({"CONCEPT", "DATE", "PERCENT", "MONEY"})
_NON_HEAD = frozenset({"CONCEPT", "DATE", "PERCENT", "MONEY", "PROFESSION", "NATIONALITY"})

_LOC_TYPES = frozenset({"CITY", "COUNTRY", "STATE_OR_PROVINCE", "LOCATION", "DISTRICT", "FACILITY"})


@dataclass(frozen=True)
class _RelPattern:
    regex: re.Pattern[str]
    left: frozenset[str]  # type of the mention on the left
    right: frozenset[str]
    rel: str
    swap: bool = False  # True: source is the right-hand mention


def _rp(pat: str, left: Iterable[str], right: Iterable[str], rel: str, swap: bool = False):
    return _RelPattern(re.compile(pat), frozenset(left), frozenset(right), rel, swap)


_PER = {"PERSON"}
_ORG = {"ORGANIZATION"}
_REL_PATTERNS = (
    _rp(r"^\s*$", {"PROFESSION"}, _PER, "WORKS_AS", swap=True),
    _rp(r"^\s*,\s*(?:an?|the)?\s*$", _PER, {"PROFESSION"}, "WORKS_AS"),
    _rp(r"\bborn\b[^,;]{0,20}\b(?:in|at)\s*$|родил\w*\s+в\s*$", _PER, _LOC_TYPES, "PLACE_OF_BIRTH"),
    _rp(r"\bborn\b[^;]{0,20}$|родил\w*[^;]{0,10}$", _PER, {"DATE"}, "DATE_OF_BIRTH"),
    _rp(r"\bdied\b[^;]{0,20}$|умер\w*[^;]{0,10}$", _PER, {"DATE"}, "DATE_OF_DEATH"),
    _rp(r"\bdied\b[^,;]{0,20}\b(?:in|at)\s*$", _PER, _LOC_TYPES, "PLACE_OF_DEATH"),
    _rp(
        r"\b(?:headquartered|based)\s+in\s*$|\bштаб-квартир\w*\s+в\s*$",
        _ORG,
        _LOC_TYPES,
        "HEADQUARTERED_IN",
    ),
    _rp(
        r"^\s*,\s*$|\blocated\s+in\s*$|^\s*in\s*$",
        {"CITY", "DISTRICT", "FACILITY", "LOCATION"},
        {"COUNTRY", "STATE_OR_PROVINCE", "CITY"},
        "LOCATED_IN",
    ),
    _rp(r"\b(?:founded|established|created)\s+by\s*$|основан\w*\s*$", _ORG, _PER, "FOUNDED_BY"),
    _rp(
        r"\b(?:co-)?(?:founded|established)\s*(?:the)?\s*$|основал\w*\s*$",
        _PER,
        _ORG,
        "FOUNDED_BY",
        swap=True,
    ),
    _rp(
        r"\b(?:wife|husband|spouse|widow|widower)\s+of\s*$|\bmarried\s*$|\bжена\s*$|\bмуж\s*$",
        _PER,
        _PER,
        "SPOUSE",
    ),
    _rp(r"\b(?:son|daughter|child)\s+of\s*$", _PER, _PER, "PARENT_OF", swap=True),
    _rp(r"\b(?:father|mother|parent)\s+of\s*$", _PER, _PER, "PARENT_OF"),
    _rp(
        r"\bmember\s+of\s*(?:the)?\s*$|\bjoined\s*(?:the)?\s*$|\bчлен\w*\s*$",
        _PER,
        _ORG,
        "MEMBER_OF",
    ),
    _rp(
        r"\b(?:works?|worked|working|professor|lecturer|employed)\s+(?:at|for|by)\s*(?:the)?\s*$"
        r"|\bработа\w*\s+в\s*$",
        _PER,
        _ORG,
        "WORKPLACE",
    ),
)


def find_relations(
    sents: list[str],
    mentions: list[Mention],
    types: dict[str, str],
    kept: set[str],
    concepts: list[str],
    max_distance: int,
) -> list[tuple[str, str, str, str, float]]:
    """(source, target, type, evidence, weight) of the unit's relations between kept entities."""
    sent_lower = [s.lower() for s in sents]
    # Relations: mentions of kept entities per sentence (first position per title).
    per_sent: list[list[Mention]] = [[] for _ in sents]
    seen_in_sent: set[tuple[int, str]] = set()
    for m in sorted(mentions, key=lambda m: (m.sent, m.pos)):
        if m.title in kept and (m.sent, m.title) not in seen_in_sent:
            seen_in_sent.add((m.sent, m.title))
            per_sent[m.sent].append(m)
    for c in concepts:  # concepts may recur in later sentences
        for si, sl in enumerate(sent_lower):
            pos = sl.find(c)
            if pos >= 0 and (si, c) not in seen_in_sent:
                seen_in_sent.add((si, c))
                per_sent[si].append(Mention(c, "CONCEPT", 1.0, si, pos, pos + len(c)))
    for lst in per_sent:
        lst.sort(key=lambda m: (m.type == "CONCEPT", m.pos))
        del lst[MAX_MENTIONS_PER_SENTENCE:]
        lst.sort(key=lambda m: m.pos)

    rels: dict[tuple[str, str, str], list] = {}

    def add(src: str, tgt: str, rel: str, w: float, ev: str) -> None:
        if src == tgt:
            return
        if rel == "RELATED_TO" and src > tgt:
            src, tgt = tgt, src
        k = (src, tgt, rel)
        if k in rels:
            rels[k][0] += w
        else:
            rels[k] = [w, ev]

    dist = max(0, max_distance)
    heads = [next((m for m in lst if m.type not in _NON_HEAD), None) for lst in per_sent]
    for si, lst in enumerate(per_sent):
        s = sents[si]
        named = [m for m in lst if m.type not in _ATTACHED]
        pairs = [(x, y) for i, x in enumerate(named) for y in named[i + 1 : i + 1 + PAIR_WINDOW]]
        for a in lst:  # a concept or a date hangs off its nearest named mention only
            if a.type in _ATTACHED and named:
                n = min(named, key=lambda m: (abs(m.pos - a.pos), m.pos))
                pairs.append((a, n) if a.pos < n.pos else (n, a))
        for x, y in pairs:
            rel, src, tgt = "RELATED_TO", x.title, y.title
            between = s[x.end : y.pos] if y.pos >= x.end else None
            if between is not None and len(between) <= 60:
                bl = between.lower()
                for p in _REL_PATTERNS:
                    if (
                        types[x.title] in p.left
                        and types[y.title] in p.right
                        and p.regex.search(bl)
                    ):
                        rel = p.rel
                        src, tgt = (y.title, x.title) if p.swap else (x.title, y.title)
                        break
            add(src, tgt, rel, 1.0, evidence(s, x.pos))
        # Across sentences only the sentences' heads (first named mention) are linked:
        # all pairs would make every unit a clique (measured: 2x the relations on MuSiQue).
        hx = heads[si]
        for d in range(1, dist + 1):
            if si + d >= len(per_sent) or hx is None:
                break
            hy = heads[si + d]
            if hy is not None:
                ev = evidence(s + " " + sents[si + d])
                add(hx.title, hy.title, "RELATED_TO", 1.0 / (1 + d), ev)
    # A typed relation absorbs the RELATED_TO weight of the same pair.
    typed_pairs = {frozenset((k[0], k[1])): k for k in rels if k[2] != "RELATED_TO"}
    for k in list(rels):
        if k[2] == "RELATED_TO":
            tk = typed_pairs.get(frozenset((k[0], k[1])))
            if tk is not None:
                rels[tk][0] += rels.pop(k)[0]
    return [(src, tgt, rel, ev, float(w)) for (src, tgt, rel), (w, ev) in rels.items()]

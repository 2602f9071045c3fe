"""Typing: the entity type of a candidate name from cheap evidence, strongest first
(honorific/title, gazetteer, keyword in the span, acronym, context words, given name), a
measured fallback for spans with no evidence, and the per-unit vote that gives each
surface form its best-supported type."""

from __future__ import annotations

from pipeline.extract import gazetteer as gz
from pipeline.extract.lexicon import (
    AWARD_WORDS,
    CITIES,
    CITY_LAST,
    COUNTRIES,
    DISTRICT_LAST,
    EVENT_WORDS,
    FACILITY_LAST,
    FAMILY_LAST,
    GIVEN,
    HOLIDAYS,
    LANGUAGES,
    LAW_WORDS,
    LOCATION_LAST,
    LOCATIONS,
    NATIONALITIES,
    ORG_WORDS,
    PERSON_TITLES,
    PERSON_VERBS,
    PROFESSIONS,
    RELIGIONS,
    STATE_LAST,
    STATES,
    norm_tok,
)
from pipeline.extract.mentions import Mention
from pipeline.extract.spans import is_acronym
from pipeline.sentences import wordset

_LOC_PREPS = wordset(
    "in at near from across throughout outside inside around towards toward via в во из под около"
)
_LANG_CUES = wordset("in into from language languages tongue dialect")
_COMPASS = wordset(
    "north south east west northern southern eastern western central upper lower new greater"
    " northeast northwest southeast southwest native"
)
_LOCATION_FIRST = frozenset({"mount", "lake", "cape", "isle", "gulf", "river", "mt."})


def _prev_words(sentence: str, start: int, n: int = 2) -> list[str]:
    return [
        norm_tok(w.strip("\"'“”‘’«»(),:;"))
        for w in sentence[max(0, start - 40) : start].split()[-n:]
    ]


def _next_words(sentence: str, end: int, n: int = 2) -> list[str]:
    return [norm_tok(w.strip("\"'“”‘’«»(),:;.!?")) for w in sentence[end : end + 40].split()[:n]]


def type_span(
    toks: list[str],
    norm: list[str],
    sentence: str,
    start: int,
    end: int,
    heading: bool,
    honorific: bool,
) -> tuple[str, float]:
    """(type, confidence) of a capitalised span from its words and context."""
    key = " ".join(norm)
    last, first = norm[-1], norm[0]
    if honorific:
        return "PERSON", 3.0
    if len(norm) > 1 and first in PERSON_TITLES:
        return "PERSON", 3.0
    for k in (key, " ".join(norm[1:]) if len(norm) > 1 and first in _COMPASS else None):
        if k in COUNTRIES:
            return "COUNTRY", 3.0
        if k in STATES:
            return "STATE_OR_PROVINCE", 3.0
        if k in CITIES:
            return "CITY", 3.0
        if k in LOCATIONS:
            return "LOCATION", 3.0
        if k in NATIONALITIES:
            return "NATIONALITY", 3.0
    if key in HOLIDAYS:
        return "EVENT", 3.0
    if key in gz.DISCIPLINES:
        return "CONCEPT", 3.0
    nxt = _next_words(sentence, end, 2)
    prev = _prev_words(sentence, start, 2)
    if key in LANGUAGES and (
        (nxt and nxt[0] in _LANG_CUES)
        or (prev and prev[-1] in _LANG_CUES and not nxt)
        or (prev and prev[-1] in {"in", "into"})
    ):
        return "LANGUAGE", 3.0
    if key in NATIONALITIES:
        return "NATIONALITY", 3.0
    if key in RELIGIONS:
        return "RELIGION", 3.0
    if len(norm) == 1 and (last.endswith("ism") or last.endswith("изм")) and len(last) > 5:
        return "IDEOLOGY", 3.0
    if first in EVENT_WORDS and len(norm) > 1:
        return "EVENT", 3.0
    if last in FAMILY_LAST and len(norm) > 1:
        return "FAMILY", 3.0
    if last in LOCATION_LAST or (len(norm) > 1 and first in _LOCATION_FIRST):
        return "LOCATION", 3.0
    if last in STATE_LAST and len(norm) > 1:
        return "STATE_OR_PROVINCE", 3.0
    if last in DISTRICT_LAST and len(norm) > 1:
        return "DISTRICT", 3.0
    normset = set(norm)
    if normset & EVENT_WORDS:
        return "EVENT", 3.0
    if normset & AWARD_WORDS:
        return "AWARD", 3.0
    if len(norm) > 1 and normset & LAW_WORDS:
        return "LAW", 3.0
    if last in FACILITY_LAST and last not in ORG_WORDS:
        return "FACILITY", 3.0
    if normset & ORG_WORDS:
        return "ORGANIZATION", 3.0
    if len(toks) == 1 and is_acronym(toks[0]) and not heading:
        return "ORGANIZATION", 2.0
    if (
        prev and (prev[-1] in PROFESSIONS or prev[-1] in PERSON_TITLES or prev[-1] in PERSON_VERBS)
    ) or (nxt and (nxt[0] in PERSON_VERBS or " ".join(nxt) in PERSON_VERBS)):
        return "PERSON", 2.0
    if first in GIVEN and (len(norm) > 1 or not heading):
        return "PERSON", 2.0
    if last in CITY_LAST and len(norm) > 1:
        return "CITY", 3.0
    if (
        len(nxt) > 0
        and sentence[end : end + 2] == ", "
        and (nxt[0] in STATES or nxt[0] in COUNTRIES)
    ):
        return "CITY", 2.0  # "Hazlehurst, Mississippi"
    if prev and prev[-1] in _LOC_PREPS:
        return "LOCATION", 1.0
    return _fallback_type(toks, norm), 0.0


def _fallback_type(toks: list[str], norm: list[str]) -> str:
    """Type of a span with no evidence at all.

    Measured by hand on 60 random such spans each from MuSiQue and A Christmas Carol: short
    runs of capitalised words without connectors are mostly people ("Liam Neeson",
    "Tiny Tim": 13 of 60 vs 9 organisations in MuSiQue; most in the Carol); runs with
    "of"/"del" or of 4+ words are mostly organisations or titled things; single unknown
    words split between people (Carol) and places (MuSiQue), and a place-like ending
    ("-sk", "-burg", "-heim") separates most of the places.
    """
    if len(norm) == 1:
        if norm[0].endswith(gz.PLACE_SUFFIXES) and len(norm[0]) > 5:
            return "LOCATION"
        return "PERSON"
    if len(norm) <= 3 and all(t[:1].isupper() for t in toks):
        return "PERSON"
    return "ORGANIZATION"


def vote_types(mentions: list[Mention]) -> dict[str, str]:
    """Type per surface form: its strongest evidence in the unit; PERSON propagates to the
    single-word parts of a person's name ("Ebenezer Scrooge" -> "Scrooge")."""
    best: dict[str, Mention] = {}
    for m in sorted(mentions, key=lambda m: (m.sent, m.pos)):
        if m.title not in best or m.conf > best[m.title].conf:
            best[m.title] = m
    person_parts = {
        norm_tok(t)
        for t_, m in best.items()
        if m.type == "PERSON" and m.conf >= 2.0 and " " in t_
        for t in t_.split()
        if t[:1].isupper()
    }
    types: dict[str, str] = {}
    for t_, m in best.items():
        typ = m.type
        if m.conf < 2.0 and " " not in t_ and norm_tok(t_) in person_parts:
            typ = "PERSON"
        types[t_] = typ
    return types

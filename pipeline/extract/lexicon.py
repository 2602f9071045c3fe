"""The extractor's word knowledge in lookup form: token normalisation (lower case, crude
Russian stemming), function words and the gazetteer's lists normalised the same way. Shared
by span finding, typing and keyphrases (the language guess is pipeline.lexical.analysis')."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipeline.extract import gazetteer as gz
from pipeline.sentences import wordset

_CYR_RE = re.compile(r"[а-яё]", re.IGNORECASE)


# --------------------------------------------------------------------------- word lists

FUNCTION_WORDS = wordset(
    """a an the this that these those it its it's he she they we you i me him her them us my
    your his our their in on at by for from to into onto of off out over under with without
    within about above below after before since until during through across between among
    and or but nor so yet if then than as though although because while when where whereas
    whether which who whom whose what why how is are was were be been being am do does did
    have has had will would shall should can could may might must not no yes all any each
    every some many most more much such both either neither other another one there here
    also only even just still however thus hence therefore meanwhile moreover besides
    indeed perhaps maybe once again never always often sometimes now later soon already
    let upon whilst unto thou thee thy ye oh o ah well what's that's there's here's
    в во на с со к ко у о об от до из за по при для без над под про через между и а но или
    да же ли не ни то это этот эта эти тот та те он она оно они мы вы я его её ее их ему ей
    им нам вам мне мой моя моё мои твой наш ваш свой как так где когда что чтобы если хотя
    потому поэтому также тоже уже ещё еще лишь только вот даже весь вся всё все каждый"""
)
_NON_NAMES = gz.NON_NAMES | FUNCTION_WORDS

# --------------------------------------------------------------------------- normalisation

_RU_ENDING_RE = re.compile(
    r"(?:ами|ями|ого|его|ому|ему|ыми|ими|ой|ей|ом|ем|ах|ях|ую|юю|ая|яя|ое|ее|ые|ие|ый|ий|ов|ев"
    r"|ам|ям|а|я|о|е|у|ю|ы|и|ь)$"
)


def ru_stem(word: str) -> str:
    """Crude Russian stem: drop one inflection ending, keep >= 3 letters (Москве -> москв)."""
    w = word.lower().replace("ё", "е")
    m = _RU_ENDING_RE.search(w)
    if m and m.start() >= 3:
        return w[: m.start()]
    return w


def norm_tok(tok: str) -> str:
    """Lookup form of a token: lower case; Cyrillic words stemmed."""
    return ru_stem(tok) if _CYR_RE.search(tok) else tok.lower()


def _norm_phrase(text: str) -> str:
    return " ".join(norm_tok(t) for t in text.split())


def _norm_set(words: Iterable[str]) -> frozenset[str]:
    return frozenset(_norm_phrase(w) for w in words)


COUNTRIES = _norm_set(gz.COUNTRIES)
CITIES = _norm_set(gz.CITIES)
STATES = _norm_set(gz.STATES)
LOCATIONS = _norm_set(gz.LOCATIONS)
HOLIDAYS = _norm_set(gz.HOLIDAYS)
FAMILY_LAST = _norm_set(gz.FAMILY_LAST)
CITY_LAST = _norm_set(gz.CITY_LAST)
NATIONALITIES = _norm_set(gz.NATIONALITIES)
LANGUAGES = _norm_set(gz.LANGUAGES)
RELIGIONS = _norm_set(gz.RELIGIONS)
GIVEN = _norm_set(gz.GIVEN_NAMES)
PERSON_TITLES = _norm_set(gz.PERSON_TITLES)
PROFESSIONS = _norm_set(gz.PROFESSIONS)
PERSON_VERBS = _norm_set(gz.PERSON_VERBS)
FACILITY_LAST = _norm_set(gz.FACILITY_LAST)
LOCATION_LAST = _norm_set(gz.LOCATION_LAST)
STATE_LAST = _norm_set(gz.STATE_LAST)
DISTRICT_LAST = _norm_set(gz.DISTRICT_LAST)
EVENT_WORDS = _norm_set(gz.EVENT_WORDS)
LAW_WORDS = _norm_set(gz.LAW_WORDS)
AWARD_WORDS = _norm_set(gz.AWARD_WORDS)
ORG_WORDS = _norm_set(gz.ORG_WORDS)
NON_NAMES_N = _norm_set(_NON_NAMES)
KNOWN = COUNTRIES | CITIES | STATES | LOCATIONS | NATIONALITIES | RELIGIONS | GIVEN | HOLIDAYS

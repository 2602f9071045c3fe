"""Offline entity/relation extractor: patterns + small gazetteers + YAKE keyphrases.

Why not a statistical NER model: on MuSiQue a regex for capitalised spans and years linked
passages as well as spaCy's small model at ~1/250 of the cost (STACK-NOTES.md), and the
whole index must stay within 2x the embedding time. So the extractor is a handful of
compiled regexes per sentence plus one YAKE call per unit:

1. sentences: a compact regex splitter (abbreviations and initials do not end a sentence;
   blank lines and short title lines do).
2. named spans: runs of capitalised words (any script: the "uppercase letter" class is
   built from `str.isupper`) joined by lower-case name connectors ("Bank of England",
   "Charles de Gaulle"); split at capitalised function words; edge function words,
   Mr/Mrs-type honorifics and possessives stripped. A sentence-initial single word is kept
   only if the unit also capitalises it elsewhere, or a gazetteer knows it.
3. dates ("19 May 2004", "December 1843", "15 мая 2018 года", years, decades), percents
   and money by regex; quoted title-case phrases as WORK_OF_ART; profession nouns.
4. typing by cheap evidence, strongest first: honorific/title, gazetteer (country, city,
   state, nationality, language, religion), keyword in the span (Street, River, War,
   Prize, Act, University, Bank, ...), acronym, context (profession or "said" next to it,
   "in/at/from X"), given name; a per-unit pass propagates PERSON from "Ebenezer Scrooge"
   to "Scrooge". Unknown spans get a measured fallback type (`_fallback_type`).
5. CONCEPT: YAKE keyphrases that are all lower case (the capitalised ones duplicate 2.).
6. relations: entity pairs in the same sentence (weight 1) or up to
   `max_relation_distance` sentences apart (weight 1/(1+d)); a few verb patterns between
   two typed mentions give a NEREL class, else RELATED_TO.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import polars as pl

from pipeline import schemas
from pipeline.config import ExtractionSettings
from pipeline.extract import gazetteer as gz
from pipeline.sentences import UPPER_CLASS, split_sentences, wordset

MODEL = "patterns+yake"
EVIDENCE_CHARS = 300
MAX_MENTIONS_PER_SENTENCE = 12
PAIR_WINDOW = 2  # a named mention is related to the next 2 of its sentence, not to all
# Mentions related only to their nearest named mention (they would be hubs otherwise).
_ATTACHED = frozenset({"CONCEPT", "DATE", "PERCENT", "MONEY"})
_NON_HEAD = frozenset({"CONCEPT", "DATE", "PERCENT", "MONEY", "PROFESSION", "NATIONALITY"})

# --------------------------------------------------------------------------- character classes


_L = r"[^\W_]"  # a letter or digit, any script
_WORD = rf"[{UPPER_CLASS}]{_L}*(?:['’\-]{_L}+)*"
_ABBR = r"(?:St|Mt|Ft|Mr|Mrs|Ms|Dr|Jr|Sr|Prof|Gen|Col|Capt|Lt|Sgt|Rev|Hon|Co|Inc|Ltd|Corp|Bros)\."
_INITIAL = rf"[{UPPER_CLASS}]\.(?=\s)"
_TOK = rf"(?:{_ABBR}|{_INITIAL}|{_WORD})"
# Lower-case words that may sit inside a name. Not "and"/"и": they join two names.
_CONN = r"(?:of|de|da|di|do|dos|du|del|della|der|den|des|von|van|zu|y|al|el|bin|ibn|upon|&)"
# An article only after a connector: "Bank of the West", "de la Cruz"; not "Scrooge the Baleful".
_CONN_SEQ = rf"{_CONN}\s+(?:(?:the|la|le|les)\s+)?"
_SPAN_RE = re.compile(rf"{_TOK}(?:\s+(?:{_CONN_SEQ})?{_TOK})*")
_TOKEN_RE = re.compile(rf"{_TOK}|\S+")
_CYR_RE = re.compile(r"[а-яё]", re.IGNORECASE)
_LATIN_RE = re.compile(r"[a-z]", re.IGNORECASE)


# --------------------------------------------------------------------------- dates and numbers

_EN_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan\.?|Feb\.?|Mar\.?|Apr\.?|Jun\.?|Jul\.?|Aug\.?|Sept?\.?|Oct\.?|Nov\.?|Dec\.?)"
)
_RU_MONTH = (
    r"(?:январ[ьяе]|феврал[ьяе]|март[ае]?|апрел[ьяе]|ма[йяе]|июн[ьяе]|июл[ьяе]|август[ае]?|"
    r"сентябр[ьяе]|октябр[ьяе]|ноябр[ьяе]|декабр[ьяе])"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:1\d{3}|20\d{2})"
_DATE_RE = re.compile(
    rf"""(?<![\w.,])(?:
        {_DAY}\s+(?:of\s+)?{_EN_MONTH},?\s+\d{{3,4}}
      | {_EN_MONTH}\s+{_DAY},?\s+\d{{3,4}}
      | {_EN_MONTH},?\s+{_YEAR}
      | \d{{1,2}}\s+{_RU_MONTH}(?:\s+{_YEAR}(?:\s+(?:года|году|г\.))?)?
      | {_RU_MONTH}\s+{_YEAR}(?:\s+(?:года|году|г\.))?
      | {_YEAR}\s+(?:года|году|год|г\.)
      | {_EN_MONTH}\s+{_DAY}(?![\w])
      | {_DAY}\s+{_EN_MONTH}(?![\w])
      | {_YEAR}s
      | {_YEAR}
    )(?![\w]|[.,]\d)""",
    re.VERBOSE,
)
_PERCENT_RE = re.compile(
    r"(?<![\w.,])\d+(?:[.,]\d+)?\s?(?:%|percent\b|per cent\b|процент\w*)", re.IGNORECASE
)
_MONEY_RE = re.compile(
    r"[$£€¥]\s?\d[\d,.]*(?:\s?(?:million|billion|trillion|thousand|bn|m)\b)?"
    r"|(?<![\w.,])\d[\d,.]*\s(?:million\s|billion\s|млн\s|млрд\s)?"
    r"(?:dollars|pounds|euros|рубл\w*|долл\w*|евро)\b",
    re.IGNORECASE,
)
# ``Title'' (MuSiQue), "Title", “Title”, «Название».
_QUOTED_RE = re.compile(r"(?:``\s?|[\"“«])([^\"”»`\n]{1,80}?)\s?(?:''|[\"”»])")
_QUOTED_BAD = re.compile(r"[.!?,;]")


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))


_PROFESSION_RE = re.compile(rf"(?<!\w)(?:{_alternation(gz.PROFESSIONS)})(?!\w)")
_RU_NATIONALITY_RE = re.compile(rf"(?<!\w)(?:{_alternation(gz.NATIONALITIES_RU)})\w*")

# --------------------------------------------------------------------------- word lists

_FUNCTION_WORDS = wordset(
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
_NON_NAMES = gz.NON_NAMES | _FUNCTION_WORDS
_LOC_PREPS = wordset(
    "in at near from across throughout outside inside around towards toward via в во из под около"
)
_LANG_CUES = wordset("in into from language languages tongue dialect")


_LOC_TYPES = frozenset({"CITY", "COUNTRY", "STATE_OR_PROVINCE", "LOCATION", "DISTRICT", "FACILITY"})

# --------------------------------------------------------------------------- normalisation

_RU_ENDING_RE = re.compile(
    r"(?:ами|ями|ого|его|ому|ему|ыми|ими|ой|ей|ом|ем|ах|ях|ую|юю|ая|яя|ое|ее|ые|ие|ый|ий|ов|ев"
    r"|ам|ям|а|я|о|е|у|ю|ы|и|ь)$"
)


def _ru_stem(word: str) -> str:
    """Crude Russian stem: drop one inflection ending, keep >= 3 letters (Москве -> москв)."""
    w = word.lower().replace("ё", "е")
    m = _RU_ENDING_RE.search(w)
    if m and m.start() >= 3:
        return w[: m.start()]
    return w


def _norm_tok(tok: str) -> str:
    """Lookup form of a token: lower case; Cyrillic words stemmed."""
    return _ru_stem(tok) if _CYR_RE.search(tok) else tok.lower()


def _norm_phrase(text: str) -> str:
    return " ".join(_norm_tok(t) for t in text.split())


def _norm_set(words: Iterable[str]) -> frozenset[str]:
    return frozenset(_norm_phrase(w) for w in words)


_COUNTRIES = _norm_set(gz.COUNTRIES)
_CITIES = _norm_set(gz.CITIES)
_STATES = _norm_set(gz.STATES)
_LOCATIONS = _norm_set(gz.LOCATIONS)
_HOLIDAYS = _norm_set(gz.HOLIDAYS)
_FAMILY_LAST = _norm_set(gz.FAMILY_LAST)
_CITY_LAST = _norm_set(gz.CITY_LAST)
_NATIONALITIES = _norm_set(gz.NATIONALITIES)
_LANGUAGES = _norm_set(gz.LANGUAGES)
_RELIGIONS = _norm_set(gz.RELIGIONS)
_GIVEN = _norm_set(gz.GIVEN_NAMES)
_PERSON_TITLES = _norm_set(gz.PERSON_TITLES)
_PROFESSIONS = _norm_set(gz.PROFESSIONS)
_PERSON_VERBS = _norm_set(gz.PERSON_VERBS)
_FACILITY_LAST = _norm_set(gz.FACILITY_LAST)
_LOCATION_LAST = _norm_set(gz.LOCATION_LAST)
_STATE_LAST = _norm_set(gz.STATE_LAST)
_DISTRICT_LAST = _norm_set(gz.DISTRICT_LAST)
_EVENT_WORDS = _norm_set(gz.EVENT_WORDS)
_LAW_WORDS = _norm_set(gz.LAW_WORDS)
_AWARD_WORDS = _norm_set(gz.AWARD_WORDS)
_ORG_WORDS = _norm_set(gz.ORG_WORDS)
_NON_NAMES_N = _norm_set(_NON_NAMES)
_KNOWN = (
    _COUNTRIES | _CITIES | _STATES | _LOCATIONS | _NATIONALITIES | _RELIGIONS | _GIVEN | _HOLIDAYS
)
_COMPASS = wordset(
    "north south east west northern southern eastern western central upper lower new greater"
    " northeast northwest southeast southwest native"
)
_LOCATION_FIRST = frozenset({"mount", "lake", "cape", "isle", "gulf", "river", "mt."})

# --------------------------------------------------------------------------- relation patterns


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


# --------------------------------------------------------------------------- per-unit extraction


@dataclass
class _Mention:
    title: str
    type: str
    conf: float
    sent: int
    pos: int  # char offset inside the sentence
    end: int


@dataclass
class _UnitResult:
    entities: list[tuple[str, str, str]] = field(default_factory=list)  # title, type, evidence
    relations: list[tuple[str, str, str, str, float]] = field(default_factory=list)


def _evidence(sentence: str, pos: int = 0) -> str:
    """The sentence, or a ~EVIDENCE_CHARS window of it around `pos` cut at word boundaries."""
    if len(sentence) <= EVIDENCE_CHARS:
        return sentence
    lo = max(0, min(pos - EVIDENCE_CHARS // 3, len(sentence) - EVIDENCE_CHARS))
    hi = lo + EVIDENCE_CHARS
    if lo > 0:
        sp = sentence.find(" ", lo)
        lo = sp + 1 if 0 <= sp < lo + 30 else lo
    if hi < len(sentence):
        sp = sentence.rfind(" ", lo, hi)
        hi = sp if sp > lo else hi
    return ("…" if lo > 0 else "") + sentence[lo:hi] + ("…" if hi < len(sentence) else "")


def _strip_possessive(tok: str) -> str:
    for suf in ("'s", "’s", "'S", "’S"):
        if tok.endswith(suf) and len(tok) > 2:
            return tok[:-2]
    return tok.rstrip("'’")


def _is_acronym(tok: str) -> bool:
    letters = tok.replace(".", "").replace("&", "")
    return 2 <= len(letters) <= 6 and letters.isupper() and letters.isalpha()


def _prev_words(sentence: str, start: int, n: int = 2) -> list[str]:
    return [
        _norm_tok(w.strip("\"'“”‘’«»(),:;"))
        for w in sentence[max(0, start - 40) : start].split()[-n:]
    ]


def _next_words(sentence: str, end: int, n: int = 2) -> list[str]:
    return [_norm_tok(w.strip("\"'“”‘’«»(),:;.!?")) for w in sentence[end : end + 40].split()[:n]]


def _type_span(
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
    if len(norm) > 1 and first in _PERSON_TITLES:
        return "PERSON", 3.0
    for k in (key, " ".join(norm[1:]) if len(norm) > 1 and first in _COMPASS else None):
        if k in _COUNTRIES:
            return "COUNTRY", 3.0
        if k in _STATES:
            return "STATE_OR_PROVINCE", 3.0
        if k in _CITIES:
            return "CITY", 3.0
        if k in _LOCATIONS:
            return "LOCATION", 3.0
        if k in _NATIONALITIES:
            return "NATIONALITY", 3.0
    if key in _HOLIDAYS:
        return "EVENT", 3.0
    if key in gz.DISCIPLINES:
        return "CONCEPT", 3.0
    nxt = _next_words(sentence, end, 2)
    prev = _prev_words(sentence, start, 2)
    if key in _LANGUAGES and (
        (nxt and nxt[0] in _LANG_CUES)
        or (prev and prev[-1] in _LANG_CUES and not nxt)
        or (prev and prev[-1] in {"in", "into"})
    ):
        return "LANGUAGE", 3.0
    if key in _NATIONALITIES:
        return "NATIONALITY", 3.0
    if key in _RELIGIONS:
        return "RELIGION", 3.0
    if len(norm) == 1 and (last.endswith("ism") or last.endswith("изм")) and len(last) > 5:
        return "IDEOLOGY", 3.0
    if first in _EVENT_WORDS and len(norm) > 1:
        return "EVENT", 3.0
    if last in _FAMILY_LAST and len(norm) > 1:
        return "FAMILY", 3.0
    if last in _LOCATION_LAST or (len(norm) > 1 and first in _LOCATION_FIRST):
        return "LOCATION", 3.0
    if last in _STATE_LAST and len(norm) > 1:
        return "STATE_OR_PROVINCE", 3.0
    if last in _DISTRICT_LAST and len(norm) > 1:
        return "DISTRICT", 3.0
    normset = set(norm)
    if normset & _EVENT_WORDS:
        return "EVENT", 3.0
    if normset & _AWARD_WORDS:
        return "AWARD", 3.0
    if len(norm) > 1 and normset & _LAW_WORDS:
        return "LAW", 3.0
    if last in _FACILITY_LAST and last not in _ORG_WORDS:
        return "FACILITY", 3.0
    if normset & _ORG_WORDS:
        return "ORGANIZATION", 3.0
    if len(toks) == 1 and _is_acronym(toks[0]) and not heading:
        return "ORGANIZATION", 2.0
    if (
        prev
        and (prev[-1] in _PROFESSIONS or prev[-1] in _PERSON_TITLES or prev[-1] in _PERSON_VERBS)
    ) or (nxt and (nxt[0] in _PERSON_VERBS or " ".join(nxt) in _PERSON_VERBS)):
        return "PERSON", 2.0
    if first in _GIVEN and (len(norm) > 1 or not heading):
        return "PERSON", 2.0
    if last in _CITY_LAST and len(norm) > 1:
        return "CITY", 3.0
    if (
        len(nxt) > 0
        and sentence[end : end + 2] == ", "
        and (nxt[0] in _STATES or nxt[0] in _COUNTRIES)
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


def _occupied(ranges: list[tuple[int, int]], a: int, b: int) -> bool:
    return any(a < e and s < b for s, e in ranges)


def _starts_person(prev: str, tok: str, nxt: str) -> bool:
    """True where a given name + surname starts inside a run of capitalised words:
    "Глава Газпрома Алексей Миллер" -> split before "Алексей" ("Oklahoma City Thunder
    Mike Conley" likewise). Not after another given name or a title ("Saint Peter")."""
    if not (prev[:1].isupper() and nxt[:1].isupper()):
        return False
    p = _norm_tok(prev)
    return (
        _norm_tok(tok) in _GIVEN
        and p not in _GIVEN
        and p not in _PERSON_TITLES
        and p.rstrip(".") not in gz.HONORIFICS_STRIP
        and not p.endswith(".")
    )


def _spans_in_sentence(sentence: str) -> list[tuple[int, int, list[str], bool]]:
    """(start, end, tokens, sentence_initial) for every capitalised run, split at function words."""
    out = []
    for m in _SPAN_RE.finditer(sentence):
        # Leading characters before the span that are not quotes/brackets mean it is not initial.
        initial = not sentence[: m.start()].strip(" \"'“‘«(`[-–—*_")
        toks = [(t.start() + m.start(), t.group()) for t in _TOKEN_RE.finditer(m.group())]
        cur: list[tuple[int, str]] = []
        first_part = True
        following = {
            p: (toks[i + 1][1] if i + 1 < len(toks) else "") for i, (p, _) in enumerate(toks)
        }
        nxt_tok = following.__getitem__
        for pos, tok in toks + [(-1, "")]:
            is_break = pos < 0 or (tok[:1].isupper() and tok.lower().rstrip(".") in _FUNCTION_WORDS)
            if not is_break and tok[-2:] in ("'s", "’s"):
                cur.append((pos, tok))  # "Sheridan's Valley Campaigns": a name ends at 's
                is_break, tok = True, ""
            if not is_break:
                if cur and _starts_person(cur[-1][1], tok, nxt_tok(pos)):
                    out.append(
                        (
                            cur[0][0],
                            cur[-1][0] + len(cur[-1][1]),
                            [t for _, t in cur],
                            initial and first_part,
                        )
                    )
                    first_part, cur = False, []
                if cur or tok[:1].isupper():  # nor start one
                    cur.append((pos, tok))
                continue
            while cur and not cur[-1][1][:1].isupper():  # connectors never end a name
                cur.pop()
            if cur:
                out.append(
                    (
                        cur[0][0],
                        cur[-1][0] + len(cur[-1][1]),
                        [t for _, t in cur],
                        initial and first_part,
                    )
                )
            if pos >= 0 and first_part and not cur:
                pass  # a leading function word: the rest still counts as sentence-initial
            elif pos >= 0:
                first_part = False
            cur = []
    # "International Council for Small Business", "Committee on Foreign Affairs"
    merged: list[tuple[int, int, list[str], bool]] = []
    for sp in out:
        if merged:
            pa, pb, ptoks, pinit = merged[-1]
            if sentence[pb : sp[0]] in (" for ", " on ") and _norm_tok(ptoks[-1]) in _ORG_WORDS:
                merged[-1] = (pa, sp[1], [*ptoks, sentence[pb : sp[0]].strip(), *sp[2]], pinit)
                continue
        merged.append(sp)
    return merged


@lru_cache(maxsize=4)
def _yake(lan: str, top: int):
    import yake

    return yake.KeywordExtractor(lan=lan, n=3, top=top, dedup_lim=0.9)


def _language(text: str) -> str:
    sample = text[:2000]
    cyr = len(_CYR_RE.findall(sample))
    lat = len(_LATIN_RE.findall(sample))
    return "ru" if cyr > lat else "en"


def _concepts(text: str, lang: str, k: int, taken: set[str]) -> list[str]:
    """Up to k lower-case YAKE keyphrases, not already an entity, best first."""
    if k <= 0 or len(text) < 20:
        return []
    try:
        kws = _yake(lang, 4 * k).extract_keywords(text)
    except Exception:  # YAKE can fail on degenerate input; a unit without concepts is fine
        return []
    out: list[str] = []
    for kw, _score in kws:
        kw = " ".join(kw.split())
        words = kw.split()
        if kw != kw.lower() or not any(len(w) > 2 and w.isalpha() for w in words):
            continue
        if words[0] in _FUNCTION_WORDS or words[-1] in _FUNCTION_WORDS:
            continue
        if len(words) == 1 and len(kw) < 5:
            continue
        if kw in taken:
            continue
        taken.add(kw)
        out.append(kw)
        if len(out) >= k:
            break
    return out


def _extract_unit(text: str, settings: ExtractionSettings) -> _UnitResult:
    sents = split_sentences(text)
    lang = _language(text)
    # Pass 1: candidate spans; which words does the unit capitalise away from sentence starts?
    raw: list[tuple[int, int, int, list[str], bool, bool]] = []
    noninitial: set[str] = set()
    body_keys: set[str] = set()  # spans seen outside all-caps headings
    mentions: list[_Mention] = []
    for si, s in enumerate(sents):
        letters = [w for w in s.split() if any(c.isalpha() for c in w)]
        heading = len(letters) >= 2 and sum(w.isupper() for w in letters) >= 0.6 * len(letters)
        occupied: list[tuple[int, int]] = []
        for m in _DATE_RE.finditer(s):
            occupied.append(m.span())
            mentions.append(_Mention(m.group(), "DATE", 3.0, si, m.start(), m.end()))
        for rx, typ in ((_PERCENT_RE, "PERCENT"), (_MONEY_RE, "MONEY")):
            for m in rx.finditer(s):
                if not _occupied(occupied, *m.span()):
                    occupied.append(m.span())
                    mentions.append(_Mention(m.group().strip(), typ, 3.0, si, m.start(), m.end()))
        for m in _QUOTED_RE.finditer(s):
            inner = m.group(1).strip()
            words = inner.split()
            if not words or len(words) > 8 or _QUOTED_BAD.search(inner) or not inner[0].isupper():
                continue
            long_words = [w for w in words if len(w) > 3] or words
            if sum(w[0].isupper() for w in long_words) * 2 < len(long_words):
                continue
            occupied.append(m.span())
            mentions.append(_Mention(inner, "WORK_OF_ART", 3.0, si, m.start(1), m.end(1)))
        for m in _PROFESSION_RE.finditer(s):
            mentions.append(_Mention(m.group(), "PROFESSION", 2.0, si, m.start(), m.end()))
        if lang == "ru":
            for m in _RU_NATIONALITY_RE.finditer(s):
                mentions.append(_Mention(m.group(), "NATIONALITY", 2.0, si, m.start(), m.end()))
        for a, b, toks, initial in _spans_in_sentence(s):
            if _occupied(occupied, a, b):
                continue
            raw.append((si, a, b, toks, initial, heading))
            if not heading:
                body_keys.add(" ".join(_norm_tok(_strip_possessive(t)) for t in toks))
            for j, t in enumerate(toks):
                if j > 0 or not initial:
                    noninitial.add(_norm_tok(_strip_possessive(t)))
    # Pass 2: clean, filter and type the spans.
    for si, a, b, toks, initial, heading in raw:
        s = sents[si]
        honorific = False
        while toks and _norm_tok(toks[0]) in gz.HONORIFICS_STRIP:
            honorific = True
            a = s.index(toks[1], a + len(toks[0])) if len(toks) > 1 else b
            toks = toks[1:]
            initial = False
        while len(toks) > 1 and _norm_tok(toks[0]) in _NON_NAMES_N:  # "Глава Газпрома"
            a = s.index(toks[1], a + len(toks[0]))
            toks = toks[1:]
        if not toks:
            continue
        last = _strip_possessive(toks[-1])
        b -= len(toks[-1]) - len(last)
        toks = toks[:-1] + [last]
        if not last or not any(c.isalpha() for c in last):
            continue
        norm = [_norm_tok(t) for t in toks]
        title = s[a:b]
        if len(toks) == 1:
            key = norm[0]
            if key in _NON_NAMES_N or len(key) < 2 or key in _PERSON_TITLES:
                continue
            if (
                (initial or heading)
                and not honorific
                and key not in noninitial
                and key not in _KNOWN
            ):
                continue
            if heading and not _is_acronym(toks[0]) and key not in _KNOWN and initial:
                continue
        elif heading and " ".join(norm) not in body_keys and " ".join(norm) not in _KNOWN:
            continue  # "STAVE ONE", "PRINTED IN GREAT BRITAIN": headings, not names
        typ, conf = _type_span(toks, norm, s, a, b, heading, honorific)
        mentions.append(_Mention(title, typ, conf, si, a, b))

    # Per-unit typing vote: strongest evidence per surface form; PERSON propagates to its
    # single-word parts ("Ebenezer Scrooge" -> "Scrooge").
    best: dict[str, _Mention] = {}
    first: dict[str, _Mention] = {}
    for m in sorted(mentions, key=lambda m: (m.sent, m.pos)):
        first.setdefault(m.title, m)
        if m.title not in best or m.conf > best[m.title].conf:
            best[m.title] = m
    person_parts = {
        _norm_tok(t)
        for t_, m in best.items()
        if m.type == "PERSON" and m.conf >= 2.0 and " " in t_
        for t in t_.split()
        if t[:1].isupper()
    }
    types: dict[str, str] = {}
    for t_, m in best.items():
        typ = m.type
        if m.conf < 2.0 and " " not in t_ and _norm_tok(t_) in person_parts:
            typ = "PERSON"
        types[t_] = typ

    ordered = list(first.values())
    cap = settings.max_entities_per_unit
    taken = {t.lower() for t in types}
    n_concepts = min(settings.keyphrases_per_unit, max(0, cap - len(ordered)))
    ordered = ordered[:cap]
    kept = {m.title for m in ordered}
    if settings.keyphrase_method == "yake":
        concepts = _concepts(text, lang, n_concepts, taken)
    else:
        concepts = _fast_keyphrases(text, lang, n_concepts, taken)
    sent_lower = [s.lower() for s in sents]
    for c in concepts:
        for si, sl in enumerate(sent_lower):
            pos = sl.find(c)
            if pos >= 0:
                m = _Mention(c, "CONCEPT", 1.0, si, pos, pos + len(c))
                ordered.append(m)
                mentions.append(m)
                types[c] = "CONCEPT"
                kept.add(c)
                break

    res = _UnitResult()
    for m in ordered:
        res.entities.append((m.title, types[m.title], _evidence(sents[m.sent], m.pos)))

    # Relations: mentions of kept entities per sentence (first position per title).
    per_sent: list[list[_Mention]] = [[] for _ in sents]
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
                per_sent[si].append(_Mention(c, "CONCEPT", 1.0, si, pos, pos + len(c)))
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

    dist = max(0, settings.max_relation_distance)
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
            add(src, tgt, rel, 1.0, _evidence(s, x.pos))
        # Across sentences only the sentences' heads (first named mention) are linked:
        # all pairs would make every unit a clique (measured: 2x the relations on MuSiQue).
        hx = heads[si]
        for d in range(1, dist + 1):
            if si + d >= len(per_sent) or hx is None:
                break
            hy = heads[si + d]
            if hy is not None:
                ev = _evidence(s + " " + sents[si + d])
                add(hx.title, hy.title, "RELATED_TO", 1.0 / (1 + d), ev)
    # A typed relation absorbs the RELATED_TO weight of the same pair.
    typed_pairs = {frozenset((k[0], k[1])): k for k in rels if k[2] != "RELATED_TO"}
    for k in list(rels):
        if k[2] == "RELATED_TO":
            tk = typed_pairs.get(frozenset((k[0], k[1])))
            if tk is not None:
                rels[tk][0] += rels.pop(k)[0]
    for (src, tgt, rel), (w, ev) in rels.items():
        res.relations.append((src, tgt, rel, ev, float(w)))
    return res


# A run of 80+ printable ASCII characters without a space is no word of any language but data
# (base64, hashes, minified code, long URLs): blanked before extraction, or every capital in
# an 800 KB data-URI image would be an entity. Scripts without spaces (CJK) are not ASCII.
_NOT_WORDS = re.compile(r"[!-~]{80,}")


def _spaces(m: re.Match[str]) -> str:
    return " " * len(m.group())


class NlpExtractor:
    """Offline extractor; deterministic (no randomness, no model downloads)."""

    name = "nlp"

    def __init__(self, settings: ExtractionSettings):
        self.settings = settings

    def extract(self, text_units: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """text_units has at least columns id, text. Returns (extracted_entities,
        extracted_relationships) with exactly schemas.EXTRACTED_ENTITIES /
        EXTRACTED_RELATIONSHIPS columns."""
        ents: dict[str, list] = {c: [] for c in ("text_unit_id", "title", "type", "description")}
        rels: dict[str, list] = {
            c: [] for c in ("text_unit_id", "source", "target", "type", "description", "weight")
        }
        for uid, text in zip(
            text_units.get_column("id").to_list(),
            text_units.get_column("text").to_list(),
            strict=True,
        ):
            if not text:
                continue
            text = _NOT_WORDS.sub(_spaces, unicodedata.normalize("NFC", text))
            r = _extract_unit(text, self.settings)
            for title, typ, ev in r.entities:
                ents["text_unit_id"].append(uid)
                ents["title"].append(title)
                ents["type"].append(typ)
                ents["description"].append(ev)
            for src, tgt, rel, ev, w in r.relations:
                rels["text_unit_id"].append(uid)
                rels["source"].append(src)
                rels["target"].append(tgt)
                rels["type"].append(rel)
                rels["description"].append(ev)
                rels["weight"].append(w)
        meta = [
            pl.lit(self.name).alias("extractor"),
            pl.lit(MODEL).alias("model"),
            pl.lit("").alias("prompt_hash"),
        ]
        e = pl.DataFrame(ents, schema={k: pl.Utf8 for k in ents}).with_columns(meta)
        r_df = pl.DataFrame(
            rels, schema={**{k: pl.Utf8 for k in rels if k != "weight"}, "weight": pl.Float64}
        ).with_columns(meta)
        return (
            e.select(schemas.EXTRACTED_ENTITIES.names),
            r_df.select(schemas.EXTRACTED_RELATIONSHIPS.names),
        )


# --------------------------------------------------------------------------- fast keyphrases


@lru_cache(maxsize=8)
def _stopwords(lang: str) -> frozenset[str]:
    """YAKE's stopword list for `lang` (read from its package data, no yake import)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("yake")
    words: set[str] = set(_FUNCTION_WORDS)
    if spec and spec.submodule_search_locations:
        f = Path(next(iter(spec.submodule_search_locations))) / "core" / "StopwordsList"
        f = f / f"stopwords_{lang}.txt"
        if f.exists():
            words |= {w.strip().lower() for w in f.read_text("utf-8").splitlines() if w.strip()}
    return frozenset(words)


_PHRASE_SPLIT_RE = re.compile(r"[^\w\s'’-]+|\s[-–—]\s|\d+")
_WORD_RE = re.compile(r"[^\W\d_][\w'’-]*")
_ADVERB_RE = re.compile(r"..ly$")
# Verb-like word endings trimmed from phrase edges (a crude stand-in for POS tags).
_VERB_END_RE = {
    "en": re.compile(r"...(?:ed|ing)$"),
    "ru": re.compile(r"..(?:л|ла|ло|ли|лся|лась|лись|ет|ут|ют|ит|ат|ят|ть|ться|ется|ются)$"),
}


def _fast_keyphrases(text: str, lang: str, k: int, taken: set[str]) -> list[str]:
    """RAKE-style lower-case keyphrases: runs of non-stopwords, scored by word degree/frequency."""
    stop = _stopwords(lang)
    cands: list[list[str]] = []
    for chunk in _PHRASE_SPLIT_RE.split(text):
        run: list[str] = []
        for w in _WORD_RE.findall(chunk) + [""]:
            if w and w.islower() and w not in stop and len(w) > 2 and not _ADVERB_RE.search(w):
                run.append(w)
                continue
            verb = _VERB_END_RE.get(lang, _VERB_END_RE["en"])
            while run and verb.search(run[-1]):  # "journal published" -> "journal"
                run.pop()
            while run and verb.search(run[0]) and "-" not in run[0]:
                run.pop(0)
            if run:
                cands.append(run[-3:])
            run = []
    if not cands:
        return []
    freq: dict[str, int] = {}
    deg: dict[str, int] = {}
    for c in cands:
        for w in c:
            freq[w] = freq.get(w, 0) + 1
            deg[w] = deg.get(w, 0) + len(c)
    scored: dict[str, tuple[float, int]] = {}
    for i, c in enumerate(cands):
        ph = " ".join(c)
        if ph in scored:
            continue
        if len(c) == 1 and len(ph) < 5:
            continue
        sc = sum(deg[w] / freq[w] for w in c) + sum(freq[w] for w in c) / len(c)
        scored[ph] = (-sc, i)
    out: list[str] = []
    used: set[str] = set()
    for ph, _ in sorted(scored.items(), key=lambda kv: kv[1]):
        words = set(ph.split())
        if ph in taken or words & used:  # diverse phrases, not five variants of one
            continue
        used |= words
        taken.add(ph)
        out.append(ph)
        if len(out) >= k:
            break
    return out

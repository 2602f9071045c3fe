"""Mentions whose pattern is their type: dates ("19 May 2004", "15 мая 2018 года", years,
decades), percents, money, quoted title-case phrases (WORK_OF_ART), profession nouns and
Russian nationality words. Found by regex before names, which may not overlap them."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipeline.extract import gazetteer as gz
from pipeline.extract.mentions import Mention, is_occupied

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


def pattern_mentions(s: str, si: int, lang: str) -> tuple[list[Mention], list[tuple[int, int]]]:
    """(mentions, occupied): the pattern mentions of sentence `s` (index `si`) and the
    character ranges that names may not overlap."""
    mentions: list[Mention] = []
    occupied: list[tuple[int, int]] = []
    for m in _DATE_RE.finditer(s):
        occupied.append(m.span())
        mentions.append(Mention(m.group(), "DATE", 3.0, si, m.start(), m.end()))
    for rx, typ in ((_PERCENT_RE, "PERCENT"), (_MONEY_RE, "MONEY")):
        for m in rx.finditer(s):
            if not is_occupied(occupied, *m.span()):
                occupied.append(m.span())
                mentions.append(Mention(m.group().strip(), typ, 3.0, si, m.start(), m.end()))
    for m in _QUOTED_RE.finditer(s):
        inner = m.group(1).strip()
        words = inner.split()
        if not words or len(words) > 8 or _QUOTED_BAD.search(inner) or not inner[0].isupper():
            continue
        long_words = [w for w in words if len(w) > 3] or words
        if sum(w[0].isupper() for w in long_words) * 2 < len(long_words):
            continue
        occupied.append(m.span())
        mentions.append(Mention(inner, "WORK_OF_ART", 3.0, si, m.start(1), m.end(1)))
    for m in _PROFESSION_RE.finditer(s):
        mentions.append(Mention(m.group(), "PROFESSION", 2.0, si, m.start(), m.end()))
    if lang == "ru":
        for m in _RU_NATIONALITY_RE.finditer(s):
            mentions.append(Mention(m.group(), "NATIONALITY", 2.0, si, m.start(), m.end()))
    return mentions, occupied

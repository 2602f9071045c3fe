"""Keyphrases: lower-case phrases that become CONCEPT entities (the capitalised ones would
duplicate the names). `yake_keyphrases` uses YAKE; `fast_keyphrases` is a RAKE-style
scorer that reads only YAKE's stopword lists. Both keep only phrases that read as concepts
(pipeline.extract.concepts: noun phrases, not verb fragments or everyday words)."""

from __future__ import annotations

import re
from functools import lru_cache

from pipeline.extract.concepts import reads_as_concept
from pipeline.extract.lexicon import FUNCTION_WORDS


@lru_cache(maxsize=4)
def _yake(lan: str, top: int):
    import yake

    return yake.KeywordExtractor(lan=lan, n=3, top=top, dedup_lim=0.9)


def yake_keyphrases(text: str, lang: str, k: int, taken: set[str]) -> list[str]:
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
        if words[0] in FUNCTION_WORDS or words[-1] in FUNCTION_WORDS:
            continue
        if len(words) == 1 and len(kw) < 5:
            continue
        if kw in taken or not reads_as_concept(words, lang):
            continue
        taken.add(kw)
        out.append(kw)
        if len(out) >= k:
            break
    return out


@lru_cache(maxsize=8)
def _stopwords(lang: str) -> frozenset[str]:
    """YAKE's stopword list for `lang` (read from its package data, no yake import)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("yake")
    words: set[str] = set(FUNCTION_WORDS)
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


def fast_keyphrases(text: str, lang: str, k: int, taken: set[str]) -> list[str]:
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
        # diverse phrases, not five variants of one
        if ph in taken or words & used or not reads_as_concept(ph.split(), lang):
            continue
        used |= words
        taken.add(ph)
        out.append(ph)
        if len(out) >= k:
            break
    return out

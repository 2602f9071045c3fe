"""Which keyphrases read as concepts: a noun phrase a reader would call a thing, not a verb
fragment ("laureates knew", "taught mathematics", "manages") or an everyday word ("father",
"women", "papers").

Why its own module: the keyphrase scorers (pipeline.extract.keyphrases) find phrases by
statistics over stop words and know nothing of grammar; this reads each word's possible
parts of speech from a lexicon that ships in a PyPI wheel and its frequency in general
language:
- English: `lemminflect` (MIT; its lexicon of lemmas per universal POS tag inside the wheel);
  Russian: pymorphy2 through natasha's morph vocabulary (already used for Russian names).
  A word with no reading is a rare or technical word and may be anything.
- `wordfreq` (code Apache-2.0, data CC BY-SA 4.0, inside the wheel): Zipf frequency, log10 of
  occurrences per billion words of general text.

A phrase reads as a concept when every word is letters (no "quantum_theory" from a link
target, no "settlement--one"), has a noun or adjective reading (or none), none is a number
or ordinal ("sixty dollars", "seventh album") or a possessive ("bishop's face"), its last
word has a noun reading and no adverb one ("conferences today"), no English modifier is a
gradable adjective (lemminflect's lexicon inflects it for degree: "great hill", "strange
beauty", "younger brother" describe; "magnetic needle", "nuclear model" name a kind); a
phrase of one word is also rare (Zipf below EVERYDAY_ZIPF), has no adjective reading
("inferior", "gallant") and is not an English plural (a lone "objections", "laureates" names
members of a class, not a thing; "physics", "data" are their own lemmas).

EVERYDAY_ZIPF 4.0 (a word seen about ten times in a million): "father" 5.3, "papers" 4.6,
"fortune" 4.3 fall above it, "uranium" 3.9, "dynamite" 3.6, "radium" 2.8 below; so does
"physics" (4.4), a field kept only inside a longer phrase ("quantum physics"). The figures
are wordfreq's; the rules were read off the sample corpus's 31 concepts and 50 drawn from
the `grb_novel` index (the note of session 17).
"""

from __future__ import annotations

import re
from functools import cache

EVERYDAY_ZIPF = 4.0
_WORD = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*['’]?$")  # no "_", digit, "--"
_POSSESSIVE = re.compile(r"['’]s?$")
_NUMBER_WORD = re.compile(
    r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|"
    r"(?:twen|thir|for|fif|six|seven|eigh|nine)ty|hundred|thousand|million|billion|dozen|"
    r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
    r"\w+teenth|\w+ieth|hundredth|thousandth|millionth)s?$"
)
THING = frozenset({"NOUN", "PROPN"})
MODIFIER = frozenset({"ADJ"})


@cache
def lemmas(word: str, lang: str) -> dict[str, frozenset[str]]:
    """Universal POS tag -> the lemmas `word` can have with it (empty: not in the lexicon)."""
    if lang == "ru":
        from pipeline.extract.russian import morph_vocab

        out: dict[str, set[str]] = {}
        for form in morph_vocab().parse(word):
            out.setdefault(form.pos, set()).add(form.normal)
        return {pos: frozenset(ls) for pos, ls in out.items()}
    if lang != "en":
        return {}
    from lemminflect import getAllLemmas

    return {pos: frozenset(ls) for pos, ls in getAllLemmas(word).items()}


@cache
def gradable(word: str) -> bool:
    """An English word read as a gradable adjective: one the lexicon inflects for degree
    ("good", "strange", "lengthy"), or a comparative or superlative form ("younger",
    "brightest"): what describes a thing rather than names a kind of it."""
    adj = lemmas(word, "en").get("ADJ")
    if not adj:
        return False
    if word not in adj:
        return True
    from lemminflect import getAllInflections

    return "JJR" in getAllInflections(word, upos="ADJ")


@cache
def everyday(word: str, lang: str) -> bool:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, lang) >= EVERYDAY_ZIPF


def reads_as_concept(words: list[str], lang: str) -> bool:
    """Whether the lower-case phrase `words` reads as a concept (module docstring)."""
    if not words or lang not in ("en", "ru"):
        return bool(words)
    if any(not _WORD.match(w) or _POSSESSIVE.search(w) or _NUMBER_WORD.match(w) for w in words):
        return False
    tags = [lemmas(w, lang) for w in words]
    if any(t and (not t.keys() & (THING | MODIFIER) or "NUM" in t) for t in tags):
        return False
    head = tags[-1]
    if head and (not head.keys() & THING or "ADV" in head):
        return False
    if len(words) > 1:
        return lang != "en" or not any(gradable(w) for w in words[:-1])
    plural = lang == "en" and "NOUN" in head and words[0] not in head["NOUN"]
    return not plural and "ADJ" not in head and not everyday(words[0], lang)

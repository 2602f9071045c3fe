"""Span finding: candidate names in a sentence. Runs of capitalised words (any script)
joined by lower-case name connectors ("Bank of England", "Charles de Gaulle"), split at
capitalised function words and before a given name + surname; then, per unit, honorifics,
leading non-names and possessives stripped and sentence-initial or heading-only words
dropped unless the unit or the gazetteer vouches for them. Typing is not done here."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.extract import gazetteer as gz
from pipeline.extract.lexicon import (
    FUNCTION_WORDS,
    GIVEN,
    KNOWN,
    NON_NAMES_N,
    ORG_WORDS,
    PERSON_TITLES,
    norm_tok,
)
from pipeline.extract.mentions import is_occupied
from pipeline.sentences import UPPER_CLASS

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


def _strip_possessive(tok: str) -> str:
    for suf in ("'s", "’s", "'S", "’S"):
        if tok.endswith(suf) and len(tok) > 2:
            return tok[:-2]
    return tok.rstrip("'’")


def is_acronym(tok: str) -> bool:
    """2-6 capital letters ("NATO", "U.S.", "AT&T"); typing reads these as organisations."""
    letters = tok.replace(".", "").replace("&", "")
    return 2 <= len(letters) <= 6 and letters.isupper() and letters.isalpha()


def _starts_person(prev: str, tok: str, nxt: str) -> bool:
    """True where a given name + surname starts inside a run of capitalised words:
    "Глава Газпрома Алексей Миллер" -> split before "Алексей" ("Oklahoma City Thunder
    Mike Conley" likewise). Not after another given name or a title ("Saint Peter")."""
    if not (prev[:1].isupper() and nxt[:1].isupper()):
        return False
    p = norm_tok(prev)
    return (
        norm_tok(tok) in GIVEN
        and p not in GIVEN
        and p not in PERSON_TITLES
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
            is_break = pos < 0 or (tok[:1].isupper() and tok.lower().rstrip(".") in FUNCTION_WORDS)
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
            if sentence[pb : sp[0]] in (" for ", " on ") and norm_tok(ptoks[-1]) in ORG_WORDS:
                merged[-1] = (pa, sp[1], [*ptoks, sentence[pb : sp[0]].strip(), *sp[2]], pinit)
                continue
        merged.append(sp)
    return merged


def named_spans(
    sents: list[str], occupied: list[list[tuple[int, int]]]
) -> Iterator[tuple[int, int, int, list[str], list[str], bool, bool]]:
    """(sentence index, start, end, tokens, normalised tokens, heading, honorific) of each
    name in the unit's sentences, outside the `occupied` ranges of each sentence."""
    # Pass 1: candidate spans; which words does the unit capitalise away from sentence starts?
    raw: list[tuple[int, int, int, list[str], bool, bool]] = []
    noninitial: set[str] = set()
    body_keys: set[str] = set()  # spans seen outside all-caps headings
    for si, s in enumerate(sents):
        letters = [w for w in s.split() if any(c.isalpha() for c in w)]
        heading = len(letters) >= 2 and sum(w.isupper() for w in letters) >= 0.6 * len(letters)
        for a, b, toks, initial in _spans_in_sentence(s):
            if is_occupied(occupied[si], a, b):
                continue
            raw.append((si, a, b, toks, initial, heading))
            if not heading:
                body_keys.add(" ".join(norm_tok(_strip_possessive(t)) for t in toks))
            for j, t in enumerate(toks):
                if j > 0 or not initial:
                    noninitial.add(norm_tok(_strip_possessive(t)))
    # Pass 2: clean and filter the spans (typing is the caller's).
    for si, a, b, toks, initial, heading in raw:
        s = sents[si]
        honorific = False
        while toks and norm_tok(toks[0]) in gz.HONORIFICS_STRIP:
            honorific = True
            a = s.index(toks[1], a + len(toks[0])) if len(toks) > 1 else b
            toks = toks[1:]
            initial = False
        while len(toks) > 1 and norm_tok(toks[0]) in NON_NAMES_N:  # "Глава Газпрома"
            a = s.index(toks[1], a + len(toks[0]))
            toks = toks[1:]
        if not toks:
            continue
        last = _strip_possessive(toks[-1])
        b -= len(toks[-1]) - len(last)
        toks = toks[:-1] + [last]
        if not last or not any(c.isalpha() for c in last):
            continue
        norm = [norm_tok(t) for t in toks]
        if len(toks) == 1:
            key = norm[0]
            if key in NON_NAMES_N or len(key) < 2 or key in PERSON_TITLES:
                continue
            if (
                (initial or heading)
                and not honorific
                and key not in noninitial
                and key not in KNOWN
            ):
                continue
            if heading and not is_acronym(toks[0]) and key not in KNOWN and initial:
                continue
        elif heading and " ".join(norm) not in body_keys and " ".join(norm) not in KNOWN:
            continue  # "STAVE ONE", "PRINTED IN GREAT BRITAIN": headings, not names
        yield si, a, b, toks, norm, heading, honorific

"""Sentence splitting, in one place: a compact, language-agnostic regex splitter.

Abbreviations and initials do not end a sentence; blank lines and short title lines do.
Also holds what the splitter is built from and the extractor reuses: `UPPER_CLASS`, the
any-script "uppercase letter" regex class, and `wordset` for word lists.
"""

from __future__ import annotations

import re
import sys


def _char_class(pred) -> str:
    """A regex character class body covering the BMP characters satisfying `pred`."""
    ranges: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode if sys.maxunicode < 0x10000 else 0x10000):
        if pred(chr(cp)):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


# Body of a regex character class: every upper- or title-case letter, any script.
UPPER_CLASS = _char_class(lambda c: c.isupper() or c.istitle())


def wordset(words: str) -> frozenset[str]:
    """The whitespace-separated words of `words` (word lists written as one string)."""
    return frozenset(words.split())


_ABBREVIATIONS = wordset(
    """mr mrs ms dr st mt ft jr sr prof gen col capt lt sgt rev hon co inc ltd corp bros vs
    etc no vol fig ed eds al approx dept est univ op cf pp jan feb mar apr jun jul aug sep
    sept oct nov dec т г гг им ул см др пр"""
)
_BOUNDARY_RE = re.compile(r"[.!?…]+[\"'”’»)\]]*\s+|\n[ \t]*\n\s*|\n")
_NEXT_START_RE = re.compile(rf"[\"'“‘«(\[`]*(?:[{UPPER_CLASS}]|\d)")
_LAST_WORD_RE = re.compile(r"(\w+)[.!?…]*[\"'”’»)\]]*\s*$")


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, whitespace-collapsed. Cheap and language-agnostic.

    A single newline ends a sentence only after a short unpunctuated line followed by a
    capital (a title line such as MuSiQue's "Title\\ntext"); hard-wrapped prose flows on.
    """
    out: list[str] = []
    start = 0
    for m in _BOUNDARY_RE.finditer(text):
        tok, cut = m.group(), m.end()
        if tok[0] != "\n":  # sentence punctuation
            if tok.count("\n") < 2 and not _NEXT_START_RE.match(text, cut):
                continue
            if tok[0] == "." and tok.count("\n") < 2:
                lw = _LAST_WORD_RE.search(text, max(0, m.start() - 40), m.start() + 1)
                if lw and (
                    lw.group(1).lower() in _ABBREVIATIONS
                    or (len(lw.group(1)) == 1 and lw.group(1).isalpha())
                ):
                    continue
        elif tok.count("\n") < 2:  # a single line break
            line = text[text.rfind("\n", 0, m.start()) + 1 : m.start()].strip()
            if (
                not line
                or len(line.split()) > 10
                or line[-1] in ",;:-–(&"
                or not _NEXT_START_RE.match(text, cut)
            ):
                continue
        s = " ".join(text[start:cut].split())
        if s:
            out.append(s)
        start = cut
    s = " ".join(text[start:].split())
    if s:
        out.append(s)
    return out

"""Sentence splitting, in one place: where a sentence ends, for every stage that needs it.

One vocabulary (`ABBREVIATIONS`, `NUMBER_ABBREVIATIONS`, `STRICT_ABBREVIATIONS`; end
punctuation .!?…), read two ways:
- strict, `split_sentences` (extraction, query answers, report evidence): sentence strings.
  Abbreviations and initials ("U.S.", "No.") never end a sentence, because extraction links
  the entities of one sentence and a false end would cut "U.S. Route 52" in two; blank lines
  and short title lines do end one. `sentences_expr` is the same reading over a polars column
  (report sentence pools), built from the same classes and word lists.
- eager, `sentence_ends` (chunking): cut candidates inside a paragraph. A false end only
  offers the chunker a slightly worse cut, so initials before a capital end a sentence and
  list items start one. Chunk cuts, and so every text unit id, depend on these exact
  positions, which is why this reading was kept as chunking had it, not merged into the
  strict one.
Also holds `UPPER_CLASS`, the any-script "uppercase letter" regex class, and `wordset` for
word lists (the extractor reuses both); and `sentence_kind` / `sentence_kind_expr` (a string,
a column): whether a sentence can open a description or reads only after another ("It ...",
"But ...", "…"), what the extractor and the merge rank evidence sentences by.
"""

from __future__ import annotations

import re
import sys

import polars as pl


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


# ---- the vocabulary both readings share -------------------------------------------------

# A dot after one of these never ends a sentence (matched lower-cased).
ABBREVIATIONS = wordset(
    """mr mrs ms mx dr st mt ft jr sr prof rev gen col capt lt sgt hon co inc ltd corp vs cf al
    approx viz ed eds dept univ jan feb mar apr jun jul aug sep sept oct nov dec e.g i.e
    a.m p.m т т.е т.к т.н г гг им ул др пр напр проф акад тов гр ср"""
)
# ... nor after one of these when a number follows ("No. 5", "Fig. 3", "рис. 2"). Matched as
# written by the eager reading (which has always cut at "locomotive no. 765"), lower-cased
# by the strict one.
NUMBER_ABBREVIATIONS = wordset(
    "No Nos Vol vol pp Ch ch Sec sec Fig fig Art art Eq eq рис стр см гл п"
)
# Never an end for the strict reading, whatever follows ("Warner Bros. Records", "etc. The",
# "(2017 est.) Density"), but an end before a capital for the eager one: chunk cuts, and so
# every text unit id, were fixed before these joined the vocabulary.
STRICT_ABBREVIATIONS = wordset("etc bros op est no vol fig pp")

# ---- the strict reading: sentence strings -----------------------------------------------

_STRICT_WORDS = ABBREVIATIONS | STRICT_ABBREVIATIONS
_STRICT_NUMBER_WORDS = frozenset(w.lower() for w in NUMBER_ABBREVIATIONS)
# Regex classes: terminal punctuation, the closing quotes/brackets after it, the opening
# ones before the capital (or digit) that starts the next sentence.
_END_CHARS = ".!?…"
_CLOSE_CHARS = "\"'”’»)\\]"
_OPEN_CHARS = "\"'“‘«(\\[`"
_END = f"[{_END_CHARS}]"
_CLOSE = f"[{_CLOSE_CHARS}]"
_OPEN = f"[{_OPEN_CHARS}]"
_BOUNDARY_RE = re.compile(rf"{_END}+{_CLOSE}*\s+|\n[ \t]*\n\s*|\n")
_NEXT_START_RE = re.compile(rf"{_OPEN}*(?:[{UPPER_CLASS}]|\d)")
_LAST_WORD_RE = re.compile(rf"(\w+){_END}*{_CLOSE}*\s*$")


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
                word = lw.group(1).lower() if lw else ""
                if word in _STRICT_WORDS or (len(word) == 1 and word.isalpha()):
                    continue
                if word in _STRICT_NUMBER_WORDS and text[cut : cut + 1].isdigit():
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


# ---- the strict reading over a polars column --------------------------------------------

_PARA = "\u2029"  # a blank line, once whitespace is collapsed
_HIDDEN_DOT = "\u2024"  # ONE DOT LEADER: a dot that ends no sentence, hidden from the pattern


def _alternation(words: frozenset[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))


# Dots that end no sentence: after an abbreviation, an initial ("U.S."), a number word
# before a number ("No. 5").
_HIDE_ABBREVIATION = rf"(?i)\b({_alternation(_STRICT_WORDS)})\."
_HIDE_INITIAL = r"\b(\p{L})\."
_HIDE_NUMBER_WORD = rf"(?i)\b({_alternation(_STRICT_NUMBER_WORDS)})\.( \d)"
_NOT_END = f"{_END_CHARS}{_PARA}"
# A sentence: characters that end nothing, or terminal punctuation not followed (after its
# closers and a space) by an opener-and-capital or a digit; then its terminal punctuation.
_SENTENCE_PATTERN = (
    rf"(?:[^{_NOT_END}]|{_END}+(?:{_CLOSE}*[^\s{_NOT_END}{_CLOSE_CHARS}]"
    rf"|{_CLOSE}*\s+{_OPEN}*[^\s{_NOT_END}{_OPEN_CHARS}\p{{Lu}}\p{{Lt}}\d]))+{_END}*{_CLOSE}*"
)


def sentences_expr(text: pl.Expr) -> pl.Expr:
    """`split_sentences` vectorised over a string column (for report sentence pools, where
    a Python loop would be the bottleneck): a list of stripped sentences per row. The same
    punctuation, closers, openers and abbreviations; a single line break is only whitespace
    here (no title-line rule), a blank line always ends a sentence."""
    return (
        text.fill_null("")
        .str.replace_all(r"\s*\n\s*\n\s*", f" {_PARA} ")
        .str.replace_all(r"[ \t\r\n\f\v\u00a0]+", " ")
        .str.replace_all(_HIDE_ABBREVIATION, "${1}" + _HIDDEN_DOT)
        .str.replace_all(_HIDE_INITIAL, "${1}" + _HIDDEN_DOT)
        .str.replace_all(_HIDE_NUMBER_WORD, "${1}" + _HIDDEN_DOT + "${2}")
        .str.extract_all(_SENTENCE_PATTERN)
        .list.eval(pl.element().str.replace_all(_HIDDEN_DOT, ".", literal=True).str.strip_chars())
    )


# ---- the eager reading (chunking): cut candidates ----------------------------------------

# A sentence end: terminal punctuation, optional closing quotes/brackets (and Markdown
# emphasis), whitespace. The word before it is checked for abbreviations, the next character
# for a sentence start.
_CUT_END = re.compile(rf"({_END}+)[{_CLOSE_CHARS}_*]*\s+")
# A list item starting a line is a sentence start too.
_LIST_ITEM = re.compile(r"\n(?=[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+\S)")
# No dashes: in Russian prose «...?» — сказал он continues the sentence.
_OPENERS = frozenset("\"'“‘«„([{¿¡*_")


def _is_cut_end(m: re.Match[str], text: str) -> bool:
    nxt = m.end()
    if nxt >= len(text):
        return True
    c = text[nxt]
    if not (c.isupper() or c.isdigit() or c in _OPENERS):
        return False
    if m.group(1) == ".":
        before = text[max(0, m.start() - 24) : m.start()].split()
        word = before[-1].lstrip("\"'“‘«([_*") if before else ""
        if word.lower() in ABBREVIATIONS or (len(word) == 1 and word.isupper() and word != "I"):
            return False
        if word in NUMBER_ABBREVIATIONS and c.isdigit():
            return False
    return True


def sentence_ends(text: str) -> list[int]:
    """Offsets in `text` (one paragraph: no blank lines) where a sentence ends and the next
    starts, ascending (an offset may repeat): after terminal punctuation and the whitespace
    that follows it, and at the line break before a list item."""
    bounds = [m.end() for m in _CUT_END.finditer(text) if _is_cut_end(m, text)]
    bounds += [m.start() for m in _LIST_ITEM.finditer(text)]
    return sorted(bounds)


# ---- how a sentence opens: can it lead a description? ----------------------------------

# Words a sentence cannot stand alone after: pronouns and determiners that point back
# ("It", "These"), conjunctions and linking adverbs that continue a previous sentence ("But",
# "However"); English, Russian, and the commonest of German, French and Spanish.
DANGLING_OPENERS = wordset(
    """it its it's he she they them their theirs his her hers him this these those that
    i we our us you your my such latter former and but or nor yet so however also then thus
    therefore moreover furthermore although though because meanwhile instead hence besides
    whereas nevertheless otherwise
    он она оно они его её ее их ему ей им него неё нее них это этот эта эти этого этой тот
    та те того той такой такая такие тогда и а но или однако также поэтому затем потом зато
    хотя причём причем впрочем
    er sie es und aber oder il elle ils elles et mais ou donc él ella ellos ellas y pero"""
)
# Subject pronouns: one among a sentence's first words makes the sentence another
# subject's ("In 1911 he travelled to England ... with Rutherford" is Bohr's).
PRONOUN_SUBJECTS = wordset("he she they it we i он она они оно мы я er sie il elle ils elles")
# A sentence's lead, as `sentence_kind` grades it: lower is a better opener.
LEADS, PRONOUN_LEAD, FRAGMENT, DANGLING = 0, 1, 2, 3
_ENDED = re.compile(rf"{_END}{_CLOSE}*$")


def sentence_kind(sentence: str) -> int:
    """How well `sentence` could open a description (see `sentence_kind_expr`, the same
    reading over a column): DANGLING when it opens with an ellipsis, a lower-case letter or
    a word of DANGLING_OPENERS; FRAGMENT without terminal punctuation (a title line, a
    heading, a cut); PRONOUN_LEAD with a subject pronoun among its first four words; else
    LEADS."""
    words = sentence.split(maxsplit=4)
    head = sentence.lstrip("\"'“‘«„([—–-* ")
    first = re.match(r"[^\W\d_]+", head)
    if head[:1] in ("…", ".") or (first and first.group().lower() in DANGLING_OPENERS):
        return DANGLING
    if head[:1].islower():
        return DANGLING
    if not _ENDED.search(sentence):
        return FRAGMENT
    pronoun = any(w.strip(",;:").lower() in PRONOUN_SUBJECTS for w in words[:4])
    return PRONOUN_LEAD if pronoun else LEADS


_SKIP_OPEN = r"^[\"'“‘«„(\[—–*\- ]*"


def sentence_kind_expr(sentence: pl.Expr) -> pl.Expr:
    """`sentence_kind` over a string column (UInt8; null text: DANGLING)."""
    first = sentence.str.extract(_SKIP_OPEN + r"(\p{L}+)", 1).str.to_lowercase()
    pronoun = r"(?i)^(?:\S+\s+){0,3}(?:" + _alternation(PRONOUN_SUBJECTS) + r")[\s,;:]"
    return (
        pl.when(
            sentence.str.contains(_SKIP_OPEN + r"(?:…|\.|\p{Ll})").fill_null(True)
            | first.is_in(list(DANGLING_OPENERS)).fill_null(False)
        )
        .then(DANGLING)
        .when(~sentence.str.contains(_ENDED.pattern))
        .then(FRAGMENT)
        .when((sentence + " ").str.contains(pronoun))
        .then(PRONOUN_LEAD)
        .otherwise(LEADS)
        .cast(pl.UInt8)
    )

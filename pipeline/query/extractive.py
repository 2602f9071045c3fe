"""Offline answers: a few sentences of the retrieved text, chosen to answer, each with its source.

Why its own module: every mode ends its offline run the same way, so one selector reads the
context's text units (records in rank order) and returns the answer and its citations, and
one builder (`answered_result`) makes the mode's SearchResult with them. An
answer is at most `query.answer_sentences` sentences and `query.answer_words` words, picked
greedily; each pick maximises

    coverage    idf-weighted share of the question's terms (stemmed as the BM25 index
                stems them) the sentence holds; a term a chosen sentence already holds
                counts COVERED
    + BRIDGE    if it names something a chosen sentence named and the question did not: the
                chain a multi-hop question walks ("... the Bubye River ... Zimbabwe" then
                "... a waterfall ... between Zambia and Zimbabwe")
    + KIND      if it holds what the question asks for: a year for "when", a number for
                "how many", a name the question does not hold for "who" and "where"
    - RANK * ln(1 + the unit's rank) - SAME_UNIT for a second sentence of a chosen unit.

A sentence longer than the words left is cut to the window of its words that holds the most
question terms, marked with ellipses. A cosine between question and sentence was tried and
dropped: embedding the context's sentences cost 100-500 ms a query on 2 cores and held the
gold answer no more often. The constants were read off MuSiQue and `xquad_ru`
(benchmarks/answers.py, answer holds gold, all 100 questions of each; each moved 1 to 5
answers): MuSiQue local 22 -> 31 %, `xquad_ru` local 90 -> 94 %, every mode at or above the
selector it replaced (which counted shared words in the top 3 units, with no word limit).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline.lexical.analysis import DEFAULT_LATIN, term_frame
from pipeline.query.result import SearchResult
from pipeline.sentences import split_sentences
from pipeline.structure.markdown_inline import plain_markup
from pipeline.tokens import count_tokens

if TYPE_CHECKING:
    from pipeline.config.query import QuerySettings
    from pipeline.query.tables import IndexTables

COVERED = 0.3
BRIDGE = 0.2
KIND = 0.1
RANK = 0.1
SAME_UNIT = 0.1
MIN_WORDS = 4  # shorter lines are titles and labels, not answers
MIN_WINDOW = 12  # words left below which a long sentence is skipped, not cut
_NAME = re.compile(r"\b[^\W\d_][\w'’-]*", re.UNICODE)
_YEAR = re.compile(r"\b(1\d{3}|20\d{2})\b")
_NUMBER = re.compile(r"\d")
_ASKS_NAME = re.compile(r"\s*(who|whom|whose|where|кто|кого|кому|кем|где)\b", re.IGNORECASE)
_NUMBER_TEXT = re.compile(r"\d[\d,.]*\d|\d")
_ASKS_YEAR = re.compile(
    r"\s*(when|what year|in what year|which year|когда|в как(ом|ие) год)", re.IGNORECASE
)
_ASKS_NUMBER = re.compile(
    r"\s*(how many|how much|what percentage|what number|сколько)", re.IGNORECASE
)
CITED = (
    "kind",
    "document_id",
    "document_title",
    "source_path",
    "section_path",
    "pages",
    "publication_id",
)


@dataclass(frozen=True)
class Candidate:
    """A sentence (or the question itself, unit -1) with its terms and names."""

    unit: int  # position of its unit in the records given
    text: str
    terms: frozenset[str]
    names: frozenset[str]


def cited_answer(
    index: IndexTables, query: str, units: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """(answer, citations) from result records `units` (text units or content nodes, rank
    order): the sentences chosen as the module docstring says, in the order picked, and one
    citation per sentence (n, the sentence, its record's id, kind and provenance). ("", [])
    when no sentence scores above 0 (none shares a term with the question, or holds what it
    asks for in a top unit)."""
    qs = index.settings.query
    latin = _latin(index)
    question, cands = _candidates(units[: qs.answer_units], query, latin)
    if not cands:
        return "", []
    picks = _pick(cands, question, latin, qs)
    citations = [
        {
            "n": n + 1,
            "sentence": text,
            "id": units[cands[i].unit]["id"],
            **{k: units[cands[i].unit].get(k) for k in CITED},
        }
        for n, (i, text) in enumerate(picks)
    ]
    return " ".join(text for _, text in picks), citations


def _latin(index: IndexTables) -> str:
    lex = index.lexical_units
    return lex[0].latin if lex is not None else DEFAULT_LATIN


def _terms(texts: list[str], latin: str) -> list[set[str]]:
    """Each text's stemmed terms (the BM25 analyser), one polars pass for all."""
    out: list[set[str]] = [set() for _ in texts]
    frame = term_frame(pl.Series(texts, dtype=pl.Utf8), latin)
    for doc, term in zip(frame["doc"].to_list(), frame["term"].to_list(), strict=True):
        out[doc].add(term)
    return out


def _terms_and_names(texts: list[str], latin: str) -> list[tuple[set[str], frozenset[str]]]:
    """Each text's terms and names, as terms (one analyser pass for all). Names are what a
    bridge can be: capitalised words past a sentence's first word, the first word too when
    the texts capitalise it elsewhere (a sentence's first word is capitalised whatever it
    is), and numbers."""
    words = [_NAME.findall(t) for t in texts]
    inner = [" ".join(x for x in w[1:] if x[0].isupper()) for w in words]
    first = [w[0] if w and w[0][0].isupper() else "" for w in words]
    n = len(texts)
    every = _terms([*texts, *inner, *first], latin)
    known = set().union(*every[n : 2 * n])
    return [
        (
            every[k],
            frozenset(every[n + k] | (every[2 * n + k] & known) | set(_NUMBER_TEXT.findall(t))),
        )
        for k, t in enumerate(texts)
    ]


def _candidates(
    units: list[dict[str, Any]], query: str, latin: str
) -> tuple[Candidate, list[Candidate]]:
    """The question and the sentences of `units` (the question's unit is -1), Markdown and
    HTML read as text (a link as its text)."""
    found: list[tuple[int, str]] = [(-1, query)]
    seen: set[str] = set()
    for u, rec in enumerate(units):
        for sent in split_sentences(rec.get("text") or ""):
            key = sent.casefold()
            if len(sent.split()) >= MIN_WORDS and not sent.startswith("#") and key not in seen:
                seen.add(key)
                found.append((u, sent))
    texts = (
        pl.DataFrame({"t": [s for _, s in found]}, schema={"t": pl.Utf8})
        .select(plain_markup(pl.col("t")))
        .to_series()
        .to_list()
    )
    found = [(u, t) for (u, _), t in zip(found, texts, strict=True)]
    every = [
        Candidate(u, s, frozenset(t), n)
        for (u, s), (t, n) in zip(found, _terms_and_names(texts, latin), strict=True)
    ]
    return every[0], every[1:]


def _idf(cands: list[Candidate], terms: frozenset[str]) -> dict[str, float]:
    n = len(cands)
    return {t: math.log(1 + n / (1 + sum(t in c.terms for c in cands))) for t in terms}


def _asks(question: Candidate, sentence: Candidate) -> bool:
    """Whether the sentence holds the kind of thing the question asks for."""
    if _ASKS_YEAR.match(question.text):
        return bool(_YEAR.search(sentence.text))
    if _ASKS_NUMBER.match(question.text):
        return bool(_NUMBER.search(sentence.text))
    if _ASKS_NAME.match(question.text):
        return bool(sentence.names - question.names)
    return False


def _pick(
    cands: list[Candidate], question: Candidate, latin: str, qs: QuerySettings
) -> list[tuple[int, str]]:
    """Greedy picks (candidate index, text as shown) within the sentence and word limits."""
    qterms = question.terms
    idf = _idf(cands, qterms)
    total = sum(idf.values()) or 1.0
    kind = np.array([_asks(question, c) for c in cands], dtype=np.float64)
    prior = KIND * kind - RANK * np.log1p([c.unit for c in cands])
    sizes = [len(c.text.split()) for c in cands]
    picks: list[tuple[int, str]] = []
    chosen: set[int] = set()
    covered: set[str] = set()
    bridges: set[str] = set()
    used_units: set[int] = set()
    words = 0
    while len(picks) < qs.answer_sentences and qs.answer_words - words >= MIN_WORDS:
        left = qs.answer_words - words
        best, best_score = -1, -math.inf
        for i, c in enumerate(cands):
            if i in chosen or (sizes[i] > left and left < MIN_WINDOW):
                continue
            cover = sum(idf[t] * (COVERED if t in covered else 1.0) for t in qterms & c.terms)
            score = prior[i] + cover / total + BRIDGE * bool(c.names & bridges)
            score -= SAME_UNIT * (c.unit in used_units)
            if score > best_score:
                best, best_score = i, score
        if best < 0 or (best_score <= 0 and not picks):
            break
        c = cands[best]
        text = c.text if sizes[best] <= left else _window(c.text, left, qterms, latin)
        picks.append((best, text))
        chosen.add(best)
        words += len(text.split())
        covered |= qterms & c.terms
        bridges |= c.names - question.names
        used_units.add(c.unit)
    return picks


def _window(text: str, size: int, qterms: frozenset[str], latin: str) -> str:
    """The `size` consecutive words of `text` holding the most question terms (of several
    such windows, the one centred nearest their hits), with ellipses where it was cut
    (counted among the words)."""
    words = text.split()
    size = max(size - 2, 1)
    hits = np.array([bool(t & qterms) for t in _terms(words, latin)], dtype=np.float64)
    start = 0
    if len(words) > size:  # of the windows with the most hits, the one centred on them
        counts = np.convolve(hits, np.ones(size), "valid")
        best = np.flatnonzero(counts == counts.max())
        at = np.flatnonzero(hits)
        centre = at.mean() if at.size else 0.0
        start = int(best[np.argmin(np.abs(best + size / 2 - centre))])
    piece = " ".join(words[start : start + size])
    head = "… " if start > 0 else ""
    tail = " …" if start + size < len(words) else ""
    return f"{head}{piece}{tail}"


NOTHING_MATCHES = "No sentence of the retrieved text matches the query's words."


def answered_result(
    index: IndexTables,
    query: str,
    mode: str,
    answer_from: list[dict[str, Any]],
    *,
    context: str,
    records: list[dict[str, Any]],
    text_unit_ids: list[str],
    trace: list[str],
    data: dict[str, Any] | None = None,
    nothing: str = NOTHING_MATCHES,
) -> SearchResult:
    """How a mode's search ends: the extractive answer with its citations from the records
    `answer_from` (best first; pipeline/query/extractive.py), the trace line saying so, and
    the SearchResult with the context's token count. `nothing` is the answer when no
    sentence matches."""
    answer, citations = cited_answer(index, query, answer_from)
    trace.append(f"extractive answer: {len(citations)} sentences of the context's units")
    return SearchResult(
        query=query,
        mode=mode,
        answer=answer or nothing,
        citations=citations,
        context_text=context,
        records=records,
        text_unit_ids=text_unit_ids,
        trace=trace,
        context_tokens=count_tokens(context),
        data=data or {},
    )

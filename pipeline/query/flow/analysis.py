"""Flow step 1, query analysis: the question -> {entities, intent, source}.

By the LLM (`query_analysis` prompt) in LLM mode, else (offline, or when its JSON is unusable)
lexically: quoted strings, capitalised spans and entity names found in the query, content
words when there is nothing else; the intent from cue words.
"""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from pipeline.llm.prompts import load_prompt, neutralise
from pipeline.query.word_keys import STOPWORDS, fold, raw_words

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


Intent = Literal["factual", "relationship", "summary", "exploration"]
MIN_TERM_CHARS = 3  # shorter terms would LIKE-match half the graph
MAX_TERMS = 12
# Words of a question that say what it asks, not what it is about.
CUE_WORDS = frozenset(
    re.findall(
        r"\w+",
        "related relate relation relationship relationships connected connect connection "
        "linked link associated association between summarize summarise summary overview "
        "main themes theme tell explain describe",
    )
)


_RELATION_CUES = re.compile(
    r"\b(relat(e|es|ed|ion|ions|ionship|ionships)|connect(s|ed|ion|ions)?|link(s|ed)?"
    r"|associat\w*|interact\w*|between|связ\w*)\b"
)


_SUMMARY_CUES = re.compile(
    r"\b(summar\w*|overview|main (themes?|topics?|ideas?)|key (themes?|topics?)|themes"
    r"|overall|in general|обзор\w*|кратко|резюм\w*)\b"
)


_FACTUAL_CUES = re.compile(
    r"^\W*(what|who|whom|whose|when|where|which|how (many|much|old|long)|in what|"
    r"что|кто|когда|где|какой|какая|какое|сколько)\b"
)


_QUOTED = re.compile(r'"([^"\n]{2,80})"|“([^”\n]{2,80})”|«([^»\n]{2,80})»')


class QueryAnalysis(BaseModel):
    """The `query_analysis` prompt's answer."""

    entities: list[str] = []
    intent: Intent = "exploration"


def lexical_intent(query: str) -> Intent:
    """Intent from cue words: relation words first (a 'what links X and Y' question asks for
    a relationship), then summary words, then wh-words, else exploration."""
    q = fold(query)
    if _RELATION_CUES.search(q):
        return "relationship"
    if _SUMMARY_CUES.search(q):
        return "summary"
    if _FACTUAL_CUES.search(q):
        return "factual"
    return "exploration"


def lexical_entities(query: str, index: IndexTables | None = None) -> list[str]:
    """Candidate names: quoted strings, capitalised spans, entity names of the index found in
    the query; its content words when none of those exist. Order kept, duplicates dropped."""
    out: list[str] = []
    for m in _QUOTED.finditer(query):
        out.append(next(g for g in m.groups() if g))
    span: list[str] = []
    for w in [*raw_words(query), ""]:
        if w[:1].isupper() or (w[:1].isdigit() and span):
            span.append(w)
            continue
        while span and fold(span[0]) in STOPWORDS:
            span.pop(0)
        if span:
            out.append(" ".join(span))
        span = []
    if index is not None and index.entities.height:
        # Names written like names; a lower-case word equal to a title ('state') only
        # when nothing else names the query's subject.
        titles = index.entities["title"]
        matches = index.match_entities(query)
        out.extend(titles[m.row] for m in matches if m.proper or " " in m.key)
        if not out:
            out.extend(titles[m.row] for m in matches)
    if not out:
        out = [
            w
            for w in raw_words(query)
            if len(w) >= MIN_TERM_CHARS and fold(w) not in STOPWORDS and fold(w) not in CUE_WORDS
        ]
    seen: set[str] = set()
    names = []
    for name in out:
        key = fold(name.strip())
        if key and key not in seen:
            seen.add(key)
            names.append(name.strip())
    return names[:MAX_TERMS]


def analyse(index: IndexTables, query: str, trace: list[str]) -> dict[str, Any]:
    """{entities, intent, source}: by the LLM in LLM mode, lexical otherwise or on failure
    (always, as it only steers retrieval; the warning says so and the answer call decides)."""
    if index.llm is not None:
        from pipeline.llm.errors import LlmError
        from pipeline.query.answer import LlmFallbackWarning

        messages = load_prompt("query_analysis").render(question=neutralise(query, "question"))
        try:
            (got,) = index.llm.run_many(
                [index.llm.chat_json(messages, QueryAnalysis, stage="query_analysis")]
            )
        except Exception as exc:  # noqa: BLE001 - the lexical analysis stands in
            got = LlmError(str(exc))
        if isinstance(got, QueryAnalysis):
            ents = [e.strip() for e in got.entities if e and e.strip()][:MAX_TERMS]
            if not ents:
                ents = lexical_entities(query, index)
            trace.append(f"analysis: llm, intent={got.intent}, entities={ents}")
            return {"entities": ents, "intent": got.intent, "source": "llm"}
        note = f"analysis: LLM failed ({got}); lexical fallback"
        warnings.warn(note, LlmFallbackWarning, stacklevel=2)
        trace.append(note)
    ents = lexical_entities(query, index)
    intent = lexical_intent(query)
    trace.append(f"analysis: lexical, intent={intent}, entities={ents}")
    return {"entities": ents, "intent": intent, "source": "lexical"}

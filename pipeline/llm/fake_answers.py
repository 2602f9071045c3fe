"""The fake server's answers: what a capable model would reply to each of the project's prompts,
as deterministic functions of the messages.

Why apart from the server: the HTTP side (faults, token limits, streaming) is the same for
every prompt, while these responders know the prompts (their marker lines and data blocks) and
give answers realistic in kind and size: extraction answers come from the offline extractor
(as long as a real model's, or its whole graph: `extraction_answer`), report, summary and query
answers from the context they are sent. Tests use them directly to build expected answers or
wrap them in a custom responder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

JSON_MARKER = "return json"

Responder = Callable[[list[dict]], str]

_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def message_text(message: dict) -> str:
    """A message's text: a plain string or the text parts of a content list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


_DOC_BLOCK = re.compile(r'<document id="([^"]+)">\n(.*?)\n</document>', re.S)


ANSWERS = ("model", "verbose")  # how the fake answers extraction (see `extraction_answer`)
DESCRIPTION_WORDS = 15
MODEL_DESCRIPTION_WORDS = 8  # the prompt's example descriptions run 5-6 words
# The share of its compact graph the model-like fake answers: at 0.28 it answers HippoRAG's
# 1,890 MuSiQue passages (../shared/data/musique, packs of 12) with 2.37 answer tokens per text
# token, what HippoRAG 2's model wrote on MuSiQue (pipeline.config.documents.MODEL_ANSWER_RATIO,
# 2.4: the offline extractor finds more than a model names, every capitalised span and every
# co-occurring pair). A Christmas Carol then gets 0.5: prose holds fewer facts a token.
MODEL_KEEP = 0.28


def check_answers(answers: str) -> str:
    """`answers` when it names a way to answer extraction (ANSWERS), else ValueError."""
    if answers not in ANSWERS:
        raise ValueError(f"unknown answers {answers!r}; known: {ANSWERS}")
    return answers


def _brief(text: str, words: int = DESCRIPTION_WORDS) -> str:
    """A description as a model writes one when asked for "one sentence": at most `words`
    words (the offline extractor's are whole evidence sentences)."""
    return " ".join(str(text or "").split()[:words])


def _offline_graph(blocks: list[tuple[str, str]]):
    """(entities, strongest relationships) of the offline extractor per block id: no more
    relationships than entities per block (the strongest, in their order), where the offline
    extractor relates every co-occurring pair."""
    import polars as pl

    from pipeline.config import ExtractionSettings
    from pipeline.extract.nlp import NlpExtractor

    units = pl.DataFrame({"id": [k for k, _ in blocks], "text": [t for _, t in blocks]})
    ents, rels = NlpExtractor(ExtractionSettings()).extract(units)
    n_ents = ents.group_by("text_unit_id").len()
    strongest = (
        rels.with_columns(order=pl.int_range(pl.len()).over("text_unit_id"))
        .sort(["text_unit_id", "weight", "order"], descending=[False, True, False])
        .join(n_ents, on="text_unit_id", how="left")
        .filter(pl.int_range(pl.len()).over("text_unit_id") < pl.col("len").fill_null(0))
        .sort(["text_unit_id", "order"])
    )
    return ents, strongest


def _entity(row: dict, words: int) -> dict:
    description = _brief(row["description"], words)
    return {"title": row["title"], "type": row["type"], "description": description}


def _relationship(row: dict, words: int) -> dict:
    return {
        "source": row["source"],
        "target": row["target"],
        "type": row["type"],
        "description": _brief(row["description"], words),
        "strength": max(1, min(10, round(row["weight"] * 5))),
    }


def extraction_answer(blocks: list[tuple[str, str]], answers: str = "model") -> str:
    """What the fake answers to the extraction prompt: per data block, typed entities and
    relationships found by the offline extractor, so the answer is deterministic and realistic
    in kind (types, evidence descriptions, strengths).

    "verbose": the whole offline graph, descriptions of DESCRIPTION_WORDS words (2.6 answer
    tokens per text token on A Christmas Carol, 11 on MuSiQue: more than a model writes; what
    the truncation tests need). "model": as long as a real extractor's answer
    (`model_records`): 2.4 answer tokens per text token on dense text (MuSiQue), 0.5 on the
    Carol."""
    ents, rels = _offline_graph(blocks)
    if check_answers(answers) == "model":
        return json.dumps({k: model_records(ents, rels, k) for k, _ in blocks}, ensure_ascii=False)
    out: dict[str, dict[str, list]] = {k: {"entities": [], "relationships": []} for k, _ in blocks}
    for row in ents.iter_rows(named=True):
        out[row["text_unit_id"]]["entities"].append(_entity(row, DESCRIPTION_WORDS))
    for row in rels.iter_rows(named=True):
        out[row["text_unit_id"]]["relationships"].append(_relationship(row, DESCRIPTION_WORDS))
    return json.dumps(out, ensure_ascii=False)


def model_records(ents, rels, key: str) -> dict[str, list]:
    """One block's graph as a model writes it: its most salient compact records
    (`_salient_records`), only the first MODEL_KEEP of them in tokens (at least one record), as
    a model names what matters most and stops."""
    from pipeline.tokens import count_tokens

    records = _salient_records(ents, rels, key)
    sizes = [count_tokens(json.dumps(r, ensure_ascii=False)) + 1 for _, r in records]
    budget, used = MODEL_KEEP * sum(sizes), 0
    out: dict[str, list] = {"entities": [], "relationships": []}
    for (kind, record), size in zip(records, sizes, strict=True):
        if used and used + size > budget:
            break
        out[kind].append(record)
        used += size
    return out


def _salient_records(ents, rels, key: str) -> list[tuple[str, dict]]:
    """(kind, record) of one block, descriptions of MODEL_DESCRIPTION_WORDS words, most salient
    first: each relationship (strongest first) after its two entities, then the other named
    entities; a concept (CONCEPT) only where it is related (an unrelated keyphrase is no
    fact)."""
    import polars as pl

    unit_ents = {r["title"]: r for r in ents.filter(pl.col("text_unit_id") == key).to_dicts()}
    rel_rows = (
        rels.filter(pl.col("text_unit_id") == key)
        .sort("weight", descending=True, maintain_order=True)
        .to_dicts()
    )
    ordered: list[tuple[str, str]] = []  # (kind, entity title or relationship index)
    for i, rel in enumerate(rel_rows):
        if rel["source"] in unit_ents and rel["target"] in unit_ents:
            ordered += [("entities", rel["source"]), ("entities", rel["target"])]
            ordered.append(("relationships", str(i)))
    ordered += [("entities", t) for t, r in unit_ents.items() if r["type"] != "CONCEPT"]
    records = []
    for kind, ref in dict.fromkeys(ordered):
        if kind == "entities":
            records.append((kind, _entity(unit_ents[ref], MODEL_DESCRIPTION_WORDS)))
        else:
            records.append((kind, _relationship(rel_rows[int(ref)], MODEL_DESCRIPTION_WORDS)))
    return records


REPORT_MARKER = "You write a report on one community of a knowledge graph"
_ITEM_BLOCK = re.compile(r'<item id="([^"]+)"(?: \w+="[^"]*")*>\n(.*?)\n</item>', re.S)
_CONTEXT_LINE = re.compile(r"^- (?:Report \d+: )?(.+?)(?: \[[A-Z_]+\]| —|:)", re.M)


def report_answer(text: str) -> str:
    """The community-report answer: title = the first two entity (or sub-report) titles of the
    context, summary = its first data sentence, rating from the number of entities, one
    finding per entity (at most 5)."""
    context = text.split("<context>", 1)[-1].split("</context>", 1)[0]
    names = list(dict.fromkeys(m.strip() for m in _CONTEXT_LINE.findall(context)))
    data = [ln[2:] for ln in context.splitlines() if ln.startswith("- ")]
    first = _SENTENCE_END.split(data[0].strip(), maxsplit=1)[0] if data else "No data."
    answer = {
        "title": " and ".join(names[:2]) or "Community",
        "summary": first[:300],
        "rating": min(10, len(names)),
        "rating_explanation": f"{len(names)} entities.",
        "findings": [
            {"summary": n, "explanation": f"{n} belongs to this community."} for n in names[:5]
        ],
    }
    return json.dumps(answer, ensure_ascii=False)


def summaries_answer(blocks: list[tuple[str, str]]) -> str:
    """The description-summary answer: per item, its first two descriptions joined."""
    out = {k: " ".join(t.splitlines()[:2]) for k, t in blocks}
    return json.dumps(out, ensure_ascii=False)


ANALYSIS_MARKER = "You analyse a search question over a knowledge graph"
FLOW_MARKER = "You answer questions from a knowledge flow"
_QUESTION_WORDS = frozenset(
    re.findall(r"\w+", "what who whom whose when where which why how is are was were do does did")
)
_INTENT_CUES = (
    ("relationship", re.compile(r"\b(relat(ed|ion|ionship)|connect(ed|ion)?|link(ed)?|between)\b")),
    ("summary", re.compile(r"\b(summar\w*|overview|main themes?)\b")),
    ("factual", re.compile(r"^\W*(what|who|when|where|which)\b")),
)


def analysis_answer(text: str) -> str:
    """The query-analysis answer: entities = the question's capitalised words (question words
    left out), intent from cue words (relationship, summary, factual, else exploration)."""
    question = text.split("<question>", 1)[-1].split("</question>", 1)[0].strip()
    names: list[str] = []
    for word in _WORD.findall(question):
        word = word.strip("'’-")
        if word[:1].isupper() and word.casefold() not in _QUESTION_WORDS and word not in names:
            names.append(word)
    low = question.casefold()
    intent = next((name for name, cue in _INTENT_CUES if cue.search(low)), "exploration")
    return json.dumps({"entities": names, "intent": intent}, ensure_ascii=False)


def flow_answer(text: str) -> str:
    """The flow answer: the first fact (else definition) line of the context, as a sentence."""
    context = text.split("<context>", 1)[-1].split("</context>", 1)[0]
    lines = [ln[2:] for ln in context.splitlines() if ln.startswith("- ")]
    return f"From the knowledge flow: {lines[0]}" if lines else "The context holds no facts."


FOCUS_MARKER = "You answer questions about one note of a notebook"
_URI_AND_TITLE = re.compile(r'"uri_and_title": "(\[[^"]*\]\([^"]*\))"')


def focus_answer(text: str) -> str:
    """The focus answer: names the focus note and how many related notes the context holds."""
    found = _URI_AND_TITLE.findall(_block(text, "context"))
    if not found:
        return "The context holds no note."
    return f"About {found[0]}, with {len(found) - 1} related notes."


MAP_MARKER = "You are one analyst in a map-reduce search"
REDUCE_MARKER = "You combine the answers of several analysts"


def _block(text: str, tag: str) -> str:
    return text.split(f"<{tag}>", 1)[-1].split(f"</{tag}>", 1)[0].strip()


def map_answer(text: str) -> str:
    """The global map answer: rated by how many of the question's words (4+ letters) the
    reports hold (0 when none), the response is the report row that holds most of them."""
    question = text.rsplit("Question:", 1)[-1]
    words = {w.casefold() for w in _WORD.findall(question) if len(w) >= 4}
    rows = [ln for ln in _block(text, "context").splitlines()[2:] if ln.strip()]
    hits = [sum(w in row.casefold() for w in words) for row in rows]
    best = max(range(len(rows)), key=lambda i: hits[i], default=None)
    rating = min(10, hits[best]) if best is not None else 0
    response = rows[best].split("|")[-1][:300] if rating else ""
    return json.dumps({"reasoning": f"{rating} question words", "response": response,
                       "rating": rating}, ensure_ascii=False)  # fmt: skip


def reduce_answer(text: str) -> str:
    """The global reduce answer: the best analyst's answer, said to be combined."""
    analyses = _block(text, "analyses").split("\n\n")
    first = analyses[0].split(": ", 1)[-1] if analyses and analyses[0] else ""
    return f"Combined from {len(analyses)} analysts: {first}" if first else "Nothing relevant."


def default_responder(messages: list[dict], answers: str = "model") -> str:
    """Deterministic answer from the last user message (of the first turn).

    Document data blocks (`<document id="k">`, the extraction prompt) get the extraction
    answer keyed by block id, as long as a model's ("model") or the whole offline graph
    ("verbose"; see `extraction_answer`). The community-report prompt (its
    system line) gets `report_answer`; `<item id="k">` blocks (description summaries) get
    `summaries_answer`. The query-analysis prompt gets `analysis_answer`, the flow answer
    prompt `flow_answer`, the focus prompt `focus_answer`, global search's map and reduce
    prompts `map_answer` and `reduce_answer`.

    A prompt that says "Return JSON" (any message, any case) gets
    `{"entities": [{name, type, description}], "relationships": [{source, target, description,
    strength}]}` with the capitalised words of the last user message as entities and consecutive
    pairs as relationships; any other prompt gets the first sentence of the last user message.
    """
    # A re-ask appends (assistant answer, user correction): answer the original prompt, i.e.
    # the last user message before the first assistant message.
    first_turn = []
    for m in messages:
        if m.get("role") == "assistant":
            break
        first_turn.append(m)
    users = [m for m in first_turn if m.get("role") == "user"]
    text = message_text(users[-1]) if users else ""
    if any(REPORT_MARKER in message_text(m) for m in first_turn):
        return report_answer(text)
    if any(ANALYSIS_MARKER in message_text(m) for m in first_turn):
        return analysis_answer(text)
    if any(FLOW_MARKER in message_text(m) for m in first_turn):
        return flow_answer(text)
    if any(FOCUS_MARKER in message_text(m) for m in first_turn):
        return focus_answer(text)
    if any(MAP_MARKER in message_text(m) for m in first_turn):
        return map_answer(text)
    if any(REDUCE_MARKER in message_text(m) for m in first_turn):
        return reduce_answer(text)
    items = _ITEM_BLOCK.findall(text)
    if items:  # the description-summary prompt: answer keyed by item id
        return summaries_answer(items)
    blocks = _DOC_BLOCK.findall(text)
    if blocks:  # the extraction prompt: documents as data blocks, answer keyed by block id
        return extraction_answer(blocks, answers)
    if any(JSON_MARKER in message_text(m).lower() for m in messages):
        names: list[str] = []
        for word in _WORD.findall(text):
            word = word.strip("'’-")
            if word and word[0].isupper() and word not in names:
                names.append(word)
        entities = [
            {"name": n, "type": "CONCEPT", "description": f"{n} is mentioned in the text."}
            for n in names
        ]
        relationships = [
            {"source": a, "target": b, "description": f"{a} appears near {b}.", "strength": 1.0}
            for a, b in zip(names, names[1:], strict=False)
        ]
        return json.dumps(
            {"entities": entities, "relationships": relationships}, ensure_ascii=False
        )
    first = _SENTENCE_END.split(text.strip(), maxsplit=1)[0] if text.strip() else ""
    return first[:500] or "OK."

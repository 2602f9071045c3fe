"""The extraction answer: the model's JSON for one pack, parsed and turned into rows per unit.

Why its own module: what the model is asked to return (lenient pydantic models: a slip in a
field is not worth a retried call) and how an answer becomes clean rows (whitespace and
Unicode normalised, types mapped to NEREL, duplicates dropped, relation endpoints resolved)
are pure functions, apart from the calls. A relation endpoint that is not an extracted entity
of its unit is matched case-insensitively to one; failing that it is added as a CONCEPT
entity when the unit's text contains it, and the relation is dropped when it does not (an
ungrounded name is more likely invented than missed). Strength 1-10 becomes weight
strength/10 (the offline extractor's weights are <= 1).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from pipeline.extract.llm_labels import (
    DEFAULT_ENTITY_TYPE,
    DEFAULT_RELATION_TYPE,
    normalize_entity_type,
    normalize_relation_type,
)
from pipeline.tokens import count_tokens

__all__ = [
    "ExtractionAnswer",
    "UnitGraph",
    "answer_tokens",
    "merge_graphs",
    "parse_answer",
    "unit_rows",
]

_SPACE_RE = re.compile(r"\s+")


def _clean(text: Any) -> str:
    return _SPACE_RE.sub(" ", unicodedata.normalize("NFC", str(text or ""))).strip()


# --------------------------------------------------------------------------- answer models


class EntityOut(BaseModel):
    """One entity as the model writes it; lenient (a missing field defaults, `name` is accepted
    for `title`) because a strict schema would turn minor slips into retried calls."""

    title: str
    type: str = DEFAULT_ENTITY_TYPE
    description: str = ""

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict) and "title" not in data and "name" in data:
            data = {**data, "title": data["name"]}
        return data

    @field_validator("title", "type", "description", mode="before")
    @classmethod
    def _str(cls, v: Any) -> str:
        return "" if v is None else str(v)


class RelationshipOut(BaseModel):
    source: str
    target: str
    type: str = DEFAULT_RELATION_TYPE
    description: str = ""
    strength: float = Field(5.0, description="1 (weak) .. 10 (explicit, central)")

    @field_validator("source", "target", "type", "description", mode="before")
    @classmethod
    def _str(cls, v: Any) -> str:
        return "" if v is None else str(v)

    @field_validator("strength", mode="before")
    @classmethod
    def _clamp(cls, v: Any) -> float:
        try:
            x = float(v)
        except (TypeError, ValueError):
            return 5.0
        return min(10.0, max(1.0, x)) if x == x else 5.0


class UnitGraph(BaseModel):
    entities: list[EntityOut] = []
    relationships: list[RelationshipOut] = []


class ExtractionAnswer(BaseModel):
    """The answer for one pack: unit key -> its graph. The prompt asks for the bare mapping
    `{"1": {...}}`; `{"documents": {...}}` is accepted too."""

    documents: dict[str, UnitGraph] = {}

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, data: Any) -> Any:
        if isinstance(data, dict) and not (
            set(data) == {"documents"} and isinstance(data["documents"], dict)
        ):
            return {"documents": data}
        return data


def parse_answer(answer: ExtractionAnswer | dict | str) -> dict[str, UnitGraph]:
    """The unit graphs of an answer (a model, a decoded dict or JSON text)."""
    if isinstance(answer, str):
        answer = ExtractionAnswer.model_validate_json(answer)
    elif isinstance(answer, dict):
        answer = ExtractionAnswer.model_validate(answer)
    return {str(k).strip(): v for k, v in answer.documents.items()}


def answer_tokens(answer: ExtractionAnswer) -> int:
    """Tokens of the answer as a model writes it (the bare mapping, JSON with spaces after
    separators, whole strengths without ".0"): what a cached answer cost, and close to what a
    fresh one did (the client hands back the parsed answer, not its usage)."""
    out = {
        k: {
            "entities": [e.model_dump() for e in g.entities],
            "relationships": [
                {**r.model_dump(), "strength": int(r.strength)}
                if r.strength == int(r.strength)
                else r.model_dump()
                for r in g.relationships
            ],
        }
        for k, g in answer.documents.items()
    }
    return count_tokens(json.dumps(out, ensure_ascii=False))


def merge_graphs(a: UnitGraph, b: UnitGraph) -> UnitGraph:
    """One unit's graph from two answers (a gleaning round adds to the first answer)."""
    return UnitGraph(
        entities=a.entities + b.entities, relationships=a.relationships + b.relationships
    )


def unit_rows(
    text: str, graph: UnitGraph
) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str, str, float]]]:
    """(entities [(title, type, description)], relations [(source, target, type, description,
    weight)]) for one unit: cleaned, types normalised, deduplicated, endpoints resolved."""
    ents: dict[str, tuple[str, str, str]] = {}
    for e in graph.entities:
        title = _clean(e.title)
        if title and title.casefold() not in ents:
            ents[title.casefold()] = (title, normalize_entity_type(e.type), _clean(e.description))
    folded_text = _clean(text).casefold()
    rels: dict[tuple[str, str, str], tuple[str, str, str, str, float]] = {}
    for r in graph.relationships:
        ends = []
        for raw in (r.source, r.target):
            name = _clean(raw)
            key = name.casefold()
            if key and key not in ents and key in folded_text:
                ents[key] = (name, DEFAULT_ENTITY_TYPE, _clean(r.description))
            ends.append(ents[key][0] if key in ents else "")
        src, tgt = ends
        if not src or not tgt or src == tgt:
            continue
        rtype = normalize_relation_type(r.type)
        k = (src, tgt, rtype)
        if k not in rels:
            rels[k] = (src, tgt, rtype, _clean(r.description), round(r.strength / 10.0, 4))
    return list(ents.values()), list(rels.values())

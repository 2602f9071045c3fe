"""LLM extractor: entities and relations as prompted JSON from an OpenAI-compatible endpoint.

Cost: the prompt is the NEREL type lists, a compact schema and one tiny example (620 tokens),
and short text units of one document are packed into one call to share it; the answer, not the
prompt, bounds a pack (below), and answer tokens dominate the bill. Units are addressed in the
prompt by short keys ("1", "2", ...) and the answer is keyed by them; packs never cross
documents, so adding a document leaves every other document's calls (and LLM cache keys)
unchanged.

Pack size: the answer must fit in `llm.max_tokens`, and a JSON graph answer is longer than its
text: one short sentence per entity and per relationship, ~30-40 tokens each. So a pack holds
at most max_tokens / `llm_answer_ratio` text tokens (and at most `llm_pack_tokens` /
`llm_pack_max_units`): with the defaults 4,096 / 4.0, 1,024. An answer cut at the limit
(finish_reason "length") is never used; the pack is split in halves and each half asked again,
down to one unit, and the cut is remembered in the cache so a re-run splits without paying for
it again (`llm_truncations` in the metadata, `n_splits` here). The ratio is measured, not
guessed: the fake server's model-sized answers run 3.1 answer tokens per text token on A
Christmas Carol (prose) on average, 10-14 on dense encyclopedic text (MuSiQue passages, the
sample corpus). On the Carol (263 units, max_tokens 4,096), ratio 3 made 73 calls with 17 packs
cut, 4 made 69 calls with 8 cut and 17% fewer completion tokens, 6 made 90 calls with 3 cut:
4 is the fewest calls at near the fewest tokens. Sizing for dense text would send prose one
unit per call; dense packs instead rely on the split.

Normalisation: entity types map to NEREL classes (common aliases such as ORG or GPE to the
closest class, anything else to CONCEPT); relation types to NEREL's 49 or RELATED_TO;
strength 1-10 becomes weight strength/10 (the offline extractor's weights are <= 1).
A relation endpoint that is not an extracted entity of its unit is matched case-insensitively
to one; failing that it is added as a CONCEPT entity when the unit's text contains it, and the
relation is dropped when it does not (an ungrounded name is more likely invented than missed).

Failure policy: a pack whose call fails after the client's retries (or a single unit whose
answer is still cut), or whose answer lacks a unit, is extracted offline by `NlpExtractor` for
those units (rows keep extractor "nlp") and recorded in `.failures` as {text_unit_id, reason}.
Nothing per-unit is raised; a fatal error (a wrong API key: `.fatal`) stops the extraction.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, Field, field_validator, model_validator

from pipeline import schemas
from pipeline.config import ExtractionSettings
from pipeline.extract.nlp import NlpExtractor
from pipeline.llm.batches import ask_in_halves
from pipeline.llm.prompts import (
    NEREL_ENTITY_TYPES,
    NEREL_RELATION_TYPES,
    Prompt,
    data_block,
    load_prompt,
)
from pipeline.tokens import count_tokens_batch

__all__ = [
    "ExtractionAnswer",
    "LlmExtractor",
    "UnitGraph",
    "normalize_entity_type",
    "normalize_relation_type",
    "pack_units",
    "parse_answer",
]

STAGE = "extract"
MISSING = "missing from the LLM answer"
DEFAULT_ENTITY_TYPE = "CONCEPT"
DEFAULT_RELATION_TYPE = "RELATED_TO"

_ENTITY_TYPES = frozenset(NEREL_ENTITY_TYPES) | {DEFAULT_ENTITY_TYPE}
_RELATION_TYPES = frozenset(NEREL_RELATION_TYPES) | {DEFAULT_RELATION_TYPE}
# Labels models commonly use instead of NEREL's (OntoNotes/CoNLL and plain words).
_ENTITY_ALIASES = {
    "PER": "PERSON",
    "PEOPLE": "PERSON",
    "CHARACTER": "PERSON",
    "ORG": "ORGANIZATION",
    "ORGANISATION": "ORGANIZATION",
    "COMPANY": "ORGANIZATION",
    "INSTITUTION": "ORGANIZATION",
    "AGENCY": "ORGANIZATION",
    "GPE": "COUNTRY",
    "NATION": "COUNTRY",
    "TOWN": "CITY",
    "VILLAGE": "CITY",
    "STATE": "STATE_OR_PROVINCE",
    "PROVINCE": "STATE_OR_PROVINCE",
    "REGION": "LOCATION",
    "LOC": "LOCATION",
    "PLACE": "LOCATION",
    "GEO": "LOCATION",
    "BUILDING": "FACILITY",
    "FAC": "FACILITY",
    "NORP": "NATIONALITY",
    "ETHNICITY": "NATIONALITY",
    "OCCUPATION": "PROFESSION",
    "JOB": "PROFESSION",
    "ROLE": "PROFESSION",
    "JOB_TITLE": "PROFESSION",
    "WORK": "WORK_OF_ART",
    "BOOK": "WORK_OF_ART",
    "FILM": "WORK_OF_ART",
    "MOVIE": "WORK_OF_ART",
    "SONG": "WORK_OF_ART",
    "ALBUM": "WORK_OF_ART",
    "PAINTING": "WORK_OF_ART",
    "ARTWORK": "WORK_OF_ART",
    "CARDINAL": "NUMBER",
    "QUANTITY": "NUMBER",
    "ILLNESS": "DISEASE",
    "MEDICAL_CONDITION": "DISEASE",
    "PRIZE": "AWARD",
    "LAW_OR_REGULATION": "LAW",
    "TREATY": "LAW",
    "YEAR": "DATE",
    "PARTY": "ORGANIZATION",
    "POLITICAL_PARTY": "ORGANIZATION",
    "TEAM": "ORGANIZATION",
    "DYNASTY": "FAMILY",
    "BELIEF": "IDEOLOGY",
    "TECHNOLOGY": "PRODUCT",
    "DEVICE": "PRODUCT",
    "SOFTWARE": "PRODUCT",
}
_RELATION_ALIASES = {
    "BORN_IN": "PLACE_OF_BIRTH",
    "DIED_IN": "PLACE_OF_DEATH",
    "LIVES_IN": "PLACE_RESIDES_IN",
    "RESIDES_IN": "PLACE_RESIDES_IN",
    "WORKS_FOR": "WORKPLACE",
    "WORKS_AT": "WORKPLACE",
    "EMPLOYED_BY": "WORKPLACE",
    "MARRIED_TO": "SPOUSE",
    "SPOUSE_OF": "SPOUSE",
    "SIBLING_OF": "SIBLING",
    "RELATIVE_OF": "RELATIVE",
    "FOUNDER_OF": "FOUNDED_BY",
    "LOCATED_AT": "LOCATED_IN",
    "IN": "LOCATED_IN",
    "BASED_IN": "HEADQUARTERED_IN",
    "OWNS": "OWNER_OF",
    "OWNED_BY": "OWNER_OF",
    "STUDIED_AT": "SCHOOLS_ATTENDED",
    "EDUCATED_AT": "SCHOOLS_ATTENDED",
    "ATTENDED": "SCHOOLS_ATTENDED",
    "PARTICIPATED_IN": "PARTICIPANT_IN",
    "MEMBER": "MEMBER_OF",
    "RECEIVED": "AWARDED_WITH",
    "WON": "AWARDED_WITH",
    "AWARDED": "AWARDED_WITH",
    "CAUSED_BY": "HAS_CAUSE",
    "PRODUCED": "PRODUCES",
    "CREATED": "PRODUCES",
    "AUTHOR_OF": "PRODUCES",
    "WROTE": "PRODUCES",
    "KNOWS_OF": "KNOWS",
    "FRIEND_OF": "KNOWS",
    "OCCURRED_IN": "TAKES_PLACE_IN",
    "HAPPENED_IN": "TAKES_PLACE_IN",
    "ALIAS": "ALTERNATIVE_NAME",
    "ALSO_KNOWN_AS": "ALTERNATIVE_NAME",
    "RELATED": "RELATED_TO",
    "ASSOCIATED_WITH": "RELATED_TO",
}
_LABEL_RE = re.compile(r"[^A-Z0-9]+")
_SPACE_RE = re.compile(r"\s+")


def _label(raw: str | None) -> str:
    return _LABEL_RE.sub("_", (raw or "").upper()).strip("_")


def normalize_entity_type(raw: str | None) -> str:
    """A NEREL entity class (or CONCEPT) for a model's label: exact, alias, plural, else CONCEPT."""
    t = _label(raw)
    plural = t[:-3] + "Y" if t.endswith("IES") else t.removesuffix("S")
    for cand in (t, plural):
        if cand in _ENTITY_TYPES:
            return cand
        if cand in _ENTITY_ALIASES:
            return _ENTITY_ALIASES[cand]
    return DEFAULT_ENTITY_TYPE


def normalize_relation_type(raw: str | None) -> str:
    """A NEREL relation class for a model's label, else RELATED_TO."""
    t = _label(raw)
    if t in _RELATION_TYPES:
        return t
    return _RELATION_ALIASES.get(t, DEFAULT_RELATION_TYPE)


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


def _merge_graphs(a: UnitGraph, b: UnitGraph) -> UnitGraph:
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


# --------------------------------------------------------------------------- packing


def pack_units(
    unit_ids: list[str],
    n_tokens: list[int],
    groups: list[str] | None = None,
    max_tokens: int = 1200,
    max_units: int = 12,
) -> list[list[int]]:
    """Row indices packed greedily in input order: a pack holds consecutive units of one group
    (document) whose tokens sum to <= max_tokens (a longer unit goes alone) and at most
    max_units. Deterministic; a unit id seen twice is packed once (its first row)."""
    packs: list[list[int]] = []
    cur: list[int] = []
    cur_tok = 0
    cur_group: str | None = None
    seen: set[str] = set()
    for i, (uid, n) in enumerate(zip(unit_ids, n_tokens, strict=True)):
        if uid in seen:
            continue
        seen.add(uid)
        g = groups[i] if groups is not None else ""
        if cur and (g != cur_group or cur_tok + n > max_tokens or len(cur) >= max_units):
            packs.append(cur)
            cur, cur_tok = [], 0
        cur.append(i)
        cur_tok += n
        cur_group = g
    if cur:
        packs.append(cur)
    return packs


# --------------------------------------------------------------------------- extractor


class LlmExtractor:
    """Prompted JSON extraction through `pipeline.llm.client.LlmClient`, packed, cached by the
    client, with an offline fallback per failed pack (see the module docstring)."""

    name = "llm"

    def __init__(
        self,
        settings: ExtractionSettings,
        llm: Any | None = None,
        llm_settings: Any | None = None,
        cache_dir: str | Path | None = None,
    ):
        self.settings = settings
        self._llm = llm
        self._llm_settings = llm_settings
        self._cache_dir = cache_dir
        self.prompt: Prompt = load_prompt("extract_graph", settings.prompt_path)
        self.gleaning_prompt: Prompt = load_prompt("extract_gleaning", settings.prompt_path)
        self.failures: list[dict[str, str]] = []
        self.n_calls = 0
        self.n_splits = 0

    @property
    def llm(self) -> Any:
        """The client, built on first use (so constructing the extractor never opens one)."""
        if self._llm is None:
            from pipeline.llm.client import LlmClient

            llm_settings = self._llm_settings
            if llm_settings is None:
                from pipeline.config import load_settings

                llm_settings = load_settings().llm
            self._llm = LlmClient(llm_settings, self._cache_dir)
        return self._llm

    @property
    def model(self) -> str:
        """The chat model named in the rows (from the given settings, else the client's)."""
        s = self._llm_settings or getattr(self.llm, "settings", None)
        return str(getattr(s, "chat_model", "") or "")

    @property
    def prompt_hash(self) -> str:
        """Hash of what shapes the answer: the extraction prompt, plus the gleaning prompt when
        gleaning rounds run."""
        if self.settings.gleanings > 0:
            from pipeline.ids import sha256_hex

            return sha256_hex(f"{self.prompt.hash}+{self.gleaning_prompt.hash}".encode())
        return self.prompt.hash

    def messages(self, texts: list[str]) -> list[dict[str, str]]:
        """The chat messages of one pack; units are keyed "1".."n" in order."""
        blocks = "\n\n".join(data_block(t, "document", id=i + 1) for i, t in enumerate(texts))
        return self.prompt.render(
            documents=blocks,
            n_documents=len(texts),
            document_ids=", ".join(str(i + 1) for i in range(len(texts))),
        )

    def overhead_tokens(self) -> int:
        """Prompt tokens of the rendered template with an empty single-unit pack."""
        return sum(count_tokens_batch([m["content"] for m in self.messages([""])]))

    async def _ask(self, texts: list[str]) -> dict[str, UnitGraph]:
        """One pack's graphs by unit key: the call, then the gleaning rounds."""
        msgs = self.messages(texts)
        # a pack of several units will be split when cut: remember the cut, not to pay it again
        cut = len(texts) > 1
        answer = await self.llm.chat_json(msgs, ExtractionAnswer, stage=STAGE, remember_cut=cut)
        graphs = parse_answer(answer)
        for _ in range(self.settings.gleanings):
            msgs = [
                *msgs,
                {"role": "assistant", "content": answer.model_dump_json()},
                *self.gleaning_prompt.render(),
            ]
            answer = await self.llm.chat_json(msgs, ExtractionAnswer, stage=STAGE, remember_cut=cut)
            for k, g in parse_answer(answer).items():
                if k in graphs:
                    graphs[k] = _merge_graphs(graphs[k], g)
        return graphs

    async def _extract_pack(self, texts: list[str]) -> list[UnitGraph | str]:
        """Per unit of the pack: its graph, or the reason it has none. A pack whose answer is
        cut at the token limit is split and asked again (`ask_in_halves`); an error comes back
        as a reason (not raised) so the batch of calls finishes, unless it is fatal."""

        def split() -> None:
            self.n_splits += 1

        out: list[UnitGraph | str] = []
        for part, res in await ask_in_halves(texts, self._ask, split):
            if isinstance(res, BaseException):
                reason = f"{type(res).__name__}: {getattr(res, 'reason', None) or res}"
                out += [reason] * len(part)
            else:
                out += [res.get(str(k), MISSING) for k in range(1, len(part) + 1)]
        return out

    def pack_tokens(self) -> int:
        """Text tokens a pack may hold so that its answer fits the client's max_tokens (see
        the module docstring), within `llm_pack_tokens`."""
        cap = self.settings.llm_pack_tokens
        max_tokens = getattr(getattr(self.llm, "settings", None), "max_tokens", None)
        if not isinstance(max_tokens, int) or self.settings.llm_answer_ratio <= 0:
            return cap
        return max(1, min(cap, int(max_tokens / self.settings.llm_answer_ratio)))

    def extract(self, text_units: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(extracted_entities, extracted_relationships) with the schemas' exact columns;
        `self.failures` lists the units that fell back to the offline extractor."""
        self.failures = []
        self.n_splits = 0
        units = text_units.filter(pl.col("text").is_not_null() & (pl.col("text") != ""))
        ids = units.get_column("id").to_list()
        texts = units.get_column("text").to_list()
        groups = (
            units.get_column("document_id").cast(pl.Utf8).fill_null("").to_list()
            if "document_id" in units.columns
            else None
        )
        packs = pack_units(
            ids,
            count_tokens_batch(texts),
            groups,
            self.pack_tokens(),
            self.settings.llm_pack_max_units,
        )
        results = (
            self.llm.run_many([self._extract_pack([texts[i] for i in p]) for p in packs])
            if packs
            else []
        )
        self.n_calls = (len(packs) + 2 * self.n_splits) * (1 + self.settings.gleanings)

        ents: dict[str, list] = {c: [] for c in ("text_unit_id", "title", "type", "description")}
        rels: dict[str, list] = {
            c: [] for c in ("text_unit_id", "source", "target", "type", "description", "weight")
        }
        fallback: list[int] = []
        for pack, res in zip(packs, results, strict=True):
            for i, graph in zip(pack, res, strict=True):
                if isinstance(graph, str):
                    self.failures.append({"text_unit_id": ids[i], "reason": graph})
                    fallback.append(i)
                    continue
                e_rows, r_rows = unit_rows(texts[i], graph)
                for title, typ, desc in e_rows:
                    for col, v in zip(ents, (ids[i], title, typ, desc), strict=True):
                        ents[col].append(v)
                for row in r_rows:
                    for col, v in zip(rels, (ids[i], *row), strict=True):
                        rels[col].append(v)

        meta = [
            pl.lit(self.name).alias("extractor"),
            pl.lit(self.model).alias("model"),
            pl.lit(self.prompt_hash).alias("prompt_hash"),
        ]
        e_df = pl.DataFrame(ents, schema={k: pl.Utf8 for k in ents}).with_columns(meta)
        r_df = pl.DataFrame(
            rels, schema={**{k: pl.Utf8 for k in rels if k != "weight"}, "weight": pl.Float64}
        ).with_columns(meta)
        e_df = e_df.select(schemas.EXTRACTED_ENTITIES.names)
        r_df = r_df.select(schemas.EXTRACTED_RELATIONSHIPS.names)
        if fallback:
            fb = units.with_row_index("_row").filter(pl.col("_row").is_in(fallback)).drop("_row")
            fe, fr = NlpExtractor(self.settings).extract(fb)
            e_df = pl.concat([e_df, fe])
            r_df = pl.concat([r_df, fr])
        return e_df, r_df

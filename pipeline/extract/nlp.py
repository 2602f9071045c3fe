"""Offline entity/relation extractor: patterns + small gazetteers + YAKE keyphrases.

Why not a statistical NER model: on MuSiQue a regex for capitalised spans and years linked
passages as well as spaCy's small model at ~1/250 of the cost (STACK-NOTES.md), and the
whole index must stay within 2x the embedding time. So the extractor is a handful of
compiled regexes per sentence plus one YAKE call per unit. This module composes the steps
(`NlpExtractor`, per text unit); each lives in its own module:

1. sentences (`pipeline.sentences`): a compact regex splitter (abbreviations and initials
   do not end a sentence; blank lines and short title lines do).
2. named spans (`spans`): runs of capitalised words (any script: the "uppercase letter"
   class is built from `str.isupper`) joined by lower-case name connectors ("Bank of
   England", "Charles de Gaulle"); split at capitalised function words; edge function
   words, Mr/Mrs-type honorifics and possessives stripped. A sentence-initial single word
   is kept only if the unit also capitalises it elsewhere, or a gazetteer knows it.
3. pattern mentions (`pattern_mentions`): dates ("19 May 2004", "December 1843",
   "15 мая 2018 года", years, decades), percents and money by regex; quoted title-case
   phrases as WORK_OF_ART; profession nouns.
4. typing (`entity_types`) by cheap evidence, strongest first: honorific/title, gazetteer
   (country, city, state, nationality, language, religion), keyword in the span (Street,
   River, War, Prize, Act, University, Bank, ...), acronym, context (profession or "said"
   next to it, "in/at/from X"), given name; a per-unit pass propagates PERSON from
   "Ebenezer Scrooge" to "Scrooge". Unknown spans get a measured fallback type
   (`_fallback_type`). Lookups go through `lexicon` (normalised gazetteer, function words).
5. CONCEPT (`keyphrases`): YAKE keyphrases that are all lower case (the capitalised ones
   duplicate 2.).
6. relations (`relations`): entity pairs in the same sentence (weight 1) or up to
   `max_relation_distance` sentences apart (weight 1/(1+d)); a few verb patterns between
   two typed mentions give a NEREL class, else RELATED_TO.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from pipeline import schemas
from pipeline.config import ExtractionSettings
from pipeline.extract import lexicon_preload
from pipeline.extract.entity_types import type_span, vote_types
from pipeline.extract.keyphrases import fast_keyphrases, yake_keyphrases
from pipeline.extract.lexicon import norm_tok
from pipeline.extract.mentions import Mention, evidence, is_occupied
from pipeline.extract.pattern_mentions import pattern_mentions
from pipeline.extract.relations import find_relations
from pipeline.extract.russian import (
    NATASHA_TYPES,
    PLACE_TYPES,
    lemma,
    russian_names,
    russian_patterns,
)
from pipeline.extract.spans import named_spans
from pipeline.lexical.analysis import language
from pipeline.sentences import sentence_kind, split_sentences

MODEL = "patterns+yake"


@dataclass
class _UnitResult:
    entities: list[tuple[str, str, str]] = field(default_factory=list)  # title, type, evidence
    relations: list[tuple[str, str, str, str, float]] = field(default_factory=list)


def _extract_unit(text: str, settings: ExtractionSettings) -> _UnitResult:
    sents = split_sentences(text)
    lang = language(text)
    mentions: list[Mention] = []
    occupied: list[list[tuple[int, int]]] = []
    for si, s in enumerate(sents):
        found, ranges = pattern_mentions(s, si, lang)
        mentions.extend(found)
        occupied.append(ranges)
        if lang == "ru":
            mentions.extend(_russian_mentions(s, si, ranges))
    for si, a, b, toks, norm, heading, honorific in named_spans(sents, occupied):
        s = sents[si]
        title = s[a:b]
        typ, conf = type_span(toks, norm, s, a, b, heading, honorific)
        mentions.append(Mention(title, typ, conf, si, a, b))

    types = vote_types(mentions)
    first: dict[str, Mention] = {}
    for m in sorted(mentions, key=lambda m: (m.sent, m.pos)):
        first.setdefault(m.title, m)

    ordered = list(first.values())
    cap = settings.max_entities_per_unit
    taken = {t.lower() for t in types}
    n_concepts = min(settings.keyphrases_per_unit, max(0, cap - len(ordered)))
    ordered = ordered[:cap]
    kept = {m.title for m in ordered}
    if settings.keyphrase_method == "yake":
        concepts = yake_keyphrases(text, lang, n_concepts, taken)
    else:
        concepts = fast_keyphrases(text, lang, n_concepts, taken)
    sent_lower = [s.lower() for s in sents]
    for c in concepts:
        for si, sl in enumerate(sent_lower):
            pos = sl.find(c)
            if pos >= 0:
                m = Mention(c, "CONCEPT", 1.0, si, pos, pos + len(c))
                ordered.append(m)
                mentions.append(m)
                types[c] = "CONCEPT"
                kept.add(c)
                break

    res = _UnitResult()
    said = _evidence_mentions(sents, mentions)
    for m in ordered:
        m = said.get(m.title, m)
        res.entities.append((m.title, types[m.title], evidence(sents[m.sent], m.pos)))
    res.relations.extend(
        find_relations(sents, mentions, types, kept, concepts, settings.max_relation_distance)
    )
    return res


def _evidence_mentions(sents: list[str], mentions: list[Mention]) -> dict[str, Mention]:
    """Each title's mention to quote, for titles the unit names more than once: the first in
    the unit's best sentence naming it, sentences graded by `sentence_kind` (a real sentence
    rather than a title line or heading, which says nothing of it; one opening "It", "But"
    or "…" last), earlier ones first."""
    counts = Counter(m.title for m in mentions)
    kinds: dict[int, int] = {}

    def kind(si: int) -> int:
        if si not in kinds:
            kinds[si] = sentence_kind(sents[si])
        return kinds[si]

    out: dict[str, Mention] = {}
    repeated = [m for m in mentions if counts[m.title] > 1]
    for m in sorted(repeated, key=lambda m: (kind(m.sent), m.sent, m.pos)):
        out.setdefault(m.title, m)
    return out


def _russian_mentions(s: str, si: int, occupied: list[tuple[int, int]]) -> list[Mention]:
    """natasha's names in Russian sentence `s`, titled by their lemma; their ranges join
    `occupied`, so the capitalised-run spans only add what natasha did not tag."""
    out = []
    for a, b, kind, name in russian_names(s):
        if is_occupied(occupied, a, b):
            continue
        typ = NATASHA_TYPES[kind]
        if kind != "PER":  # the gazetteer knows countries, cities, regions by name
            toks = name.split()  # the lemma: the gazetteer holds nominatives
            known, _ = type_span(toks, [norm_tok(t) for t in toks], s, a, b, False, False)
            if known in PLACE_TYPES:
                typ = known
        occupied.append((a, b))
        out.append(Mention(name, typ, 3.0, si, a, b))
    for a, b, typ in russian_patterns(s):
        if is_occupied(occupied, a, b):
            continue
        occupied.append((a, b))
        words = s[a:b]
        title = lemma(words) if typ in _LEMMA_TYPES and " " not in words else words
        out.append(Mention(title, typ, 2.0, si, a, b))
    return out


# Noun mentions titled by their dictionary form, so "журналиста" and "журналист" merge (an
# event verb keeps its form: "умер" is no "умереть").
_LEMMA_TYPES = frozenset({"PROFESSION", "DISEASE", "ORGANIZATION"})


# A run of 80+ printable ASCII characters without a space is no word of any language but data
# (base64, hashes, minified code, long URLs): blanked before extraction, or every capital in
# an 800 KB data-URI image would be an entity. Scripts without spaces (CJK) are not ASCII.
_NOT_WORDS = re.compile(r"[!-~]{80,}")


def _spaces(m: re.Match[str]) -> str:
    return " " * len(m.group())


class NlpExtractor:
    """Offline extractor; deterministic (no randomness, no model downloads)."""

    name = "nlp"

    def __init__(self, settings: ExtractionSettings):
        self.settings = settings

    def extract(self, text_units: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """text_units has at least columns id, text. Returns (extracted_entities,
        extracted_relationships) with exactly schemas.EXTRACTED_ENTITIES /
        EXTRACTED_RELATIONSHIPS columns."""
        lexicon_preload.wait()  # a preload in another thread ends first
        ents: dict[str, list] = {c: [] for c in ("text_unit_id", "title", "type", "description")}
        rels: dict[str, list] = {
            c: [] for c in ("text_unit_id", "source", "target", "type", "description", "weight")
        }
        for uid, text in zip(
            text_units.get_column("id").to_list(),
            text_units.get_column("text").to_list(),
            strict=True,
        ):
            if not text:
                continue
            text = _NOT_WORDS.sub(_spaces, unicodedata.normalize("NFC", text))
            r = _extract_unit(text, self.settings)
            for title, typ, ev in r.entities:
                ents["text_unit_id"].append(uid)
                ents["title"].append(title)
                ents["type"].append(typ)
                ents["description"].append(ev)
            for src, tgt, rel, ev, w in r.relations:
                rels["text_unit_id"].append(uid)
                rels["source"].append(src)
                rels["target"].append(tgt)
                rels["type"].append(rel)
                rels["description"].append(ev)
                rels["weight"].append(w)
        meta = [
            pl.lit(self.name).alias("extractor"),
            pl.lit(MODEL).alias("model"),
            pl.lit("").alias("prompt_hash"),
        ]
        e = pl.DataFrame(ents, schema={k: pl.Utf8 for k in ents}).with_columns(meta)
        r_df = pl.DataFrame(
            rels, schema={**{k: pl.Utf8 for k in rels if k != "weight"}, "weight": pl.Float64}
        ).with_columns(meta)
        return (
            e.select(schemas.EXTRACTED_ENTITIES.names),
            r_df.select(schemas.EXTRACTED_RELATIONSHIPS.names),
        )

"""Extraction stage: text units (id, text) in; per-unit extracted_entities and
extracted_relationships out (plus extraction_failures from `extract_resilient`).
`NlpExtractor` (`nlp`, composing `spans`, `pattern_mentions`, `entity_types`,
`keyphrases`, `relations` over `lexicon` and `gazetteer`) is the offline default;
`LlmExtractor` (`llm`) prompts a model; `get_extractor` picks one from
`ExtractionSettings.extractor`."""

from __future__ import annotations

from typing import Any, Protocol

import polars as pl

from pipeline import progress, schemas
from pipeline.config import ExtractionSettings
from pipeline.extract.nlp import NlpExtractor
from pipeline.storage.carry import Carry, base_rows, keyed, merge_in_order

__all__ = [
    "Extractor",
    "NlpExtractor",
    "extract_carried",
    "extract_resilient",
    "get_extractor",
    "kept_units",
]


class Extractor(Protocol):
    name: str

    def extract(self, text_units: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]: ...


def get_extractor(settings: ExtractionSettings, **kwargs: Any):
    """The extractor named by `settings.extractor` ("nlp" offline, "llm" prompted).

    The LLM extractor is imported lazily so the offline path never loads a client.
    """
    name = settings.extractor.lower()
    if name == "nlp":
        return NlpExtractor(settings)
    if name == "llm":
        from pipeline.extract.llm import LlmExtractor  # type: ignore[import-not-found]

        return LlmExtractor(settings, **kwargs)
    raise ValueError(f"unknown extractor {settings.extractor!r} (expected 'nlp' or 'llm')")


def extract_resilient(
    extractor: Extractor, text_units: pl.DataFrame, batch_size: int = 512
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(entities, relationships, failures): extraction in batches; a batch that raises is
    retried unit by unit, so one bad unit costs only itself and is recorded with its reason
    (the run goes on). Units an extractor handled by a fallback (its `failures` after a
    call, e.g. an LLM call that failed after retries) are recorded too. A fatal error (its
    `fatal` attribute: a refused API key) is raised: every unit would fail alike, and an index
    silently extracted offline is not what LLM mode asked for."""
    ents, rels, failures = [], [], []
    doc_of = (
        dict(text_units.select("id", "document_id").iter_rows())
        if "document_id" in text_units.columns
        else {}
    )

    def record_fallbacks() -> None:
        for f in getattr(extractor, "failures", None) or []:
            failures.append(
                {
                    "text_unit_id": f["text_unit_id"],
                    "document_id": doc_of.get(f["text_unit_id"]),
                    "extractor": extractor.name,
                    "reason": f["reason"],
                }
            )

    n = text_units.height
    starts = range(0, n, batch_size)
    for start in progress.iterate("extraction", starts, n, lambda at: min(batch_size, n - at)):
        batch = text_units.slice(start, batch_size)
        try:
            e, r = extractor.extract(batch)
            ents.append(e)
            rels.append(r)
            record_fallbacks()
            continue
        except Exception as exc:  # noqa: BLE001 - isolate the failing unit below
            if getattr(exc, "fatal", False):
                raise
        for unit in batch.iter_slices(1):
            try:
                e, r = extractor.extract(unit)
                ents.append(e)
                rels.append(r)
            except Exception as exc:  # noqa: BLE001 - recorded, not raised
                if getattr(exc, "fatal", False):
                    raise
                failures.append(
                    {
                        "text_unit_id": unit["id"][0],
                        "document_id": unit["document_id"][0]
                        if "document_id" in unit.columns
                        else None,
                        "extractor": extractor.name,
                        "reason": f"{type(exc).__name__}: {exc}",
                    }
                )

    def concat(frames: list[pl.DataFrame], name: str) -> pl.DataFrame:
        return pl.concat(frames) if frames else schemas.empty(name)

    return (
        concat(ents, "extracted_entities"),
        concat(rels, "extracted_relationships"),
        pl.DataFrame(failures, schema=schemas.empty("extraction_failures").schema),
    )


def kept_units(carry: Carry, shard: str) -> set[str]:
    """The text units of shard `shard` whose rows the base version holds (pipeline.storage.
    carry): its units less those whose extraction failed (tried again, LLM mode's timeouts
    and rate limits above all). A unit's id hashes its text (and its document's path), and
    its extraction reads its text alone (an LLM pack never crosses documents, and a unit's
    graph is remembered by its text), so its rows are what extracting it again writes."""
    if not carry.on(shard):
        return set()
    units = carry.base_shard("chunks", shard, ["id"]).get_column("id")
    failed = carry.base_shard("extraction_failures", shard, ["text_unit_id"])
    return set(units.to_list()) - set(failed.get_column("text_unit_id").to_list())


def extract_carried(
    extractor: Extractor, text_units: pl.DataFrame, carry: Carry, shard: str, kept: set[str]
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """`extract_resilient` over the units not in `kept` (`kept_units`); the rows of those
    in it are the base's, in the order extracting every unit writes them. An extractor
    that records what it used (LLM mode: `keep_units`) is told of the units carried."""
    keep = pl.col("id").is_in(list(kept))
    carried = text_units.filter(keep)
    ents, rels, failures = extract_resilient(extractor, text_units.filter(~keep))
    carry.count_keys(carried.height, text_units.height - carried.height)
    if not carried.height:
        return ents, rels, failures
    remember = getattr(extractor, "keep_units", None)
    if remember is not None:
        remember(carried.get_column("text").to_list())
    order, ids = text_units.get_column("id"), carried.get_column("id")

    def merged(name: str, fresh: pl.DataFrame) -> pl.DataFrame:
        base = base_rows(carry, name, shard, "text_unit_id", ids)
        return merge_in_order(name, order, base, keyed(fresh, "text_unit_id"))

    # rows by unit: an LLM unit that fell back offline has its rows in its place, not after
    # its batch's (the order of a run with fallbacks, which is not reproduced anyway)
    return merged("extracted_entities", ents), merged("extracted_relationships", rels), failures

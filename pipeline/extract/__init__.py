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

__all__ = ["Extractor", "NlpExtractor", "extract_resilient", "get_extractor"]


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

"""Entity/relation extractors. `NlpExtractor` is the offline default; `get_extractor` picks
one from `ExtractionSettings.extractor`."""

from __future__ import annotations

from typing import Any

from pipeline.config import ExtractionSettings
from pipeline.extract.nlp import NlpExtractor

__all__ = ["NlpExtractor", "get_extractor"]


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

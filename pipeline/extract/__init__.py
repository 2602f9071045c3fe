"""Entity/relation extractors. `NlpExtractor` is the offline default."""

from pipeline.extract.nlp import NlpExtractor

__all__ = ["NlpExtractor"]

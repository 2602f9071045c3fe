"""Settings of the vector stages: the embedding model, how each table's vectors are made,
and the SAME_TOPIC edges derived from them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipeline.config.section import Section

PACKAGED_MODEL = "packaged:all-MiniLM-L6-v2"
# all-MiniLM-L6-v2 was trained on English pairs: on Russian questions over Russian paragraphs
# (xquad_ru) it ranks the gold paragraph in the top 5 for 43 of 100, BM25 for 99.
PACKAGED_LANGUAGES = ("en",)


class EmbeddingSettings(Section):
    model: str = Field(
        PACKAGED_MODEL, description="sentence-transformers name or path, or the packaged model"
    )
    languages: list[str] | None = Field(
        None,
        description="languages (ISO 639-1, as documents record them) the model reads; a query "
        "in another is ranked by BM25 and names alone, no dense signal. Unset: English for the "
        "packaged model, every language for a model you name",
    )
    batch_tokens: int = Field(
        1024,
        ge=1,
        description="padded tokens per forward pass (texts x the longest one's tokens). On "
        "CPU a pass's activations should fit in cache: on MuSiQue 1,024 embeds the entity "
        "titles 1.8x and the text units 1.1x faster than the 2,048-token passes sized by a "
        "character estimate used before (1.07x / 1.05x faster than 4,096); raise it on a GPU",
    )
    batch_size: int = Field(256, ge=1, description="texts per forward pass at most")
    device: str = "cpu"
    process: Literal["worker", "inline"] = Field(
        "worker",
        description="where an index runs the model: worker: a child process (the index's own "
        "process never loads torch, ~450 MB less, and it can go on while texts embed); "
        "inline: in the index's process. Queries always embed inline.",
    )
    entity_vectors: Literal["name+context", "text"] = Field(
        "name+context",
        description="name+context: the embedded title plus the mean of its text units' vectors;"
        " text: embed 'title (TYPE): description' (several times slower on CPU)",
    )
    title_vectors: Literal["static", "model"] = Field(
        "static",
        description="name+context, where the title's vector comes from: static: the sum of "
        "its tokens' context-free states, a table the worker computes once per model beside "
        "its ONNX export (no forward pass; pipeline.vectors.static_titles); model: embed the "
        "title. On MuSiQue static made the entities_vectors step 9.0 s -> 1.5 s, R@5 local "
        "74.3 (74.8 with model), expand 72.1 (72.9), flow 70.6 (70.6), "
        "flow quick 64.3 (65.8); a model without an ONNX export embeds its titles",
    )
    title_min_units: int = Field(
        1,
        ge=1,
        description="name+context: give a named entity's vector a title part only when it is "
        "in this many text units (fewer: the mean of its units' vectors alone). With "
        "title_vectors: model, 2 embeds ~80% fewer titles: MuSiQue indexed in 38.7 s instead "
        "of 45.9 s, R@5 local 75.3 (74.8 with 1), expand 71.6 (72.9), flow 70.6 (70.6), flow "
        "quick 64.0 (65.8)",
    )
    relationship_vectors: Literal["titles+units", "context", "text"] = Field(
        "titles+units",
        description="titles+units: the title parts of its source and target entities' "
        "name+context vectors + mean of its own text units' vectors (no model call; an edit "
        "changes only the relationships it mentions); context: source + target entity "
        "vectors + mean of its text units' vectors (an edit mentioning an entity changes "
        "every relationship of it: a one-file edit at 2k documents rewrote 123 relationship "
        "vectors for 8 changed relationships); text: embed 'source -> target: description'. "
        "Only flow quick reads them: MuSiQue R@5 64.9 (66.2 with context; paired 95% "
        "interval -3.5 to +0.5, 5 of 100 questions differ), R@2 49.1 (47.9); grb_novel equal",
    )
    node_vectors: Literal["derived", "text"] = Field(
        "derived",
        description="derived: PARAGRAPH/LIST_ITEM nodes take the mean vector of the text units "
        "holding them (no model call), other node types are embedded; text: embed every node",
    )
    report_vectors: Literal["context", "text"] = Field(
        "context",
        description="context: mean of the member entities' vectors (no model call);"
        " text: embed the report's full content",
    )

    def reads(self, language: str) -> bool:
        """Whether the model reads text in `language` (see `languages`)."""
        langs = self.languages
        if langs is None:
            langs = PACKAGED_LANGUAGES if self.model == PACKAGED_MODEL else None
        return langs is None or language in langs


class SameTopicSettings(Section):
    enabled: bool = True
    min_similarity: float = Field(0.6, description="cosine of two sections' vectors to link")
    max_connections: int = Field(5, description="SAME_TOPIC edges per section at most")
    cross_doc_only: bool = Field(True, description="link sections of different documents only")
    vectors: Literal["units", "text"] = Field(
        "units",
        description="units: a section's vector is the mean of its text units' vectors (no model"
        " call); text: embed its path and first `text_tokens` tokens",
    )
    text_tokens: int = Field(
        128, description="text: a section's vector embeds its path and its first N tokens"
    )
    exact_max_sections: int = Field(
        20_000,
        description="sections compared all with all (quadratic); above, each section with the"
        " sections of the `probes` inverted lists (k-means) nearest its own",
    )
    probes: int = Field(16, description="inverted lists searched per section above the exact max")

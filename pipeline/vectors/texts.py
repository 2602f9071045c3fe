"""The text each vector table embeds and stores: one short rendering per row.

The stored (full-text indexed) `text` column is the same string the model embeds: a text
unit's own text, "title (TYPE): description", "a -> b: description", the report truncated.
"""

from __future__ import annotations

import polars as pl

from pipeline import schemas
from pipeline.tokens import truncate_tokens

# Token caps on the embedded text (the stored `text` column is the same string).
ENTITY_TOKENS = 100
RELATIONSHIP_TOKENS = 100
REPORT_TOKENS = 256
NODE_TOKENS = 256
TEXT_UNIT_TOKENS = 512


def _truncate(
    texts: list[str], max_tokens: int, counts: list[int | None] | None = None
) -> list[str]:
    """Each text cut to `max_tokens` tokens. Only a text that may be longer is encoded: not
    one of <= max_tokens characters (a token is at least one), nor one whose token count is
    known (`counts`, the chunker's exact o200k count of a unit's text) to be within it."""
    known = counts if counts is not None else [None] * len(texts)
    return [
        t
        if len(t) <= max_tokens or (n is not None and n <= max_tokens)
        else truncate_tokens(t, max_tokens)
        for t, n in zip(texts, known, strict=True)
    ]


def embedding_text(name: str, frame: pl.DataFrame) -> list[str]:
    """The string embedded (and full-text indexed) for each row of table `name`."""
    if frame.height == 0:
        return []
    if name == "text_units":
        texts = frame["text"].fill_null("").to_list()
        counts = frame["n_tokens"].to_list() if "n_tokens" in frame.columns else None
        return _truncate(texts, TEXT_UNIT_TOKENS, counts)
    if name == "entities":
        texts = frame.select(
            pl.concat_str(
                pl.col("title").fill_null(""),
                pl.lit(" ("),
                pl.col("type").fill_null(""),
                pl.lit("): "),
                pl.col("description").fill_null(""),
            )
        ).to_series()
        return _truncate(texts.to_list(), ENTITY_TOKENS)
    if name == "relationships":
        texts = frame.select(
            pl.concat_str(
                pl.col("source").fill_null(""),
                pl.lit(" -> "),
                pl.col("target").fill_null(""),
                pl.lit(": "),
                pl.col("description").fill_null(""),
            )
        ).to_series()
        return _truncate(texts.to_list(), RELATIONSHIP_TOKENS)
    if name == "community_reports":
        texts = frame.select(
            pl.when(pl.col("full_content").fill_null("") != "")
            .then(pl.col("full_content"))
            .otherwise(pl.concat_str(pl.col("title"), pl.lit("\n"), pl.col("summary")))
            .fill_null("")
        ).to_series()
        return _truncate(texts.to_list(), REPORT_TOKENS)
    if name == "content_nodes":
        texts = frame.select(
            pl.when(pl.col("text").fill_null("").str.strip_chars() != "")
            .then(pl.col("text"))
            .otherwise(pl.col("description"))
            .fill_null("")
        ).to_series()
        return _truncate(texts.to_list(), NODE_TOKENS)
    raise ValueError(f"no vector table {name!r}; known: {sorted(schemas.VECTOR_TABLES)}")

"""The text of each vector table's rows: one short rendering per row.

A row's rendering (`row_text`) is a text unit's own text, "title (TYPE): description",
"a -> b: description", a report's content. What the model reads (`embedding_text`) is that
rendering cut to the table's token cap; the stored, full-text indexed `text` column of a
Lance table is the whole rendering (pipeline.vectors.lance): the cap bounds the model's work,
and every word stays searchable, as GraphRAG's vector stores keep whole texts. (Under the
default derived vectors the model reads none of the graph tables' texts.)
"""

from __future__ import annotations

import polars as pl

from pipeline import schemas
from pipeline.tokens import truncate_tokens

# Token caps on the text the model embeds.
ENTITY_TOKENS = 100
RELATIONSHIP_TOKENS = 100
REPORT_TOKENS = 256
NODE_TOKENS = 256
TEXT_UNIT_TOKENS = 512
CAPS = {
    "text_units": TEXT_UNIT_TOKENS,
    "entities": ENTITY_TOKENS,
    "relationships": RELATIONSHIP_TOKENS,
    "community_reports": REPORT_TOKENS,
    "content_nodes": NODE_TOKENS,
}


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


def _joined(*parts: str) -> pl.Expr:
    """Columns (parts 1, 3, 5...; a null read as "") joined by the literal separators between."""
    return pl.concat_str(
        [pl.col(p).fill_null("") if i % 2 == 0 else pl.lit(p) for i, p in enumerate(parts)]
    )


def row_text(name: str, frame: pl.DataFrame) -> pl.Series:
    """The whole rendering of each row of table `name` (a string column, never null)."""
    if name not in CAPS:
        raise ValueError(f"no vector table {name!r}; known: {sorted(schemas.VECTOR_TABLES)}")
    if frame.height == 0:
        return pl.Series("text", [], dtype=pl.String)
    if name == "text_units":
        rendering = pl.col("text")
    elif name == "entities":
        rendering = _joined("title", " (", "type", "): ", "description")
    elif name == "relationships":
        rendering = _joined("source", " -> ", "target", ": ", "description")
    elif name == "community_reports":
        rendering = (
            pl.when(pl.col("full_content").fill_null("") != "")
            .then(pl.col("full_content"))
            .otherwise(pl.concat_str(pl.col("title"), pl.lit("\n"), pl.col("summary")))
        )
    else:  # content_nodes: a node without text (a figure) by its description
        rendering = (
            pl.when(pl.col("text").fill_null("").str.strip_chars() != "")
            .then(pl.col("text"))
            .otherwise(pl.col("description"))
        )
    return frame.select(rendering.fill_null("").alias("text")).to_series()


def embedding_text(name: str, frame: pl.DataFrame) -> list[str]:
    """The string the model embeds for each row of table `name`: its rendering cut to the
    table's token cap (a text unit by its known token count)."""
    texts = row_text(name, frame).to_list()
    counts = None
    if name == "text_units" and "n_tokens" in frame.columns:
        counts = frame["n_tokens"].to_list()
    return _truncate(texts, CAPS[name], counts)

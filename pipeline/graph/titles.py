"""Entity titles: the display form of a surface title and the key entities merge on.

Why its own module: one normalisation for the extractive merge (pipeline.graph.merge) and the
LLM summaries (pipeline.graph.summarize_llm), so both group the same surface forms. The key:
NFKC, casefold, punctuation, possessives and a leading article dropped, Russian words crudely
stemmed so "Москва"/"Москве" meet. GraphRAG upper-cases titles, we keep a readable one.
"""

from __future__ import annotations

import re
import unicodedata

import polars as pl

from pipeline.extract.lexicon import ru_stem

_QUOTES = "\"'“”‘’«»„`´"
_POSSESSIVE_RE = re.compile(r"['’]s\b|(?<=s)['’](?=\s|$)", re.IGNORECASE)
_KEY_PUNCT_RE = re.compile(r"[^\w\s&+#]")
_CYR_RE = re.compile(r"[а-яё]", re.IGNORECASE)
_LEADING_ARTICLES = frozenset({"the", "a", "an"})


def normalize_title(title: str) -> str:
    """Display form of a surface title: NFKC, whitespace collapsed, outer quotes and
    brackets and a trailing possessive removed. Case is kept ("Scrooge's" -> "Scrooge")."""
    t = " ".join(unicodedata.normalize("NFKC", title).split())
    t = t.strip(_QUOTES + "()[]{}<>,;:!?*_ ").rstrip(".") if len(t) > 3 else t.strip(_QUOTES)
    if t[-2:] in ("'s", "’s", "'S", "’S") and len(t) > 2:
        t = t[:-2]
    return t.rstrip("'’ ")


def title_key(title: str) -> str:
    """Merge key of a title: case, punctuation, possessives and a leading article ignored.

    "Scrooge", "SCROOGE", "Scrooge's" and "the Scrooge" share a key; "U.S." meets "US";
    Cyrillic words are stemmed ("Москве" -> "москв").
    """
    t = unicodedata.normalize("NFKC", title).casefold()
    t = _POSSESSIVE_RE.sub("", t).replace(".", "")
    t = _KEY_PUNCT_RE.sub(" ", t).replace("_", " ")
    words = t.split()
    if len(words) > 1 and words[0] in _LEADING_ARTICLES:
        words = words[1:]
    return " ".join(ru_stem(w) if _CYR_RE.search(w) else w for w in words)


def key_map(titles: pl.Series) -> pl.DataFrame:
    """(surface, key, display) for each distinct surface title."""
    uniq = titles.drop_nulls().unique().cast(pl.Utf8).sort().to_list()
    return pl.DataFrame(
        {
            "surface": uniq,
            "key": [title_key(t) for t in uniq],
            "display": [normalize_title(t) for t in uniq],
        },
        schema={"surface": pl.Utf8, "key": pl.Utf8, "display": pl.Utf8},
    )


def unit_titles(
    units: pl.DataFrame, documents: pl.DataFrame, sections: pl.DataFrame
) -> pl.DataFrame:
    """(text_unit_id, title, seq): the titles of the document and of the sections (the
    section's path, root down) each text unit (id, document_id, section_id, seq) is in,
    with the unit's position in its document: the names of what the unit is about, for
    `merge_graph`'s `homes`."""
    unit = [pl.col("id").alias("text_unit_id"), "seq"]
    docs = units.join(
        documents.select(pl.col("id").alias("document_id"), "title"), on="document_id"
    ).select(*unit, "title")
    secs = (
        units.join(sections.select(pl.col("id").alias("section_id"), "path"), on="section_id")
        .select(*unit, pl.col("path").alias("title"))
        .explode("title")
    )
    both = pl.concat([docs, secs]).with_columns(pl.col("title").cast(pl.Utf8).str.strip_chars())
    return both.filter(pl.col("title").str.len_chars() > 0).unique(maintain_order=True)

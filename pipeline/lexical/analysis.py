"""Text -> stemmed terms for the BM25 index and its queries, the same analyser on both sides.

Words are runs of letters and digits (`[^\\W_]+`), lower-cased, "ё" read as "е". Each distinct
word is stemmed once (Snowball, PyStemmer): a word with a Cyrillic letter by the Russian
stemmer, any other by the stemmer of `latin` (the language of the corpus' Latin-script
documents, English by default), so a Russian corpus quoting English names, or an English one
quoting Russian, matches both in their own forms ("Москвы" and "Москва" -> "москв"). Stop
words of both languages are dropped (bm25s' lists). The work is vectorised in polars: only the
vocabulary goes through Python, so 100k units analyse in seconds.
"""

from __future__ import annotations

import re
from functools import cache

import polars as pl

WORD = r"[^\W_]+"
CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_CYR_LETTER = re.compile(r"[а-яё]", re.IGNORECASE)
_LATIN_LETTER = re.compile(r"[a-z]", re.IGNORECASE)
# Snowball stemmers by the ISO 639-1 code documents record (pipeline/ingest/loader.py).
STEMMERS = {
    "en": "english",
    "ru": "russian",
    "de": "german",
    "fr": "french",
    "es": "spanish",
    "it": "italian",
    "pt": "portuguese",
    "nl": "dutch",
}
DEFAULT_LATIN = "en"


@cache
def _stemmer(language: str):
    import Stemmer

    return Stemmer.Stemmer(STEMMERS.get(language, STEMMERS[DEFAULT_LATIN]))


@cache
def stop_words() -> frozenset[str]:
    """English and Russian stop words (bm25s' lists), in the analyser's own form."""
    from bm25s import stopwords

    words = set(stopwords.STOPWORDS_EN) | set(stopwords.STOPWORDS_RUSSIAN)
    return frozenset(w.lower().replace("ё", "е") for w in words)


def language(text: str) -> str:
    """ "ru" or "en": the script with more letters in the first 2000 characters."""
    sample = text[:2000]
    if _CYR_LETTER.search(sample) is None:  # most texts: no letter to count
        return "en"
    cyr = len(_CYR_LETTER.findall(sample))
    lat = len(_LATIN_LETTER.findall(sample))
    return "ru" if cyr > lat else "en"


def stem_words(words: list[str], latin: str = DEFAULT_LATIN) -> list[str | None]:
    """Each word's stem (None for a stop word): Cyrillic words by the Russian stemmer."""
    stops = stop_words()
    cyr = [bool(CYRILLIC.search(w)) for w in words]
    ru = _stemmer("ru").stemWords([w for w, c in zip(words, cyr, strict=True) if c])
    other = _stemmer(latin).stemWords([w for w, c in zip(words, cyr, strict=True) if not c])
    ru_it, other_it = iter(ru), iter(other)
    stems = [next(ru_it) if c else next(other_it) for c in cyr]
    return [None if w in stops else s for w, s in zip(words, stems, strict=True)]


def words_frame(texts: pl.Series) -> pl.DataFrame:
    """(doc, word) for every word of every text, in order (doc = the text's position)."""
    return (
        pl.DataFrame({"text": texts.fill_null("")})
        .with_row_index("doc")
        .select(
            "doc",
            word=pl.col("text").str.to_lowercase().str.replace_all("ё", "е").str.extract_all(WORD),
        )
        .explode("word")
        .drop_nulls("word")
    )


def term_frame(texts: pl.Series, latin: str = DEFAULT_LATIN) -> pl.DataFrame:
    """(doc, term) for every non-stop word of every text, stemmed."""
    words = words_frame(texts)
    vocab = words["word"].unique(maintain_order=True)
    stems = pl.DataFrame(
        {"word": vocab, "term": stem_words(vocab.to_list(), latin)},
        schema={"word": pl.Utf8, "term": pl.Utf8},
    ).drop_nulls("term")
    return words.join(stems, on="word", how="inner", maintain_order="left").select("doc", "term")


def query_terms(query: str, latin: str = DEFAULT_LATIN) -> list[str]:
    """The query's terms, analysed as the indexed text was."""
    return term_frame(pl.Series([query]), latin)["term"].to_list()

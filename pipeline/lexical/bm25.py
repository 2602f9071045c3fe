"""The BM25 index over a table's texts: built at index time, read at query time.

Library: `bm25s` (MIT; BM25 scores precomputed into a sparse matrix, scipy/numpy only, saved
as .npy files that load memory-mapped). Chosen over Lance's own full-text index, which the
vector tables keep: Lance returns a top-k per query, not a score for every row (the modes mix
a score into every unit), and analyses a table in one language. `benchmarks/lexical.py` at
45k units (the 40k-document run's count): bm25s 3.1 s to build with this analyser, 16 MB,
318 MB peak, 1.4 ms for all scores of a query; Lance 1.6 s, 20 MB, 383 MB, 4.0 ms for a top 10.

Layout: `<version>/lexical/<table>/` holds bm25s' files, `ids.parquet` (the row ids in index
order) and `analysis.json` (the analyser: the Latin-script stemmer's language; the rows per
document language, whose commonest is the corpus' language). Written to a
temporary folder and renamed into place, so a reader never sees half an index.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.lexical.analysis import DEFAULT_LATIN, STEMMERS, query_terms, term_frame
from pipeline.lexical.bm25_scores import Counts, counts_of, score_matrix
from pipeline.storage.files import umask

LEXICAL_DIR = "lexical"
ANALYSIS = "analysis.json"
IDS = "ids.parquet"
PARAMS = "params.index.json"  # bm25s' own file: absent when there was no term to index
# Each row's distinct terms (ids of this index' vocabulary) in first-occurrence order and
# their counts: what the next run's index is built from for the rows it keeps
# (pipeline.lexical.bm25_carry); the query side never reads it.
TERMS = "terms.parquet"
# Okapi BM25 with Lucene's idf, k1 1.5 / b 0.75: bm25s' defaults, the usual ones (Robertson
# & Zaragoza 2009 give k1 1.2-2.0, b 0.75); not tuned on any set of ours.
K1, B = 1.5, 0.75
# Texts analysed at a time: their words, terms and ids are held at once (a few hundred MB at
# 20k units of 300 tokens) and counted (bm25_scores.counts_of); what stays is 12 bytes a
# distinct term of a unit.
BUILD_BATCH = 20_000


def index_dir(root: Path, table: str) -> Path:
    return Path(root) / LEXICAL_DIR / table


@dataclass
class LexicalIndex:
    """BM25 over the texts of one table, rows in `ids` order."""

    retriever: object | None  # bm25s.BM25; None when no text holds a term (nothing to rank)
    ids: list[str]
    latin: str = DEFAULT_LATIN
    languages: dict[str, int] = field(default_factory=dict)  # rows per document language
    counts: Counts | None = None  # what it was built from (written as TERMS)

    @property
    def corpus_language(self) -> str:
        """The language most rows are in (the latin stemmer's when none is recorded)."""
        return max(self.languages, key=lambda k: (self.languages[k], k), default=self.latin)

    @classmethod
    def build(
        cls,
        ids: list[str],
        texts: pl.Series,
        latin: str = DEFAULT_LATIN,
        languages: dict[str, int] | None = None,
    ) -> LexicalIndex:
        vocab: dict[str, int] = {}
        parts = []  # counted a batch at a time: counting sorts every term occurrence
        for at in range(0, len(texts), BUILD_BATCH):
            parts.append(counts_of(*_coded(texts.slice(at, BUILD_BATCH), latin, vocab)))
        return cls.from_counts(ids, Counts.concat(parts), vocab, latin, languages)

    @classmethod
    def from_counts(
        cls,
        ids: list[str],
        counts: Counts,
        vocab: dict[str, int],
        latin: str,
        languages: dict[str, int] | None,
    ) -> LexicalIndex:
        """The index of rows `ids` holding `counts` of the terms of `vocab` (numbered by
        first appearance)."""
        retriever = None
        if vocab:  # bm25s cannot index a corpus without a term (no unit, or stop words only)
            retriever = _retriever(counts, vocab)
        return cls(retriever, list(ids), latin, dict(languages or {}), counts)

    def save(self, folder: Path) -> None:
        """Into `folder`, replacing what is there in one rename."""
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        tmp.chmod(0o777 & ~umask())  # mkdtemp's 0700 is no folder mode a shared index gets
        try:
            if self.retriever is not None:
                self.retriever.save(str(tmp), show_progress=False)
            pl.DataFrame({"id": self.ids}, schema={"id": pl.Utf8}).write_parquet(tmp / IDS)
            if self.counts is not None:
                terms_frame(self.ids, self.counts).write_parquet(tmp / TERMS)
            analysis = {"latin": self.latin, "languages": self.languages}
            (tmp / ANALYSIS).write_text(json.dumps(analysis), encoding="utf-8")
            if folder.exists():
                shutil.rmtree(folder)  # its files may be links into the last version
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path) -> LexicalIndex | None:
        """The index saved in `folder`, memory-mapped; None when there is none (an index
        written before the lexical side: the modes then rank by the dense side alone)."""
        if not (folder / IDS).is_file():
            return None
        import bm25s

        retriever = None
        if (folder / PARAMS).is_file():
            retriever = bm25s.BM25.load(str(folder), mmap=True, show_progress=False, verbosity=0)
        ids = pl.read_parquet(folder / IDS)["id"].to_list()
        analysis = json.loads((folder / ANALYSIS).read_text(encoding="utf-8"))
        return cls(retriever, ids, analysis["latin"], analysis.get("languages", {}))

    @property
    def vocabulary(self) -> int:
        return len(self.retriever.vocab_dict) if self.retriever is not None else 0

    def rows_of(self, ids: pl.Series) -> np.ndarray:
        """This index's row of each of `ids` (-1: not in it), for `scores`."""
        rows = pl.DataFrame(
            {"id": self.ids, "row": np.arange(len(self.ids), dtype=np.int64)},
            schema={"id": pl.Utf8, "row": pl.Int64},
        )
        joined = ids.to_frame("id").join(rows, on="id", how="left", maintain_order="left")
        return joined["row"].fill_null(-1).to_numpy()

    def scores(self, query: str, rows: np.ndarray | None = None) -> np.ndarray:
        """BM25 score of every row (in `ids` order, or of each of `rows`: 0 for -1) for the
        query; zeros when no query term is in the index."""
        known = self.retriever.vocab_dict if self.retriever is not None else {}
        tids = [known[t] for t in query_terms(query, self.latin) if t in known]
        out = np.zeros(len(self.ids), dtype=np.float32)
        if tids:
            out = np.asarray(self.retriever.get_scores(tids), dtype=np.float32)[: len(self.ids)]
        if rows is None:
            return out
        return (
            np.where(rows >= 0, out[np.maximum(rows, 0)], 0.0) if out.size else np.zeros(rows.size)
        )


def _coded(texts: pl.Series, latin: str, vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' term ids (int32, text after text, in order) and each text's count of
    them; new terms added to `vocab`."""
    terms = term_frame(texts, latin)
    for term in terms["term"].unique(maintain_order=True).to_list():
        vocab.setdefault(term, len(vocab))
    tids = terms["term"].replace_strict(vocab, return_dtype=pl.Int32).to_numpy()
    return tids, np.bincount(terms["doc"].to_numpy(), minlength=len(texts))


def _retriever(counts: Counts, vocab: dict[str, int]):
    """A bm25s.BM25 holding what its `index((per_document_ids, vocab))` would hold, its
    score matrix built on whole arrays (pipeline.lexical.bm25_scores)."""
    import bm25s

    retriever = bm25s.BM25(k1=K1, b=B)
    retriever.scores = score_matrix(counts, len(vocab), K1, B)
    retriever.nonoccurrence_array = None  # what bm25s sets for its "lucene" method
    vocab[""] = max(vocab.values()) + 1  # bm25s' empty token (create_empty_token)
    retriever.vocab_dict = vocab
    retriever.unique_token_ids_set = set(vocab.values())
    return retriever


def terms_frame(ids: list[str], counts: Counts) -> pl.DataFrame:
    """TERMS: per row, its terms and their counts (lists, first-occurrence order)."""
    ends = np.zeros(counts.n_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(counts.doc, minlength=counts.n_docs), out=ends[1:])
    offsets = pa.array(ends, pa.int64())
    table = pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "terms": pa.LargeListArray.from_arrays(offsets, pa.array(counts.term, pa.int32())),
            "counts": pa.LargeListArray.from_arrays(offsets, pa.array(counts.tf, pa.int32())),
        }
    )
    return pl.from_arrow(table)  # type: ignore[return-value]


def corpus_latin(languages: pl.Series) -> str:
    """The language whose stemmer reads the corpus' Latin-script words: the most common
    recorded language other than Russian that has a stemmer, else English."""
    counts = languages.drop_nulls().filter(languages.drop_nulls() != "ru").value_counts(sort=True)
    for lang in counts[:, 0].to_list():
        if lang in STEMMERS:
            return lang
    return DEFAULT_LATIN


def unit_texts(units: pl.DataFrame, documents: pl.DataFrame) -> pl.Series:
    """What the index reads of each text unit (id, text, document_id): its document's title,
    then its text."""
    titles = documents.select(pl.col("id").alias("document_id"), "title")
    joined = units.select("text", "document_id").join(
        titles, on="document_id", how="left", maintain_order="left"
    )
    return joined.select(
        pl.concat_str([pl.col("title").fill_null(""), pl.col("text").fill_null("")], separator="\n")
    ).to_series()


def unit_languages(units: pl.DataFrame, documents: pl.DataFrame) -> dict[str, int]:
    """Text units per document language."""
    langs = documents.select(pl.col("id").alias("document_id"), "language")
    counts = units.select("document_id").join(langs, on="document_id", how="left")
    by_language = counts.group_by("language").len().sort("language")  # one order every run
    return {str(k): int(n) for k, n in by_language.iter_rows() if k is not None}


def unit_index(units: pl.DataFrame, documents: pl.DataFrame) -> LexicalIndex:
    """BM25 over the text units (id, text, document_id): each unit's text after its
    document's title, so a question naming a book, a page or a file finds its units (the
    dense side embeds the unit alone); Latin words stemmed in the corpus' language."""
    return LexicalIndex.build(
        units["id"].to_list(),
        unit_texts(units, documents),
        corpus_latin(documents["language"]),
        unit_languages(units, documents),
    )

"""The BM25 index after an edit: only the text units of documents the run added are
analysed; the others' terms come from the base version's index (issue 49).

BM25's scores depend on the whole corpus (IDF, the mean length), so every score is written
again, on whole arrays (pipeline.lexical.bm25_scores: ~0.5 s at 45k units). What an edit
need not redo is the analysis (words, stems, stop words: ~60% of a whole build): the base's
index keeps each unit's distinct terms and their counts (bm25.TERMS, ids of its vocabulary).
A unit keeps them when its document is unchanged (a unit's text is its document's title and
its own text, and its id hashes its document's path and its text).

Equality with a whole build: the vocabulary is numbered by first appearance over the units
in table order, which the kept first-occurrence order of each unit's terms gives again
(each unit's terms in order, the units in order, each term numbered where it first occurs);
the counts are the same, so the score matrix is (tests/test_lexical.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.lexical.analysis import term_frame
from pipeline.lexical.bm25 import (
    ANALYSIS,
    TERMS,
    LexicalIndex,
    corpus_latin,
    index_dir,
    unit_languages,
    unit_texts,
)
from pipeline.lexical.bm25_scores import Counts, counts_of
from pipeline.storage import store
from pipeline.storage.run_changes import RunChanges

VOCAB = "vocab.index.json"  # bm25s' vocabulary file (term -> id)


def read_base(folder: Path | None, latin: str) -> tuple[pl.DataFrame, list[str]] | str:
    """(TERMS rows, the base vocabulary's terms by id) of the index in `folder`, or why
    they cannot be used."""
    if folder is None or not (folder / TERMS).is_file():
        return f"the base version's index has no {TERMS}"
    try:
        analysis = json.loads((folder / ANALYSIS).read_text(encoding="utf-8"))
        vocab = json.loads((folder / VOCAB).read_text(encoding="utf-8"))
        terms = pl.read_parquet(folder / TERMS)
    except (OSError, ValueError) as exc:
        return f"the base version's index is unreadable ({exc})"
    if analysis.get("latin") != latin:
        return f"Latin words stemmed as {latin!r}, not {analysis.get('latin')!r}"
    by_id = [""] * len(vocab)
    for term, tid in vocab.items():
        by_id[tid] = term
    return terms, by_id


def carried_index(
    ids: pl.Series,
    fresh: pl.Series,
    texts: pl.Series,
    base: tuple[pl.DataFrame, list[str]],
    latin: str,
    languages: dict[str, int],
) -> LexicalIndex:
    """The index of rows `ids` (table order): rows where `fresh` is true are analysed from
    `texts` (theirs, in order), the others' terms taken from `base` (read_base)."""
    kept_terms, base_vocab = base
    rows = pl.DataFrame({"id": ids, "fresh": fresh}).with_row_index("row")
    flat = _kept_entries(rows, kept_terms)
    # new terms numbered after the base's; fresh rows' terms as (row, term id, count)
    words = term_frame(texts, latin)
    known = pl.DataFrame(
        {"term": base_vocab, "tid": np.arange(len(base_vocab), dtype=np.int64)},
        schema={"term": pl.Utf8, "tid": pl.Int64},
    )
    unseen = words.join(known, on="term", how="anti")["term"].unique(maintain_order=True)
    extra = pl.DataFrame(
        {"term": unseen, "tid": np.arange(len(unseen), dtype=np.int64) + len(base_vocab)},
        schema={"term": pl.Utf8, "tid": pl.Int64},
    )
    coded = words.join(pl.concat([known, extra]), on="term", how="left", maintain_order="left")
    lengths = np.bincount(coded["doc"].to_numpy(), minlength=len(texts))
    ours = counts_of(coded["tid"].to_numpy(), lengths)
    fresh_rows = rows.filter(pl.col("fresh"))["row"].to_numpy().astype(np.int64)
    row, tid, tf = _merged(flat, fresh_rows[ours.doc], ours.term, ours.tf)
    del flat, words, coded  # in (row, tid, tf) now: not held while the scores are made
    # numbered by first appearance over the rows in order, as a whole build numbers them: a
    # term's first position by one linear pass (np.unique's sort of every entry was 0.42 s
    # of a 1.9 s step at 40k documents)
    first = np.full(len(base_vocab) + len(unseen), len(tid), dtype=np.int64)
    np.minimum.at(first, tid, np.arange(len(tid), dtype=np.int64))
    present = np.flatnonzero(first < len(tid))
    by_first = present[np.argsort(first[present])]  # term ids in their new order
    rank = np.full(len(base_vocab) + len(unseen), -1, dtype=np.int64)
    rank[by_first] = np.arange(len(by_first))
    term = rank[tid]
    strings = base_vocab + unseen.to_list()
    vocab = {strings[t]: r for r, t in enumerate(by_first.tolist())}
    counts = Counts(row, term, tf, len(ids))
    return LexicalIndex.from_counts(ids.to_list(), counts, vocab, latin, languages)


def _kept_entries(rows: pl.DataFrame, kept_terms: pl.DataFrame) -> pl.DataFrame:
    """(row, terms, counts): one entry per term of each kept row (`rows`: row, id, fresh),
    from the base's TERMS rows."""
    kept = rows.filter(~pl.col("fresh")).join(
        kept_terms, on="id", how="left", maintain_order="left"
    )
    if kept["terms"].null_count():
        raise ValueError("a kept unit is not in the base's index")
    return kept.select("row", "terms", "counts").explode("terms", "counts").drop_nulls("terms")


def _merged(
    kept: pl.DataFrame, rows: np.ndarray, tids: np.ndarray, tfs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, term id, count) of the kept units' entries (`kept`: row, terms, counts, rows
    ascending) and the fresh ones (`rows` ascending, no row of `kept`), by row, each row's
    entries in their order: the fresh entries inserted where their rows fall (linear; a
    sort of every entry by row was 0.16 s at 40k documents)."""
    k_row = kept.get_column("row").cast(pl.Int64).to_numpy()
    at = np.searchsorted(k_row, rows)
    row = np.insert(k_row, at, rows)
    del k_row  # a column at a time: one int64 copy of the kept entries at once, not three
    tid = np.insert(kept.get_column("terms").cast(pl.Int64).to_numpy(), at, tids.astype(np.int64))
    tf = np.insert(kept.get_column("counts").cast(pl.Int64).to_numpy(), at, tfs.astype(np.int64))
    if len(row) and (np.diff(row) < 0).any():  # not as promised: sorted the slow way
        order = np.argsort(row, kind="stable")
        row, tid, tf = row[order], tid[order], tf[order]
    return row, tid, tf


# Past this share of units to analyse the index is built whole. A carried build also reads
# the base's terms and numbers the vocabulary again: measured at 45k units (docs/
# incremental.md) ~0.8 s of CPU plus the analysis of its share, against 1.4-2.0 s whole
# (0.6 of it with a third of the units analysed): it stops paying near 0.8; at half it
# costs ~3/4 of a whole build.
WHOLE_FRACTION = 0.5


def lexical_run(folder: Path, changes: RunChanges | None) -> tuple[LexicalIndex, dict]:
    """The BM25 index of `folder`'s text units, the terms of units of unchanged documents
    taken from `changes.base`'s index; and the metadata saying so."""
    units = store.read_table(folder, "text_units", ["id", "document_id"])
    docs = store.read_table(folder, "documents", ["id", "title", "language"])
    latin, languages = corpus_latin(docs["language"]), unit_languages(units, docs)
    reason = changes.whole if changes is not None else "no base version"
    base = None
    if reason is None:
        assert changes is not None and changes.base is not None
        found = read_base(index_dir(changes.base, "text_units"), latin)
        reason, base = (found, None) if isinstance(found, str) else (None, found)
    fresh = pl.Series("fresh", [True] * units.height, dtype=pl.Boolean)
    if base is not None and changes is not None:
        added = list(changes.of("documents").added)
        fresh = units.select(
            pl.col("document_id").is_in(added) | ~pl.col("id").is_in(base[0]["id"].implode())
        ).to_series()
        if fresh.sum() > WHOLE_FRACTION * units.height:
            reason = f"{fresh.sum()} of {units.height} units to analyse"
    if reason is not None or base is None:
        whole = store.read_table(folder, "text_units", ["id", "text", "document_id"])
        index = LexicalIndex.build(whole["id"].to_list(), unit_texts(whole, docs), latin, languages)
        return index, _meta(units.height, 0, "whole", reason or "")
    wanted = units.filter(fresh)
    read = (
        store.scan_table(folder, "text_units")
        .filter(pl.col("id").is_in(wanted["id"].implode()))
        .select("id", "text", "document_id")
        .collect()
    )
    read = wanted.select("id").join(read, on="id", how="left", maintain_order="left")
    index = carried_index(units["id"], fresh, unit_texts(read, docs), base, latin, languages)
    return index, _meta(wanted.height, units.height - wanted.height, "carried", "units changed")


def _meta(recomputed: int, carried: int, mode: str, reason: str) -> dict:
    return {
        "rows_recomputed": recomputed,
        "rows_carried": carried,
        "incremental": mode,
        "incremental_reason": reason,
    }

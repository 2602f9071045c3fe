"""bm25s' score matrix, built with whole-array numpy instead of bm25s' loops over documents.

Why: bm25s (0.3) builds its index a document at a time in Python (a Counter and a set
intersection per document, then a Python CSC pass): at 45k text units that was ~2/3 of
the lexical step (2.1 of 3.2 s, the analysis the rest), paid on every run, as IDF and the
mean length change with any edit. The same arithmetic on whole arrays: every array equals
bm25s' own to the bit (tests/test_lexical.py compares them), so the index files, the
scores a query gets and bm25s' loader are unchanged.

BM25 as bm25s computes it (method "lucene", Lucene's idf): per term t and document d with
term frequency tf and length |d| (terms), mean length L over the N documents,
    idf(t)  = log(1 + (N - df + 0.5) / (df + 0.5))      in float64, kept as float32
    score   = idf(t) * tf / (k1 * ((1 - b) + b * |d| / L) + tf)   in float64, kept as float32
stored column by column (term), rows (documents) ascending: data, indices, indptr.

The input is `Counts`: each document's distinct terms in the order they first occur in it,
with their frequencies. That order is what a vocabulary numbered by first appearance needs,
so an incremental build (pipeline.lexical.bm25_carry) keeps Counts, not token streams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class Counts:
    """Per document (ascending), its distinct terms in first-occurrence order, and their
    frequencies; `n_docs` counts the documents without a term too."""

    doc: np.ndarray
    term: np.ndarray
    tf: np.ndarray
    n_docs: int

    def lengths(self) -> np.ndarray:
        return np.bincount(self.doc, weights=self.tf, minlength=self.n_docs).astype(np.int64)

    @classmethod
    def concat(cls, parts: list[Counts]) -> Counts:
        """The counts of `parts`' documents one part after another; `parts` is emptied (each
        part's arrays let go as they are joined)."""
        start, n_docs = 0, sum(p.n_docs for p in parts)
        for part in parts:
            part.doc += start  # int32 plus a Python int stays int32 (< n_docs)
            start += part.n_docs
        columns = []
        for name in ("doc", "term", "tf"):
            columns.append(np.concatenate([getattr(p, name) for p in parts] or [_NONE]))
            for part in parts:
                setattr(part, name, _NONE)
        parts.clear()
        return cls(*columns, n_docs)


_NONE = np.zeros(0, dtype=np.int32)


def counts_of(tids: np.ndarray, lengths: np.ndarray) -> Counts:
    """Counts of documents whose term ids are `tids`, document after document, `lengths`
    terms each; int32 arrays (4 bytes an entry: at 198k text units of one 151 MB file, 14M
    entries). Its sort holds ~40 bytes a term occurrence: call it on a batch of documents
    at a time (LexicalIndex.build) and join them (Counts.concat)."""
    n_docs = len(lengths)
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    span = int(tids.max()) + 1 if len(tids) else 1
    key = doc * span + tids.astype(np.int64)
    _, first, tf = np.unique(key, return_index=True, return_counts=True)
    del key
    order = np.argsort(first, kind="stable")  # by document, then first occurrence
    first, tf = first[order], tf[order]
    return Counts(
        doc[first].astype(np.int32), tids[first].astype(np.int32), tf.astype(np.int32), n_docs
    )


# Entries scored at a time: the float64 temporaries of one block (8 MB each), not of every
# entry. At 45k text units (~5M entries) scoring all at once took the lexical step's peak
# 275 MB above its start (one-file edit at 40k documents, in-run); a block is ~1 ms of work.
SCORE_BLOCK = 1 << 20


def score_matrix(counts: Counts, n_vocab: int, k1: float, b: float) -> dict:
    """bm25s' `scores` dict (data, indices, indptr, num_docs) for `counts` (term ids < n_vocab)."""
    n_docs = counts.n_docs
    lengths = counts.lengths()
    avg_doc_len = lengths.mean() if n_docs else np.float64("nan")
    order = stable_order(counts.term)  # by (term, document): doc ascends
    df = np.bincount(counts.term, minlength=n_vocab)
    values, where = np.unique(df, return_inverse=True)
    idf = np.array([_idf(int(v), n_docs) for v in values], dtype=np.float32)[where]
    idf[df == 0] = 0.0
    data = np.empty(len(order), dtype=np.float32)
    indices = np.empty(len(order), dtype=np.int32)
    for at in range(0, len(order), SCORE_BLOCK):
        part = order[at : at + SCORE_BLOCK]
        term, row, tf = counts.term[part], counts.doc[part], counts.tf[part]
        doc_len = lengths[row]
        # bm25s: k1 * ((1 - b) + b * l_d / l_avg) + tf, in float64 with Python's operator order
        norm = k1 * ((1 - b) + (b * doc_len.astype(np.float64)) / avg_doc_len)
        tfc = tf.astype(np.float32).astype(np.float64)
        scores = idf[term].astype(np.float64) * (tfc / (norm + tfc))
        data[at : at + SCORE_BLOCK] = scores.astype(np.float32)
        indices[at : at + SCORE_BLOCK] = row
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    return {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}


def stable_order(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable") of non-negative integers below 2**32, by 16-bit
    digits: numpy sorts 16-bit integers by radix (linear), others by timsort. At 10k
    documents (0.78M entries, 14k terms) 5 ms against 46 ms; with two digits (3M entries,
    100k terms) 0.10 s against 0.18 s."""
    if len(values) == 0 or int(values.max()) >= 2**32 or int(values.min()) < 0:
        return np.argsort(values, kind="stable")
    order = np.argsort((values & 0xFFFF).astype(np.uint16), kind="stable")
    if int(values.max()) >> 16:
        order = order[np.argsort((values[order] >> 16).astype(np.uint16), kind="stable")]
    return order


def _idf(df: int, n_docs: int) -> float:
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))

"""One relevance score per text unit from the dense cosine and the BM25 score.

    hybrid = (1 - w) * cosine + w * top_cosine * bm25 / top_bm25

The BM25 side is scaled onto the cosine's own range (its best unit worth the best cosine), so
the modes that mix unit relevance with graph scores (rerank.fuse) keep the scale they were
built on, and w = 0 is the dense ranking exactly. A convex mix of scores, not reciprocal rank
fusion: measured outside the project on the shared sets (passage R@5, MiniLM + bm25s, same
run), RRF (k=60) lost 7-20 points to either mix on `grb_novel` and `xquad_ru`, since it throws
away how far apart the scores are; w = 0.5 was the best weight on those two sets and on
MuSiQue together (see benchmarks/retrieval.py and the retrieval section of the README).
"""

from __future__ import annotations

import numpy as np


def hybrid(dense: np.ndarray, lexical: np.ndarray | None, weight: float) -> np.ndarray:
    """The mix above (float64); `dense` alone when there is no lexical side or no match."""
    dense = np.asarray(dense, dtype=np.float64)
    if lexical is None or weight <= 0 or dense.size == 0:
        return dense
    top_lex = float(lexical.max())
    if top_lex <= 0:
        return dense
    top_dense = max(float(dense.max()), 0.0)
    return (1.0 - weight) * dense + weight * top_dense * (lexical / top_lex)

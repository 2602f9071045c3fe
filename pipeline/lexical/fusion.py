"""One relevance score per text unit from the dense cosine and the BM25 score.

    hybrid = (1 - w) * cosine + w * top_cosine * bm25 / top_bm25

The BM25 side is scaled onto the cosine's own range (its best unit worth the best cosine), so
the modes that mix unit relevance with graph scores (rerank.fuse) keep the scale they were
built on, and w = 0 is the dense ranking exactly. A convex mix of scores, not reciprocal rank
fusion: measured outside the project on the shared sets (passage R@5, MiniLM + bm25s, same
run), RRF (k=60) lost 7-20 points to either mix on `grb_novel` and `xquad_ru`, since it throws
away how far apart the scores are. The weight (query.lexical_weight, 0.4) was read off naive
search over the indexed units, R@5 by w in 0 / 0.3 / 0.4 / 0.5 / 0.6 / 1.0: MuSiQue 62.5 /
63.7 / 63.0 / 62.3 / 60.2 / 51.2, grb_novel 60.6 / 70.2 / 72.7 / 71.8 / 71.3 / 70.6 (the dense
side reads no Russian: xquad_ru ranks by BM25 alone, see IndexTables.dense_reads).
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

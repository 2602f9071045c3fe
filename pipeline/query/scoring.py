"""Score helpers every search mode shares: a deterministic top-k and the idf weight.

Kept apart from the index view so modes and the reranker rank without importing the index.
"""

from __future__ import annotations

import math

import numpy as np


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; ties broken by index (deterministic)."""
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        part = np.argpartition(-scores, k - 1)[:k]
        # Include every tie of the k-th score so the final order does not depend on partition.
        kth = scores[part].min()
        part = np.flatnonzero(scores >= kth)
    else:
        part = np.arange(n)
    order = np.lexsort((part, -scores[part]))
    return part[order][:k]


def idf_weight(df: float) -> float:
    return 1.0 / math.log1p(max(df, 1.0))

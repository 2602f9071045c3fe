"""Each section's nearest sections by cosine, for SAME_TOPIC: the same lists to the bit
whichever rows are searched together, so that an incremental run (pipeline.vectors.
topic_carry) that searches only the sections an edit touched finds what a full search finds.

Why "to the bit": a list keeps a section's top-k partners in the order (cosine descending,
row ascending), and an incremental run merges cosines computed today with cosines a past run
stored; one ulp of difference reorders near-ties. OpenBLAS computes an entry of a float32
matrix product identically in any product of large enough shape, but single rows (gemv) and
small products (its small-matrix kernels, M*N*K below ~460k measured on this machine's
Haswell build) round differently: `cosines` pads every product above that size. Top-k ties
are broken by row (row order is section-id order), not by argpartition's whim.

Exact search compares a row with every row (one list holding all rows); above
`exact_max_sections`, each row with the rows of its inverted list's `probes` nearest lists
(spherical k-means, `train_centroids`): the exact pass is quadratic (1M sections: ~3.8e14
multiply-adds), the lists' ~n^1.5 * probes.
"""

from __future__ import annotations

from functools import partial

import numpy as np

BLOCK_ELEMENTS = 1 << 23  # similarity entries per block (32 MiB of float32, ~4x in temporaries)
# Multiply-adds below which a product is padded with zero rows: 18x the largest product that
# took OpenBLAS' small-matrix path here (458,496; 468,480 already did not), as other CPUs'
# kernels draw the line elsewhere. Costs ~4 ms per padded product.
MIN_PRODUCT = 1 << 23

Found = tuple[np.ndarray, np.ndarray, np.ndarray]  # (row, partner row, cosine)


def cosines(q: np.ndarray, c: np.ndarray) -> np.ndarray:
    """q @ c.T (float32 rows), each entry the same float whatever else is in q and c: a
    product under MIN_PRODUCT gets zero rows, on the side where fewer make up the size, and
    it is made in float64 and rounded to float32. OpenBLAS' float32 kernels sum an entry in
    an order that depends on the shapes on some CPUs (its Haswell kernel, an AMD EPYC here:
    not even q @ q.T was symmetric); float64 sums differ only in bits that the rounding
    drops (200 random sub-products of 1,500 rows: 200 equal, against 0 in float32), at
    twice the float32 time (4k x 20k x 384: 1.97 s against 0.93)."""
    m, n, d = len(q), len(c), max(q.shape[1], 1)
    rows_q, rows_c = max(m, 2), max(n, 2)
    if m <= n:
        rows_q = max(rows_q, -(-MIN_PRODUCT // (rows_c * d)))
    else:
        rows_c = max(rows_c, -(-MIN_PRODUCT // (rows_q * d)))
    if rows_q > m:
        q = np.concatenate([q, np.zeros((rows_q - m, q.shape[1]), dtype=q.dtype)])
    if rows_c > n:
        c = np.concatenate([c, np.zeros((rows_c - n, c.shape[1]), dtype=c.dtype)])
    out = np.asarray(q, np.float64) @ np.asarray(c, np.float64).T
    return (out[:m, :n] if (rows_q, rows_c) != (m, n) else out).astype(np.float32)


def unit_rows(vectors: np.ndarray, in_place: bool = False) -> np.ndarray:
    """The rows scaled to unit length (zero rows stay zero), as float32; `in_place`: into
    `vectors` when they are float32 (the sections' at 40k documents: 60 MB not copied)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if in_place and vectors.dtype == np.float32:
        vectors /= np.where(norms == 0, 1.0, norms)
        return vectors
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def _empty() -> Found:
    none = np.zeros(0, dtype=np.int64)
    return none, none, np.zeros(0, dtype=np.float32)


def top_k_columns(s: np.ndarray, k: int) -> np.ndarray:
    """Per row of `s`, the columns of its k largest entries, ties by the lower column."""
    if k >= s.shape[1]:
        return np.broadcast_to(np.arange(s.shape[1]), (len(s), s.shape[1]))
    top = np.argpartition(-s, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(s, top, axis=1).min(axis=1)
    # a row with more entries >= its k-th than k: equal ones outside the selection
    tied = np.flatnonzero(np.isfinite(kth) & ((s >= kth[:, None]).sum(axis=1) > k))
    for r in tied.tolist():
        above = np.flatnonzero(s[r] > kth[r])
        equal = np.flatnonzero(s[r] == kth[r])[: k - len(above)]
        top[r] = np.concatenate([above, equal])
    return top


def top_among(
    queries: np.ndarray,
    candidates: np.ndarray,
    unit: np.ndarray,
    groups: np.ndarray | None,
    k: int,
    min_similarity: float,
    block_elements: int = BLOCK_ELEMENTS,
    lists: Lists | None = None,
) -> Found:
    """(query, candidate, cosine) for each query row's top-k candidate rows (`candidates`
    ascending) above `min_similarity`, itself and, with `groups`, its own group's rows
    excluded, and with `lists` the rows outside its list's probed lists; a block of query
    rows at a time (memory ~`block_elements` floats)."""
    # float64 once, not per block (cosines)
    cand = (unit if len(candidates) == len(unit) else unit[candidates]).astype(np.float64)
    cand_groups = None if groups is None else groups[candidates]
    kk = min(k, len(candidates))
    rows = max(1, block_elements // max(len(candidates), 1))
    srcs, dsts, sims = [], [], []
    for start in range(0, len(queries), rows):
        q = queries[start : start + rows]
        s = cosines(unit[q], cand)
        if groups is not None:  # also excludes the row itself
            s[groups[q][:, None] == cand_groups[None, :]] = -np.inf
        else:
            s[q[:, None] == candidates[None, :]] = -np.inf
        if lists is not None and lists.centroids is not None:
            s[~lists.compared(q, candidates)] = -np.inf
        s[s < min_similarity] = -np.inf
        top = top_k_columns(s, kk)
        val = np.take_along_axis(s, top, axis=1)
        ok = np.isfinite(val)
        srcs.append(np.broadcast_to(q[:, None], top.shape)[ok])
        dsts.append(candidates[top[ok]])
        sims.append(val[ok])
    if not srcs:
        return _empty()
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(sims)


def train_centroids(unit: np.ndarray, iterations: int = 8, seed: int = 0) -> np.ndarray:
    """Spherical k-means centroids (~sqrt(n)), trained on a seeded sample of 64 rows each."""
    n = unit.shape[0]
    n_lists = max(1, int(np.sqrt(n)))
    rng = np.random.default_rng(seed)
    train = unit[np.sort(rng.choice(n, size=min(n, 64 * n_lists), replace=False))]
    centroids = train[rng.choice(len(train), size=n_lists, replace=False)]
    for _ in range(iterations):
        nearest = _nearest_centroid(train, centroids)
        order = np.argsort(nearest, kind="stable")
        counts = np.bincount(nearest, minlength=n_lists)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        used = counts > 0
        sums = np.add.reduceat(train[order], starts[used], axis=0)
        centroids = centroids.copy()  # an empty list keeps its centroid
        centroids[used] = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return centroids


def _nearest_centroid(rows: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    step = max(1, BLOCK_ELEMENTS // len(centroids))
    return np.concatenate(
        [np.argmax(rows[i : i + step] @ centroids.T, axis=1) for i in range(0, len(rows), step)]
    )


def assign(unit: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each row's nearest centroid (the first of equals), the same for a row in any batch."""
    step = max(1, BLOCK_ELEMENTS // len(centroids))
    parts = [
        np.argmax(cosines(unit[i : i + step], centroids), axis=1) for i in range(0, len(unit), step)
    ]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def probed_lists(centroids: np.ndarray, probes: int) -> np.ndarray:
    """Each list's `probes` nearest lists (by their centroids), itself first."""
    between = cosines(centroids, centroids)
    np.fill_diagonal(between, np.inf)
    return np.argsort(-between, axis=1, kind="stable")[:, : max(1, min(probes, len(centroids)))]


def members_of(row_list: np.ndarray, n_lists: int) -> list[np.ndarray]:
    """Row indices of each list, ascending."""
    order = np.argsort(row_list, kind="stable")
    return np.split(order, np.cumsum(np.bincount(row_list, minlength=n_lists))[:-1])


def ivf_lists(
    unit: np.ndarray, probes: int, iterations: int = 8, seed: int = 0
) -> tuple[list[np.ndarray], np.ndarray]:
    """An inverted-file partition of unit rows: (row indices per list, each list's `probes`
    nearest lists, itself first); a list's rows are compared with the rows of those lists."""
    centroids = train_centroids(unit, iterations, seed)
    return members_of(assign(unit, centroids), len(centroids)), probed_lists(centroids, probes)


class Lists:
    """Which rows a row is compared with: those of the lists its own list probes (one list
    of every row: exact search). `centroids` None: exact."""

    def __init__(self, unit: np.ndarray, centroids: np.ndarray | None, probes: int) -> None:
        self.centroids, self.dim = centroids, max(unit.shape[1], 1)
        if centroids is None:
            self.row_list = np.zeros(len(unit), dtype=np.int64)
            self.probed = np.zeros((1, 1), dtype=np.int64)
        else:
            self.row_list = assign(unit, centroids)
            self.probed = probed_lists(centroids, probes)
        self.members = members_of(self.row_list, len(self.probed))
        self.probes = np.zeros((len(self.probed),) * 2, dtype=bool)  # [l, c]: l probes c
        np.put_along_axis(self.probes, self.probed, True, axis=1)

    def masked_is_cheaper(self, rows: np.ndarray, reverse: bool = False) -> bool:
        """Whether `rows` are cheaper searched against every row, the rows outside their
        candidates masked, than a list at a time: a product costs its multiply-adds but
        at least MIN_PRODUCT (a small one is padded; OpenBLAS also packs the candidates
        for each), so a few rows spread over many lists go together. `reverse`: the rows
        that compare with `rows` (the lists probing theirs), not those `rows` compare with."""
        if self.centroids is None:
            return True  # one list of every row
        counts = np.bincount(self.row_list[rows], minlength=len(self.probed))
        sizes = np.array([len(m) for m in self.members])
        probes = self.probes.T if reverse else self.probes
        per_list = np.maximum(counts * (probes @ sizes), MIN_PRODUCT // self.dim)[counts > 0]
        return len(rows) * len(self.row_list) <= per_list.sum()

    def probing(self, c: int) -> np.ndarray:
        """The lists whose rows compare with list `c`'s rows (those that probe it)."""
        return np.flatnonzero(self.probes[:, c])

    def compared(self, q: np.ndarray, c: np.ndarray) -> np.ndarray:
        """(len(q), len(c)) booleans: whether row c is among row q's candidates."""
        return self.probes[self.row_list[q][:, None], self.row_list[c][None, :]]

    def candidates(self, lists: np.ndarray | list[int]) -> np.ndarray:
        """The rows of `lists`, ascending."""
        parts = [self.members[c] for c in lists]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def neighbour_lists(
    unit: np.ndarray,
    groups: np.ndarray | None,
    lists: Lists,
    k: int,
    min_similarity: float,
    rows: np.ndarray | None = None,
    block_elements: int = BLOCK_ELEMENTS,
) -> Found:
    """(row, partner, cosine): the top-k partners of each of `rows` (all when None) among
    the rows of its list's probed lists, above `min_similarity` (never itself, nor with
    `groups` a row of its own group)."""
    if k <= 0 or len(unit) < 2:
        return _empty()
    search = partial(
        top_among,
        unit=unit,
        groups=groups,
        k=k,
        min_similarity=min_similarity,
        block_elements=block_elements,
    )
    if rows is not None and lists.masked_is_cheaper(rows):
        # few rows to search: all of them against every row, outside their lists masked
        return search(np.sort(rows), np.arange(len(unit)), lists=lists)
    wanted = None if rows is None else np.zeros(len(unit), dtype=bool)
    if wanted is not None:
        wanted[rows] = True
    found = []
    for c, near in enumerate(lists.probed):
        queries = lists.members[c] if wanted is None else lists.members[c][wanted[lists.members[c]]]
        if len(queries):
            found.append(search(queries, lists.candidates(near)))
    if not found:
        return _empty()
    return tuple(np.concatenate([f[i] for f in found]) for i in range(3))  # type: ignore[return-value]


def undirected(a: np.ndarray, b: np.ndarray, w: np.ndarray, n: int) -> Found:
    """Each pair once (lo < hi), ascending by (lo, hi)."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    _, first = np.unique(lo.astype(np.int64) * n + hi, return_index=True)
    return lo[first], hi[first], w[first]

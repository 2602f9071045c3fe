"""SAME_TOPIC edges: sections of (by default) different documents that talk about the same
thing, by the cosine of their embeddings.

A section's vector embeds "path\\n" plus the first `text_tokens` tokens of its own text (its
nodes, not its subsections', headings left to the path). One short string per section is the
cheap choice: the mean of its nodes' vectors would embed every node (~10x the strings on
Markdown docs) for a vector that the opening of a section already approximates. Sections
with no own text beyond a heading (a chapter that only holds subsections) get no vector and
no edge: a bare title such as "Introduction" would match every other "Introduction".

Measured on the pydantic docs (89 files, 664 sections, 639 with own text; MiniLM, 2 CPU
cores): path+128 tokens embeds 639 strings in ~40 s, the mean-of-nodes route would embed
3,261 nodes in ~70 s. Edges (max 5, cross-doc): 1,044 at min_similarity 0.5, 919 at 0.6,
527 at 0.7, 73 at 0.8; pairs near 0.6 are loosely related, near 0.85+ near-duplicates.

Neighbours are found by an exact blocked top-k: rows of the (n, dim) matrix are multiplied
by the whole matrix a block at a time, so memory stays ~BLOCK_ELEMENTS floats whatever n
(100k sections: ~80-row blocks, one 100k x 100k x 384 pass). Each section proposes its top
`max_connections` partners above `min_similarity`; the union is then thinned greedily, best
pair first, so that no section ends with more than `max_connections` edges.
"""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import SameTopicSettings
from pipeline.tokens import truncate_tokens

BLOCK_ELEMENTS = 1 << 23  # similarity entries per block (32 MiB of float32, ~4x in temporaries)
# Node types that are not a section's text: headings (the path says them), page furniture.
SKIP_TYPES = ("HEADING", "TITLE", "PAGE_NUMBER")


def section_texts(
    sections: pl.DataFrame, content_nodes: pl.DataFrame, text_tokens: int
) -> pl.DataFrame:
    """(id, document_id, text) per section with own text: 'A > B > C\\n' + its first tokens."""
    if sections.height == 0 or content_nodes.height == 0:
        return pl.DataFrame(schema={"id": pl.Utf8, "document_id": pl.Utf8, "text": pl.Utf8})
    own = (
        content_nodes.filter(
            ~pl.col("node_type").is_in(SKIP_TYPES) & (pl.col("text").str.strip_chars() != "")
        )
        .sort("seq_major", "seq_minor")
        .group_by("section_id", maintain_order=True)
        .agg(
            # a cheap character cap before the exact token cut (a token is >= 1 char)
            pl.col("text").str.join("\n").str.slice(0, text_tokens * 8).alias("body")
        )
    )
    joined = sections.select(
        "id", "document_id", pl.col("path").list.join(" > ").alias("head")
    ).join(own, left_on="id", right_on="section_id", how="inner")
    texts = [
        h + "\n" + truncate_tokens(b, text_tokens)
        for h, b in zip(joined["head"].to_list(), joined["body"].to_list(), strict=True)
    ]
    return joined.select("id", "document_id").with_columns(text=pl.Series(texts, dtype=pl.Utf8))


def top_pairs(
    vectors: np.ndarray,
    groups: np.ndarray,
    k: int,
    min_similarity: float,
    cross_group_only: bool,
    block_elements: int = BLOCK_ELEMENTS,
    exact_max: int | None = None,
    probes: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected pairs (a < b row indices, cosine) where b is among a's top-k or a among b's,
    above `min_similarity`, never a row with itself, optionally never within one group.
    Exact up to `exact_max` rows (all when None); above, each row's top-k among the rows of
    its list's `probes` nearest lists (`ivf_lists`): the exact pass is quadratic (1M
    sections: ~3.8e14 multiply-adds), the lists' ~n^1.5 * probes."""
    n = vectors.shape[0]
    k = min(k, n - 1)
    if n < 2 or k <= 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    search = partial(
        _top_among,
        unit=unit,
        groups=groups if cross_group_only else None,
        k=k,
        min_similarity=min_similarity,
        block_elements=block_elements,
    )
    if exact_max is None or n <= exact_max:
        found = [search(np.arange(n), None)]
    else:
        members, probed = ivf_lists(unit, probes)
        found = [
            search(members[c], np.concatenate([members[p] for p in near]))
            for c, near in enumerate(probed)
        ]
    a = np.concatenate([f[0] for f in found])
    b = np.concatenate([f[1] for f in found])
    w = np.concatenate([f[2] for f in found])
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    key = lo.astype(np.int64) * n + hi
    _, first = np.unique(key, return_index=True)
    return lo[first], hi[first], w[first]


def _top_among(
    queries: np.ndarray,
    candidates: np.ndarray | None,
    *,
    unit: np.ndarray,
    groups: np.ndarray | None,
    k: int,
    min_similarity: float,
    block_elements: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query, candidate, cosine) for each query row's top-k candidates (None: every row)
    above `min_similarity` (itself and, with `groups`, its own group's rows excluded), a block
    of query rows at a time: memory ~`block_elements` floats whatever the sizes."""
    if candidates is None:
        candidates, cand = np.arange(len(unit)), unit
    else:
        cand = unit[candidates]
    cand_groups = None if groups is None else groups[candidates]
    kk = min(k, len(candidates))
    rows = max(1, block_elements // max(len(candidates), 1))
    srcs, dsts, sims = [], [], []
    for start in range(0, len(queries), rows):
        q = queries[start : start + rows]
        s = unit[q] @ cand.T
        if groups is not None:  # also excludes the row itself
            s[groups[q][:, None] == cand_groups[None, :]] = -np.inf
        else:
            s[q[:, None] == candidates[None, :]] = -np.inf
        s[s < min_similarity] = -np.inf
        if kk < len(candidates):
            top = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
        else:
            top = np.broadcast_to(np.arange(kk), (len(q), kk))
        val = np.take_along_axis(s, top, axis=1)
        ok = np.isfinite(val)
        srcs.append(np.broadcast_to(q[:, None], top.shape)[ok])
        dsts.append(candidates[top[ok]])
        sims.append(val[ok])
    if not srcs:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(sims)


def ivf_lists(
    unit: np.ndarray, probes: int, iterations: int = 8, seed: int = 0
) -> tuple[list[np.ndarray], np.ndarray]:
    """An inverted-file partition of unit rows: spherical k-means (~sqrt(n) centroids,
    trained on a seeded sample of 64 rows per centroid), each row in its nearest centroid's
    list. Returns (row indices per list, each list's `probes` nearest lists, itself first):
    a list's rows are compared with the rows of those lists."""
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
    nearest = _nearest_centroid(unit, centroids)
    order = np.argsort(nearest, kind="stable")
    bounds = np.cumsum(np.bincount(nearest, minlength=n_lists))[:-1]
    members = np.split(order, bounds)
    between = centroids @ centroids.T
    np.fill_diagonal(between, np.inf)  # itself first
    probed = np.argsort(-between, axis=1, kind="stable")[:, : max(1, min(probes, n_lists))]
    return members, probed


def _nearest_centroid(rows: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    step = max(1, BLOCK_ELEMENTS // len(centroids))
    return np.concatenate(
        [np.argmax(rows[i : i + step] @ centroids.T, axis=1) for i in range(0, len(rows), step)]
    )


def cap_degree(
    a: np.ndarray, b: np.ndarray, w: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy: best pair first (ties by index), keep it while both ends have < k edges."""
    order = np.lexsort((b, a, -w))
    degree: dict[int, int] = {}
    keep = []
    for i in order.tolist():
        x, y = int(a[i]), int(b[i])
        if degree.get(x, 0) < k and degree.get(y, 0) < k:
            degree[x] = degree.get(x, 0) + 1
            degree[y] = degree.get(y, 0) + 1
            keep.append(i)
    sel = np.asarray(keep, dtype=np.int64)
    return a[sel], b[sel], w[sel]


def unit_section_vectors(
    sections: pl.DataFrame, text_units: pl.DataFrame, unit_ids: list[str], unit_vecs: np.ndarray
) -> tuple[pl.DataFrame, np.ndarray]:
    """(sections id/document_id, vectors): the mean of the vectors of the text units cut in
    each section — free once text units are embedded, and the same text they were cut from.
    Sections holding no unit of their own (bare chapters, merged tiny sections) get none."""
    from pipeline.vectors.derive_vectors import mean_vectors

    members = (
        text_units.select("section_id", "id")
        .drop_nulls("section_id")
        .group_by("section_id")
        .agg(pl.col("id").sort())
        .join(
            sections.select(pl.col("id").alias("section_id"), "document_id"),
            on="section_id",
            how="inner",
        )
        .sort("section_id")
    )
    dim = unit_vecs.shape[1] if unit_vecs.ndim == 2 else 0
    vecs = mean_vectors(members["id"], unit_ids, unit_vecs, dim)
    keep = np.flatnonzero(vecs.any(axis=1)) if len(vecs) else np.zeros(0, dtype=np.int64)
    rows = members.select(pl.col("section_id").alias("id"), "document_id")[keep]
    return rows, vecs[keep]


def same_topic_edges(
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    embedder,
    settings: SameTopicSettings,
    text_units: pl.DataFrame | None = None,
    unit_vectors: tuple[list[str], np.ndarray] | None = None,
) -> pl.DataFrame:
    """SAME_TOPIC rows of schemas.STRUCTURE_EDGES: source_id < target_id (each pair once),
    weight = cosine of the two sections' vectors, in (source_id, target_id) order. With
    settings.vectors == "units" (and the text units and their vectors given) no model call."""
    if not settings.enabled:
        return schemas.empty("structure_edges")
    if settings.vectors == "units" and text_units is not None and unit_vectors is not None:
        texts, vecs = unit_section_vectors(sections, text_units, *unit_vectors)
        method = "mean of text unit vectors"
    else:
        texts = section_texts(sections, content_nodes, settings.text_tokens).sort("id")
        vecs = np.zeros((0, 0), dtype=np.float32)
        method = f"path+{settings.text_tokens} tokens"
    if texts.height < 2:
        return schemas.empty("structure_edges")
    if not vecs.size:
        vecs = np.asarray(embedder.embed(texts["text"].to_list()), dtype=np.float32)
    groups = texts["document_id"].cast(pl.Categorical).to_physical().to_numpy()
    a, b, w = top_pairs(
        vecs,
        groups,
        settings.max_connections,
        settings.min_similarity,
        settings.cross_doc_only,
        exact_max=settings.exact_max_sections,
        probes=settings.probes,
    )
    a, b, w = cap_degree(a, b, w, settings.max_connections)
    ids = texts["id"]
    about = {"method": method}
    if texts.height > settings.exact_max_sections:  # the neighbours were searched approximately
        about["search"] = f"inverted lists, {settings.probes} probed per list"
    meta = json.dumps(about)
    edges = pl.DataFrame(
        {
            "source_id": ids.gather(a),
            "target_id": ids.gather(b),
            "type": "SAME_TOPIC",
            "weight": np.round(w.astype(np.float64), 6),
            "marker_text": "",
            "metadata": meta,
        }
    ).sort("source_id", "target_id")
    return pl.from_arrow(schemas.conform(edges, "structure_edges"))  # type: ignore[return-value]

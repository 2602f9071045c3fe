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

Neighbours are found by a blocked top-k (pipeline.vectors.topic_search): rows of the (n, dim)
matrix are multiplied by the whole matrix a block at a time, so memory stays ~BLOCK_ELEMENTS
floats whatever n (100k sections: ~80-row blocks, one 100k x 100k x 384 pass); above
`exact_max_sections` by inverted lists. Each section proposes its top `max_connections`
partners above `min_similarity` (its list); the union is then thinned greedily, best pair
first, so that no section ends with more than `max_connections` edges. After an edit only
the lists it can change are searched again (pipeline.vectors.topic_carry).
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import SameTopicSettings
from pipeline.tokens import truncate_tokens
from pipeline.vectors.topic_search import (
    BLOCK_ELEMENTS,
    Lists,
    ivf_lists,
    neighbour_lists,
    train_centroids,
    undirected,
    unit_rows,
)

__all__ = ["ivf_lists", "same_topic_edges", "section_vectors", "top_pairs"]

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
    Exact up to `exact_max` rows (all when None); above, among the rows of each row's
    inverted list's `probes` nearest lists (pipeline.vectors.topic_search)."""
    n = vectors.shape[0]
    unit = unit_rows(vectors)
    centroids = None if exact_max is None or n <= exact_max else train_centroids(unit)
    a, b, w = neighbour_lists(
        unit,
        groups if cross_group_only else None,
        Lists(unit, centroids, probes),
        min(k, n - 1),
        min_similarity,
        block_elements=block_elements,
    )
    return undirected(a, b, w, n)


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


def section_vectors(
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    embedder,
    settings: SameTopicSettings,
    text_units: pl.DataFrame | None = None,
    unit_vectors: tuple[list[str], np.ndarray] | None = None,
) -> tuple[pl.DataFrame, np.ndarray, str]:
    """(rows: id, document_id by id; their vectors; the method) of the sections that get a
    vector. With settings.vectors == "units" (the text units and their vectors given) no
    model call."""
    if settings.vectors == "units" and text_units is not None and unit_vectors is not None:
        rows, vecs = unit_section_vectors(sections, text_units, *unit_vectors)
        return rows, vecs, "mean of text unit vectors"
    texts = section_texts(sections, content_nodes, settings.text_tokens).sort("id")
    vecs = np.zeros((0, 0), dtype=np.float32)
    if texts.height >= 2:
        vecs = np.asarray(embedder.embed(texts["text"].to_list()), dtype=np.float32)
    return texts.select("id", "document_id"), vecs, f"path+{settings.text_tokens} tokens"


def group_codes(rows: pl.DataFrame) -> np.ndarray:
    """Each row's document as an integer (rows of one document share it)."""
    return rows["document_id"].cast(pl.Categorical).to_physical().to_numpy()


def edges_frame(
    ids: pl.Series, found: tuple[np.ndarray, ...], settings: SameTopicSettings, about: dict
) -> pl.DataFrame:
    """SAME_TOPIC rows of schemas.STRUCTURE_EDGES from every row's top-k list (row, partner,
    cosine): each pair once (source_id < target_id), thinned by `cap_degree`, weight = the
    cosine, in (source_id, target_id) order."""
    a, b, w = undirected(*found, len(ids))
    a, b, w = cap_degree(a, b, w, settings.max_connections)
    edges = pl.DataFrame(
        {
            "source_id": ids.gather(a),
            "target_id": ids.gather(b),
            "type": "SAME_TOPIC",
            "weight": np.round(w.astype(np.float64), 6),
            "marker_text": "",
            "metadata": json.dumps(about),
        }
    ).sort("source_id", "target_id")
    return pl.from_arrow(schemas.conform(edges, "structure_edges"))  # type: ignore[return-value]


def about(method: str, rows: int, settings: SameTopicSettings) -> dict:
    """The edges' metadata: the vectors' method, and whether the search was approximate."""
    out = {"method": method}
    if rows > settings.exact_max_sections:
        out["search"] = f"inverted lists, {settings.probes} probed per list"
    return out


def full_search(
    unit: np.ndarray, groups: np.ndarray, settings: SameTopicSettings
) -> tuple[tuple[np.ndarray, ...], np.ndarray | None]:
    """Every row's top-k list (row, partner, cosine), and the inverted lists' centroids
    (None: exact search, up to `exact_max_sections` rows)."""
    n = len(unit)
    centroids = train_centroids(unit) if n > settings.exact_max_sections else None
    found = neighbour_lists(
        unit,
        groups if settings.cross_doc_only else None,
        Lists(unit, centroids, settings.probes),
        min(settings.max_connections, n - 1),
        settings.min_similarity,
    )
    return found, centroids


def same_topic_edges(
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    embedder,
    settings: SameTopicSettings,
    text_units: pl.DataFrame | None = None,
    unit_vectors: tuple[list[str], np.ndarray] | None = None,
) -> pl.DataFrame:
    """SAME_TOPIC rows of schemas.STRUCTURE_EDGES over all sections, searched whole."""
    if not settings.enabled:
        return schemas.empty("structure_edges")
    rows, vecs, method = section_vectors(
        sections, content_nodes, embedder, settings, text_units, unit_vectors
    )
    if rows.height < 2:
        return schemas.empty("structure_edges")
    found, _ = full_search(unit_rows(vecs), group_codes(rows), settings)
    return edges_frame(rows["id"], found, settings, about(method, rows.height, settings))

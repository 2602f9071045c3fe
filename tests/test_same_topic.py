"""SAME_TOPIC edges: threshold, top-k, cross-document only, each pair once, no self edges."""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import SameTopicSettings
from pipeline.structure import DocStructure
from pipeline.vectors.same_topic import (
    cap_degree,
    ivf_lists,
    same_topic_edges,
    section_texts,
    top_pairs,
)

TOPICS = ["volcano", "violin", "glacier", "tax"]


class KeywordEmbedder:
    """Fake: one axis per topic word, a small per-text perturbation (deterministic)."""

    dim = 8
    calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        KeywordEmbedder.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for j, w in enumerate(TOPICS):
                out[i, j] = t.count(w)
            out[i, 4 + len(t) % 4] = 0.3
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def _frames(docs: list[DocStructure]) -> tuple[pl.DataFrame, pl.DataFrame]:
    secs = [
        {**r, "human_readable_id": i} for i, r in enumerate(s for d in docs for s in d.sections)
    ]
    nodes = [{**r, "human_readable_id": i} for i, r in enumerate(n for d in docs for n in d.nodes)]
    return (
        pl.from_arrow(schemas.pa.Table.from_pylist(secs, schema=schemas.SECTIONS)),
        pl.from_arrow(schemas.pa.Table.from_pylist(nodes, schema=schemas.CONTENT_NODES)),
    )


def _corpus() -> list[DocStructure]:
    out = []
    for d in range(4):
        doc = DocStructure(f"doc{d}", f"d{d}.md", f"Doc {d}")
        for topic in TOPICS[:3]:
            sid = doc.add_section(doc.root_id, "SECTION", f"Part {topic[:2]}")
            doc.add_node(sid, "HEADING", f"## Part {topic[:2]}")
            doc.add_node(sid, "PARAGRAPH", f"All about the {topic}. The {topic} again {'x' * d}.")
        empty = doc.add_section(doc.root_id, "SECTION", "Only a heading")
        doc.add_node(empty, "HEADING", "## Only a heading")
        out.append(doc)
    return out


def test_section_texts_path_and_own_text():
    sections, nodes = _frames(_corpus())
    texts = section_texts(sections, nodes, text_tokens=5)
    assert texts.height == 12  # heading-only sections and text-less roots get no vector
    t = texts["text"][0]
    head, body = t.split("\n", 1)
    assert head.startswith("Doc ") and " > Part " in head
    assert "##" not in t and len(body.split()) <= 5


def test_edges_link_same_topic_across_documents_only():
    sections, nodes = _frames(_corpus())
    title = dict(sections.select("id", "title").iter_rows())
    doc = dict(sections.select("id", "document_id").iter_rows())
    settings = SameTopicSettings(min_similarity=0.8, max_connections=3)
    edges = same_topic_edges(sections, nodes, KeywordEmbedder(), settings)
    assert edges.columns == schemas.STRUCTURE_EDGES.names
    assert set(edges["type"].to_list()) == {"SAME_TOPIC"}
    # 3 topics x C(4 docs, 2) pairs, each section has exactly 3 cross-doc partners
    assert edges.height == 3 * 6
    for s, t, w in edges.select("source_id", "target_id", "weight").iter_rows():
        assert s < t and doc[s] != doc[t] and title[s] == title[t] and w >= 0.8
    assert edges.select("source_id", "target_id").is_unique().all()
    again = same_topic_edges(sections, nodes, KeywordEmbedder(), settings)
    assert again.equals(edges)  # deterministic


def test_max_connections_threshold_and_within_doc():
    sections, nodes = _frames(_corpus())
    capped = same_topic_edges(
        sections, nodes, KeywordEmbedder(), SameTopicSettings(min_similarity=0.8, max_connections=1)
    )
    deg = pl.concat([capped["source_id"], capped["target_id"]]).value_counts()
    assert deg["count"].max() == 1 and capped.height >= 3  # at least one pair per topic
    none = same_topic_edges(
        sections, nodes, KeywordEmbedder(), SameTopicSettings(min_similarity=0.9999)
    )
    assert none.height == 0
    within = same_topic_edges(
        sections,
        nodes,
        KeywordEmbedder(),
        SameTopicSettings(min_similarity=0.0, max_connections=20, cross_doc_only=False),
    )
    doc = dict(sections.select("id", "document_id").iter_rows())
    assert any(doc[s] == doc[t] for s, t in within.select("source_id", "target_id").iter_rows())
    assert not (within["source_id"] == within["target_id"]).any()
    off = same_topic_edges(sections, nodes, KeywordEmbedder(), SameTopicSettings(enabled=False))
    assert off.height == 0


def test_blocked_top_k_matches_brute_force():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(300, 16)).astype(np.float32)
    groups = rng.integers(0, 30, size=300)
    a, b, w = top_pairs(vecs, groups, 4, 0.2, True, block_elements=300 * 7)  # 7-row blocks
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    sim = unit @ unit.T
    np.fill_diagonal(sim, -np.inf)
    sim[groups[:, None] == groups[None, :]] = -np.inf
    expect = set()
    for i in range(300):
        for j in np.argsort(-sim[i])[:4]:
            if sim[i, j] >= 0.2:
                expect.add((min(i, j), max(i, j)))
    assert set(zip(a.tolist(), b.tolist(), strict=True)) == expect
    assert np.allclose(w, sim[a, b], atol=1e-5)
    ca, cb, _ = cap_degree(a, b, w, 4)
    assert np.bincount(np.concatenate([ca, cb])).max() <= 4


def test_inverted_lists_find_the_exact_neighbours_of_clustered_rows():
    """Above `exact_max` rows each row is compared with its list's probed lists only: every
    pair found is a true pair with its exact cosine, and nearly all exact pairs are found."""
    rng = np.random.default_rng(1)
    topics = rng.normal(size=(60, 48))
    vecs = topics[rng.integers(0, 60, size=3000)] + rng.normal(scale=0.6, size=(3000, 48))
    vecs = vecs.astype(np.float32)
    groups = rng.integers(0, 400, size=3000)
    exact = top_pairs(vecs, groups, 5, 0.5, True)
    approx = top_pairs(vecs, groups, 5, 0.5, True, exact_max=1000, probes=6)
    want = set(zip(exact[0].tolist(), exact[1].tolist(), strict=True))
    got = set(zip(approx[0].tolist(), approx[1].tolist(), strict=True))
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    assert np.allclose(approx[2], np.sum(unit[approx[0]] * unit[approx[1]], axis=1), atol=1e-5)
    assert (approx[2] >= 0.5).all() and (groups[approx[0]] != groups[approx[1]]).all()
    assert len(want) > 5000 and len(got & want) / len(want) >= 0.95
    again = top_pairs(vecs, groups, 5, 0.5, True, exact_max=1000, probes=6)
    assert all(np.array_equal(x, y) for x, y in zip(approx, again, strict=True))  # seeded
    # 54 lists of ~55 rows: a row saw ~6/54 of the others
    members, probed = ivf_lists(unit.astype(np.float32), 6)
    assert len(members) == 54 and probed.shape == (54, 6)
    assert (probed[:, 0] == np.arange(54)).all()
    assert sorted(np.concatenate(members).tolist()) == list(range(3000))


def test_unit_mode_uses_text_unit_vectors_without_a_model_call():
    docs = [DocStructure(f"d{i}", f"{i}.md", f"Doc {i}") for i in range(3)]
    sec = [d.add_section(d.root_id, "SECTION", "S") for d in docs]
    for d, s in zip(docs, sec, strict=True):
        d.add_node(s, "PARAGRAPH", "text")
    sections, nodes = _frames(docs)
    units = pl.DataFrame({"id": ["u0", "u1", "u2"], "section_id": sec})
    vecs = np.array([[1, 0.05, 0], [1, 0, 0.05], [0, 0, 1]], dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    before = KeywordEmbedder.calls
    edges = same_topic_edges(
        sections, nodes, KeywordEmbedder(), SameTopicSettings(), units, (["u0", "u1", "u2"], vecs)
    )
    assert KeywordEmbedder.calls == before  # nothing embedded
    assert sorted(zip(edges["source_id"], edges["target_id"], strict=True)) == [
        tuple(sorted((sec[0], sec[1])))
    ]
    assert edges["weight"][0] > 0.99
    assert json.loads(edges["metadata"][0]) == {"method": "mean of text unit vectors"}
    # past the exact bound: the same edge from the inverted lists, and the metadata says so
    listed = same_topic_edges(
        sections,
        nodes,
        KeywordEmbedder(),
        SameTopicSettings(exact_max_sections=2),
        units,
        (["u0", "u1", "u2"], vecs),
    )
    assert listed.drop("metadata").equals(edges.drop("metadata"))
    assert "inverted lists" in json.loads(listed["metadata"][0])["search"]

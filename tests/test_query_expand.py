"""Expand search: seeds, typed-edge expansion, limits, ranking, context, determinism.

Most tests use a tiny hand-built index (Parquet tables written with the real schemas,
vectors given directly) so that which node is reachable by which edge is exact; the last
ones run on the real sample index.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipeline import schemas
from pipeline.config import load_settings
from pipeline.query import GraphIndex
from pipeline.query.expand.graph import DEFAULT_WEIGHTS
from pipeline.query.expand.params import DEFAULT_PARAMS
from pipeline.storage import store

DIM = 4


class StubEmbedder:
    """Every query is the first axis: only unit U1 is similar to it."""

    model_id = "stub"
    dim = DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.tile(np.eye(DIM, dtype=np.float32)[0], (len(texts), 1))


def _write(root: Path, name: str, rows: list[dict]) -> None:
    store.write_arrow(root, name, pa.Table.from_pylist(rows, schema=schemas.TABLES[name]))


def _build(root: Path, with_units: bool = True) -> GraphIndex:
    """Two documents.

    Alpha Guide: root S1 with children Intro (U1, the only dense hit; its paragraph C1
    links REFERS_TO Beta's 'Target' section), Details (U2), Appendix (U3).
    Beta Notes: root S2 (U5) with child Target (U4). Entity Gamma occurs in U1 and U5.
    """
    docs = [
        {"id": "D1", "human_readable_id": 0, "title": "Alpha Guide", "source_path": "a.md"},
        {"id": "D2", "human_readable_id": 1, "title": "Beta Notes", "source_path": "b.md"},
    ]
    sec = [
        ("S1", "D1", None, "DOCUMENT", "Alpha Guide", 0, 0),
        ("S1a", "D1", "S1", "SECTION", "Intro", 1, 0),
        ("S1b", "D1", "S1", "SECTION", "Details", 1, 1),
        ("S1c", "D1", "S1", "SECTION", "Appendix", 1, 2),
        ("S2", "D2", None, "DOCUMENT", "Beta Notes", 0, 0),
        ("S2a", "D2", "S2", "SECTION", "Target", 1, 0),
    ]
    paths = {"S1": ["Alpha Guide"], "S2": ["Beta Notes"]}
    for s in sec:
        if s[2]:
            paths[s[0]] = [*paths[s[2]], s[4]]
    sections = [
        {
            "id": s[0],
            "human_readable_id": i,
            "document_id": s[1],
            "parent_id": s[2],
            "component_type": s[3],
            "title": s[4],
            "level": s[5],
            "seq": s[6],
            "path": paths[s[0]],
            "uri": f"{s[1]}#{s[0]}",
        }
        for i, s in enumerate(sec)
    ]
    units = [
        ("U1", "S1a", "D1", ["C1"], "The intro explains Gamma routing in depth.", []),
        ("U2", "S1b", "D1", [], "Details list every option of the tool.", []),
        ("U3", "S1c", "D1", [], "The appendix holds the changelog.", []),
        ("U4", "S2a", "D2", [], "The target section says the answer is forty-two.", []),
        ("U5", "S2", "D2", [], "Beta notes mention Gamma once more.", []),
    ]
    if not with_units:
        units = []
    text_units = [
        {
            "id": u[0],
            "human_readable_id": i,
            "text": u[4],
            "n_tokens": 10,
            "document_id": u[2],
            "section_id": u[1],
            "content_node_ids": u[3],
            "pages": [1],
            "seq": i,
            "entity_ids": [],
            "relationship_ids": [],
        }
        for i, u in enumerate(units)
    ]
    nodes = [
        {"id": "C1", "human_readable_id": 0, "document_id": "D1", "section_id": "S1a"},
    ]
    edges = [{"source_id": "C1", "target_id": "S2a", "type": "REFERS_TO", "weight": 1.0}]
    entities = [
        {
            "id": "E1",
            "human_readable_id": 0,
            "title": "GAMMA",
            "type": "CONCEPT",
            "description": "Gamma is a routing scheme.",
            "aliases": [],
            "text_unit_ids": ["U1", "U5"] if with_units else [],
            "frequency": 2,
            "degree": 0,
        }
    ]
    for name, rows in [
        ("documents", docs),
        ("sections", sections),
        ("text_units", text_units),
        ("content_nodes", nodes),
        ("structure_edges", edges),
        ("same_topic_edges", []),
        ("entities", entities),
        ("relationships", []),
        ("communities", []),
        ("community_reports", []),
    ]:
        _write(root, name, rows)
    index = GraphIndex(root, load_settings(), embedder=StubEmbedder())
    vecs = np.zeros((len(units), DIM), dtype=np.float32)
    if units:
        vecs[0, 0] = 1.0  # U1 matches the query
        vecs[1:, 1] = 1.0  # the others are orthogonal to it
    index.__dict__["unit_vectors"] = vecs
    index.__dict__["entity_vectors"] = np.zeros((1, DIM), dtype=np.float32)
    # its titles name no entity (rerank.graph_trust would weigh the graph at 0): these tests
    # are about the expansion itself, at the graph's full weight
    index._graph_trust = 1.0
    return index


@pytest.fixture()
def tiny(tmp_path: Path) -> GraphIndex:
    return _build(tmp_path)


def _nodes(result) -> dict[str, dict]:
    return {n["id"]: n for n in result.data["nodes"]}


def test_link_reaches_a_section_dense_search_misses(tiny: GraphIndex) -> None:
    res = tiny.expand_search("where is the answer", top_k=5, max_hops=1)
    nodes = _nodes(res)
    assert nodes["U1"]["hops"] == 0  # the dense seed
    # The answer unit is orthogonal to the query: reached only through the REFERS_TO link.
    assert nodes["S2a"]["via"] == "REFERS_TO" and nodes["S2a"]["hops"] == 1
    assert nodes["U4"]["via"] == "CONTAINS" and nodes["U4"]["hops"] == 1
    assert res.text_unit_ids[0] == "U1"
    assert res.text_unit_ids.index("U4") < res.text_unit_ids.index("U3")  # U3 never reached
    assert "U3" not in nodes
    edges = {(e["source"], e["target"], e["type"]) for e in res.data["edges"]}
    assert ("U1", "S2a", "REFERS_TO") in edges and ("S2a", "U4", "CONTAINS") in edges
    rec = next(r for r in res.records if r["id"] == "U4")
    assert rec["kind"] == "text_unit" and rec["hops"] == 1
    assert rec["document_title"] == "Beta Notes" and rec["section_path"] == ["Beta Notes", "Target"]
    assert any(r["kind"] == "section" and r["id"] == "S2a" for r in res.records)
    assert any(r["kind"] == "entity" and r["title"] == "GAMMA" for r in res.records)
    assert res.mode == "expand"


def test_hierarchy_and_entity_edges_with_hops(tiny: GraphIndex) -> None:
    nodes = _nodes(tiny.expand_search("q", top_k=5))
    assert nodes["S1b"]["via"] == "SIBLING" and nodes["S1b"]["hops"] == 1
    assert nodes["U2"]["hops"] == 1  # sibling section's unit, CONTAINS is free
    assert nodes["E1"]["via"] == "MENTIONS" and nodes["E1"]["hops"] == 1
    assert nodes["U5"]["via"] == "MENTIONS" and nodes["U5"]["hops"] == 2
    assert nodes["S1c"]["hops"] == 2  # sibling of a sibling
    nodes1 = _nodes(tiny.expand_search("q", top_k=5, max_hops=1))
    assert "U5" not in nodes1 and "S1c" not in nodes1 and "U4" in nodes1
    nodes0 = _nodes(tiny.expand_search("q", top_k=5, max_hops=0))
    assert set(nodes0) == {"U1", "S1a"}  # the seed and its own section


def test_edge_types_restrict_what_is_reached(tiny: GraphIndex) -> None:
    res = tiny.expand_search("q", top_k=5, edge_types=["CONTAINS", "SIBLING"])
    nodes = _nodes(res)
    assert "U2" in nodes and "U4" not in nodes and "S2a" not in nodes and "E1" not in nodes
    assert {e["type"] for e in res.data["edges"]} <= {"CONTAINS", "SIBLING"}
    assert res.data["edge_types"] == ["CONTAINS", "SIBLING"]
    ent = _nodes(tiny.expand_search("q", top_k=5, edge_types=["MENTIONS"]))
    assert set(ent) == {"U1", "S1a", "E1", "U5"}  # S1a: a section seed
    # Without CONTAINS a link reaches the section but not the unit inside it.
    link = _nodes(tiny.expand_search("q", top_k=5, edge_types=["REFERS_TO"]))
    assert "S2a" in link and "U4" not in link


def test_weights_override_reorders(tiny: GraphIndex) -> None:
    base = tiny.expand_search("q", top_k=5).text_unit_ids
    assert base.index("U4") < base.index("U2")  # REFERS_TO 0.8 beats SIBLING 0.5
    flipped = tiny.expand_search("q", top_k=5, weights={"REFERS_TO": 0.2, "SIBLING": 1.0})
    ids = flipped.text_unit_ids
    assert ids.index("U2") < ids.index("U4")
    assert flipped.data["weights"]["SIBLING"] == 1.0
    assert DEFAULT_WEIGHTS["SIBLING"] == 0.5  # the module defaults were not mutated
    off = _nodes(tiny.expand_search("q", top_k=5, weights={"REFERS_TO": 0.0}))
    assert "S2a" not in off


def test_max_nodes_respected_and_subgraph_connected(tiny: GraphIndex) -> None:
    full = tiny.expand_search("q", top_k=5)
    assert len(full.data["nodes"]) > 4
    for k in (1, 2, 4):
        res = tiny.expand_search("q", top_k=5, max_nodes=k)
        nodes = _nodes(res)
        assert len(nodes) == k
        assert k < 2 or "U1" in nodes
        # Every node past the seeds arrives with the edge of its best path.
        targets = {e["target"] for e in res.data["edges"]}
        assert {i for i, n in nodes.items() if n["hops"] > 0 or n["via"]} <= targets
        assert all(e["source"] in nodes for e in res.data["edges"])
    assert any("pruned" in t for t in tiny.expand_search("q", max_nodes=2).trace)


def test_invalid_arguments(tiny: GraphIndex) -> None:
    with pytest.raises(ValueError, match="REFERS_TO"):
        tiny.expand_search("q", edge_types=["REFERS_TO", "TELEPORTS"])
    with pytest.raises(ValueError, match="TELEPORTS"):
        tiny.expand_search("q", weights={"TELEPORTS": 0.5})
    with pytest.raises(ValueError, match="empty query"):
        tiny.expand_search("   ")
    with pytest.raises(ValueError):
        tiny.expand_search("q", weights={"SIBLING": 2.0})


def test_context_grouped_by_document_then_section(tiny: GraphIndex) -> None:
    res = tiny.expand_search("q", top_k=5)
    ctx = res.context_text
    lines = ctx.splitlines()
    assert lines[0] == "# Alpha Guide"  # the document of the best unit comes first
    assert lines.count("# Alpha Guide") == 1 and lines.count("# Beta Notes") == 1
    beta = lines.index("# Beta Notes")
    alpha_part, beta_part = lines[:beta], lines[beta:]
    assert "## Intro" in alpha_part and "## Details" in alpha_part
    assert alpha_part.index("## Intro") < alpha_part.index("## Details")
    assert "## Target" in beta_part
    u4 = "[3] The target section says the answer is forty-two."
    assert beta_part.index(u4) == beta_part.index("## Target") + 1
    assert res.context_tokens > 0


def test_deterministic(tiny: GraphIndex, tmp_path: Path) -> None:
    a = tiny.expand_search("where is the answer", top_k=5)
    b = tiny.expand_search("where is the answer", top_k=5)
    assert a.to_json() == b.to_json()
    other = _build(tmp_path / "again")  # a fresh index over the same tables
    c = other.expand_search("where is the answer", top_k=5)
    assert c.to_json() == a.to_json()


def test_empty_index(tmp_path: Path) -> None:
    index = _build(tmp_path, with_units=False)
    res = index.expand_search("anything")
    assert res.mode == "expand" and res.text_unit_ids == [] and "empty" in res.answer


# ---- the real sample index ---------------------------------------------------------------


def test_sample_index_expand(sample_index) -> None:
    _, out, _, _ = sample_index
    index = GraphIndex.open(out)
    q = "Who succeeded J. J. Thomson as director of the Cavendish Laboratory?"
    res = index.expand_search(q)
    assert res.mode == "expand" and res.text_unit_ids
    assert "Cavendish" in res.answer
    top = [r for r in res.records if r["kind"] == "text_unit"][:2]
    assert any("Rutherford succeeded J. J. Thomson" in r["text"] for r in top)
    kinds = {n["kind"] for n in res.data["nodes"]}
    assert {"text_unit", "section", "entity"} <= kinds
    assert len(res.data["nodes"]) <= index.settings.query.expand_max_nodes
    assert any(t.startswith("seeds:") for t in res.trace)
    assert any(t.startswith("hop 1:") for t in res.trace)
    units = [r for r in res.records if r["kind"] == "text_unit"]
    assert units and all(r["document_title"] and r["section_path"] for r in units)
    assert res.context_text.startswith("# ")
    # The sample's links are in the graph: a Markdown link is a followable REFERS_TO edge.
    linked = index.expand_search(q, edge_types=["REFERS_TO", "CONTAINS"], max_hops=1)
    assert all(e["type"] in {"REFERS_TO", "CONTAINS"} for e in linked.data["edges"])
    assert index.expand_search(q).to_json() == res.to_json()


def test_named_document_title_seeds_its_units(tiny: GraphIndex) -> None:
    # The query names the document "Beta Notes": its units are seeds at full weight even
    # though their vectors are orthogonal to the query.
    res = tiny.expand_search("What do the Beta Notes say?", top_k=5, max_hops=1)
    nodes = _nodes(res)
    assert nodes["U4"]["hops"] == 0 and nodes["U5"]["hops"] == 0
    assert nodes["U4"]["score"] == pytest.approx(1.0) and nodes["U5"]["score"] == 1.0
    assert nodes["S2"]["hops"] == 0  # paths start there: U5's own section, free hop
    assert any("1 text units" not in t and "title the query names" in t for t in res.trace)
    plain = tiny.expand_search("what do the notes say", top_k=5, max_hops=1)
    assert _nodes(plain)["U4"]["hops"] == 1 and "U5" not in _nodes(plain)


def test_units_ranked_by_cosine_plus_arriving_evidence(tiny: GraphIndex) -> None:
    # U3 is a weak dense hit (cosine 0.3) that no edge from U1 reaches within one hop; U4
    # has cosine 0 but arrives over REFERS_TO + CONTAINS with path 1 * 0.8 * 0.9 = 0.72.
    tiny.unit_vectors[2] = np.array([0.3, np.sqrt(1 - 0.09), 0, 0], dtype=np.float32)
    res = tiny.expand_search("q", top_k=5, max_hops=1)
    ids = res.text_unit_ids
    assert ids.index("U4") < ids.index("U3")
    rec = {r["id"]: r for r in res.records if r["kind"] == "text_unit"}
    w = DEFAULT_PARAMS.evidence_weight
    assert rec["U4"]["score"] == pytest.approx(w * 0.8 * 0.9)
    # A seed's evidence is its way back through its own section (CONTAINS 0.9 x the
    # section's cosine, here the unit's own): dense hits keep their dense order.
    assert rec["U3"]["score"] == pytest.approx(0.3 + w * 0.9 * 0.3, abs=1e-6)
    assert rec["U5"]["score"] == pytest.approx(0.0)  # two hops away: not reached
    assert ids.index("U3") < ids.index("U5")

"""The corpus-wide tail's bounded-memory paths give what the whole-at-once ones gave: content
node vectors made a block at a time, report candidates scored a batch of pairs at a time,
mentions read streamed."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
import pytest

from pipeline.communities.leiden import hierarchical_leiden
from pipeline.communities.reports import gather_frames
from pipeline.communities.reports.offline import build_reports
from pipeline.config import EmbeddingSettings, GraphSettings, ReportSettings
from pipeline.graph.mention_tables import read_mentions
from pipeline.storage import shard_files
from pipeline.vectors import lance
from pipeline.vectors.derive_vectors import mean_vectors

DIM = 8


class HashEmbedder:
    """A vector per text from its hash; counts the texts it is asked for."""

    dim = DIM

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:DIM], np.uint8) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM) - 127.5


def _nodes_and_units(n_nodes: int = 23, n_units: int = 9):
    rng = np.random.default_rng(7)
    types = ["PARAGRAPH", "TABLE", "LIST_ITEM", "HEADING"]
    nodes = pl.DataFrame(
        {
            "id": [f"n{i}" for i in range(n_nodes)],
            "node_type": [types[i % 4] for i in range(n_nodes)],
            "text": [f"node text {i}" for i in range(n_nodes)],
            "description": [""] * n_nodes,
        }
    )
    # a unit holds a few nodes; the last nodes are held by none
    held = [[f"n{j}" for j in range(n_nodes - 3) if (j + i) % 3 == 0] for i in range(n_units)]
    units = pl.DataFrame(
        {"id": [f"u{i}" for i in range(n_units)], "content_node_ids": held},
        schema_overrides={"content_node_ids": pl.List(pl.Utf8)},
    )
    unit_vecs = rng.standard_normal((n_units, DIM)).astype(np.float32)
    return nodes, units, units["id"].to_list(), unit_vecs


def test_content_node_vectors_in_blocks_are_the_whole_tables(tmp_path, monkeypatch) -> None:
    nodes, units, unit_ids, unit_vecs = _nodes_and_units()
    settings = EmbeddingSettings()
    whole = HashEmbedder()
    known = {"text_units": (unit_ids, unit_vecs)}
    expected = lance.node_vectors(tmp_path, nodes, whole, settings, units, known)
    # what a node's vector was before blocks: the mean of its units, else its text embedded
    members = lance.node_units(tmp_path, nodes, units)
    reference = mean_vectors(members, unit_ids, unit_vecs, DIM)
    zero = np.flatnonzero(~reference.any(axis=1))
    reference[zero] = HashEmbedder().embed([nodes["text"][int(i)] for i in zero])
    assert np.array_equal(expected, reference)
    assert len(whole.calls) == 1  # the embedded nodes in one call
    monkeypatch.setattr(lance, "BLOCK_ROWS", 4)
    blocks = HashEmbedder()
    got = list(lance._node_blocks(tmp_path, nodes, blocks, settings, units, known))  # noqa: SLF001
    assert len(got) == 6
    assert np.array_equal(np.concatenate(got), expected)
    assert blocks.calls == whole.calls


def test_report_candidates_in_small_batches_are_the_same(monkeypatch) -> None:
    titles = [f"Person {chr(65 + i)}" for i in range(12)]
    ids = [f"e{i}" for i in range(12)]
    pairs = [(i, (i + 1) % 12) for i in range(12)] + [(i, (i + 5) % 12) for i in range(0, 12, 2)]
    texts = [f"{titles[a]} met {titles[b]} in town. {titles[a]} stayed long." for a, b in pairs]
    units = pl.DataFrame(
        {
            "id": [f"u{k}" for k in range(len(pairs))],
            "human_readable_id": list(range(len(pairs))),
            "text": texts,
            "entity_ids": [[ids[a], ids[b]] for a, b in pairs],
        }
    )
    entities = pl.DataFrame(
        {
            "id": ids,
            "human_readable_id": list(range(12)),
            "title": titles,
            "type": ["PERSON"] * 12,
            "description": [f"{t} lives here." for t in titles],
            "aliases": [[] for _ in titles],
            "text_unit_ids": [[f"u{k}" for k, p in enumerate(pairs) if i in p] for i in range(12)],
            "frequency": [1] * 12,
            "degree": [1] * 12,
        },
        schema_overrides={"aliases": pl.List(pl.Utf8)},
    )
    relationships = pl.DataFrame(
        {
            "id": [f"r{k}" for k in range(len(pairs))],
            "human_readable_id": list(range(len(pairs))),
            "source": [titles[a] for a, _ in pairs],
            "target": [titles[b] for _, b in pairs],
            "source_id": [ids[a] for a, _ in pairs],
            "target_id": [ids[b] for _, b in pairs],
            "type": ["RELATED"] * len(pairs),
            "description": texts,
            "weight": [1.0 + (k % 3) for k in range(len(pairs))],
        }
    )
    communities = hierarchical_leiden(entities, relationships, GraphSettings(max_cluster_size=4))
    args = (communities, entities, relationships, units, ReportSettings())
    expected = build_reports(*args)
    monkeypatch.setattr(gather_frames, "CANDIDATE_BATCH_PAIRS", 3)
    assert build_reports(*args).equals(expected)


@pytest.mark.parametrize("rows", [0, 5])
def test_mentions_read_streamed_are_the_rows(tmp_path, rows) -> None:
    entities = pl.DataFrame(
        {
            "text_unit_id": [f"u{i % 2}" for i in range(rows)],
            "title": [f"T{i % 3}" for i in range(rows)],
            "type": ["PERSON"] * rows,
            "description": [None if i == 1 else f"s{i}" for i in range(rows)],
        },
        schema_overrides={"description": pl.Utf8},
    )
    relationships = pl.DataFrame(
        {
            "text_unit_id": [f"u{i}" for i in range(rows)],
            "source": [f"T{i % 3}" for i in range(rows)],
            "target": [f"T{(i + 1) % 3}" for i in range(rows)],
            "type": ["RELATED_TO"] * rows,
            "description": [f"r{i}" for i in range(rows)],
            "weight": [float(i) for i in range(rows)],
        }
    )
    provenance = [pl.lit("nlp").alias(c) for c in ("extractor", "model", "prompt_hash")]
    for name, frame in (
        ("extracted_entities", entities),
        ("extracted_relationships", relationships),
    ):
        shard_files.write_shard(tmp_path, name, "000", frame.with_columns(provenance))
    xe, xr = read_mentions(tmp_path)
    for got, want in ((xe, entities), (xr, relationships)):
        assert got.with_columns(pl.col(pl.Categorical).cast(pl.Utf8)).equals(
            want.select(got.columns)
        )
    assert isinstance(xe.schema["title"], pl.Categorical)
    assert xr.schema["source"] == xe.schema["title"]  # one Categories: their codes compare

"""Tier 2: asset functions invoked directly with test resources (no run, no real model)."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
from dagster import asset, materialize

from assets.chunking import chunks_asset
from assets.ingest import documents_asset
from assets.structure import structure_asset
from assets.vectors import unit_vector_tables
from pipeline import schemas
from pipeline.storage import store
from resources import DocgraphConfig, EmbedderResource
from resources.output import run_dir


class HashEmbedder:
    """Deterministic 8-dim bag-of-words vectors: enough to test wiring without a model."""

    model_id = "hash-8"
    dim = 8
    hits = misses = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hashlib.md5(word.encode()).digest()[0] % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


class FakeEmbedderResource(EmbedderResource):
    def get(self):
        return HashEmbedder()


def _materialize_shard(tmp_path, assets, **resources):
    """Materialize `assets` (one shard of one) into tmp_path/out's staging folder."""
    config = DocgraphConfig(input_dir=str(tmp_path / "in"), output_dir=str(tmp_path / "out"))
    result = materialize(
        assets,
        partition_key="000",
        resources={"docgraph": config, **{k: v(config) for k, v in resources.items()}},
    )
    assert result.success
    return result, store.staging_dir(tmp_path / "out")


def test_documents_asset_outputs_documents_and_rejections(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.md").write_text("# Alpha\n\nAda Lovelace met Charles Babbage in London.\n")
    (inp / "b.xyz").write_text("what is this")
    result, staging = _materialize_shard(tmp_path, [documents_asset(1)])
    docs, rejected = (store.read_table(staging, n) for n in ("documents", "rejected_documents"))
    assert docs["title"].to_list() == ["Alpha"]
    assert rejected["source_path"].to_list() == ["b.xyz"]
    [event] = [
        e for e in result.get_asset_materialization_events() if e.asset_key.path == ["documents"]
    ]
    assert event.materialization.metadata["rows_in_range"].value == 1
    assert event.materialization.partition == "000"


def test_chunks_asset_chunks_inside_sections(tmp_path):
    (tmp_path / "in").mkdir()
    body = "Ada Lovelace wrote notes on the engine. " * 60
    (tmp_path / "in" / "a.md").write_text(f"# Alpha\n\n## One\n\n{body}\n\n## Two\n\n{body}\n")
    result, staging = _materialize_shard(
        tmp_path,
        [documents_asset(1), structure_asset(1), chunks_asset(1)],
        embedder=lambda config: FakeEmbedderResource(config=config),
    )
    sections, nodes = (
        store.read_table(staging, "sections"),
        store.read_table(staging, "content_nodes"),
    )
    assert store.read_table(staging, "chunk_failures").is_empty()
    df = store.read_table(staging, "chunks")
    assert df.height > 2
    [event] = [
        e for e in result.get_asset_materialization_events() if e.asset_key.path == ["chunks"]
    ]
    tokens_max = event.materialization.metadata["tokens_max"].value
    assert 0 < tokens_max <= DocgraphConfig().settings().chunking.chunk_size
    titles = dict(sections.select("id", "title").iter_rows())
    assert {"One", "Two"} <= {titles[s] for s in df["section_id"]}
    parent = dict(sections.select("id", "parent_id").iter_rows())
    node_section = dict(nodes.select("id", "section_id").iter_rows())

    def ancestors(sid):
        while sid:
            yield sid
            sid = parent[sid]

    for sid, node_ids in df.select("section_id", "content_node_ids").iter_rows():
        # never straddles sections: every node lies in the unit's section subtree
        assert all(sid in set(ancestors(node_section[n])) for n in node_ids)
    one = next(k for k, v in titles.items() if v == "One")
    two = next(k for k, v in titles.items() if v == "Two")
    for node_ids in df["content_node_ids"]:
        assert not ({node_section[n] for n in node_ids} >= {one, two})


def test_vector_asset_writes_a_lance_table_of_every_row(tmp_path):
    """One table of the unit_vector_tables step, selected alone (the step reads its table)."""
    config = DocgraphConfig(output_dir=str(tmp_path))
    units = pl.DataFrame(
        {"id": ["u1", "u2"], "text": ["Ada Lovelace", "Charles Babbage"], "document_id": ["d", "d"]}
    )
    typed = pl.concat([schemas.empty("text_units"), units], how="diagonal_relaxed")

    @asset(name="text_units")
    def text_units(context, docgraph: DocgraphConfig) -> None:
        store.write_table(run_dir(docgraph, context), "text_units", typed)

    result = materialize(
        [text_units, unit_vector_tables],
        selection=["text_units", "text_units_vectors"],
        resources={"docgraph": config, "embedder": FakeEmbedderResource(config=config)},
    )
    staging = store.staging_dir(tmp_path)
    [_, event] = result.get_asset_materialization_events()
    assert event.asset_key.path == ["text_units_vectors"]
    assert event.materialization.metadata["rows"].value == 2
    # written into the staging version, not published (only published_index publishes)
    assert store.read_manifest(tmp_path) is None
    table = store.lance_db(staging).open_table("text_units")
    assert table.count_rows() == 2
    assert table.schema.field("vector").type.list_size == HashEmbedder.dim
    made = set(store.lance_db(staging).table_names())  # the others were not asked for
    assert not made & {"content_nodes", "entities", "relationships", "community_reports"}


def test_metadata_preview_escapes_html_and_pipes():
    from assets.metadata import markdown_preview

    md = markdown_preview(pl.DataFrame({"text": ["<script>alert(1)</script> a|b"]}))
    assert "<script>" not in md
    assert "&lt;script&gt;" in md and "a\\|b" in md

"""Tier 2: asset functions invoked directly with test resources (no run, no real model)."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
from dagster import build_asset_context

from assets.ingest import documents
from assets.semantic import chunks
from assets.vectors import vector_assets
from pipeline import store
from resources import DocgraphConfig, EmbedderResource


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


def test_documents_asset_outputs_documents_and_rejections(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.md").write_text("# Alpha\n\nAda Lovelace met Charles Babbage in London.\n")
    (inp / "b.xyz").write_text("what is this")
    outputs = {
        o.output_name: o
        for o in documents(
            context=build_asset_context(), docgraph=DocgraphConfig(input_dir=str(inp))
        )
    }
    docs, rejected = outputs["documents"].value, outputs["rejected_documents"].value
    assert docs["title"].to_list() == ["Alpha"]
    assert rejected["source_path"].to_list() == ["b.xyz"]
    assert outputs["documents"].metadata["rows"].value == 1


def test_chunks_asset_chunks_inside_sections(tmp_path):
    from pipeline.ingest import load_folder
    from pipeline.structure import build_structure

    (tmp_path / "in").mkdir()
    body = "Ada Lovelace wrote notes on the engine. " * 60
    (tmp_path / "in" / "a.md").write_text(f"# Alpha\n\n## One\n\n{body}\n\n## Two\n\n{body}\n")
    docs, _ = load_folder(tmp_path / "in")
    sections, nodes, _, _ = build_structure(docs, tmp_path / "in")
    config = DocgraphConfig(output_dir=str(tmp_path / "out"))
    outputs = {
        o.output_name: o
        for o in chunks(
            docgraph=config,
            embedder=FakeEmbedderResource(config=config),
            documents=docs,
            sections=sections,
            content_nodes=nodes,
        )
    }
    out = outputs["chunks"]
    assert outputs["chunk_failures"].value.is_empty()
    df = out.value
    assert df.height > 2
    assert out.metadata["tokens_max"].value <= config.settings().chunking.chunk_size
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
    config = DocgraphConfig(output_dir=str(tmp_path))
    frame = pl.DataFrame(
        {"id": ["u1", "u2"], "text": ["Ada Lovelace", "Charles Babbage"], "document_id": ["d", "d"]}
    )
    asset_fn = next(a for a in vector_assets if a.key.to_user_string() == "text_units_vectors")
    result = asset_fn(
        context=build_asset_context(),
        docgraph=config,
        embedder=FakeEmbedderResource(config=config),
        frame=frame,
    )
    assert result.metadata["rows"] == 2
    # written into the staging version, not published (only published_index publishes)
    assert store.read_manifest(tmp_path) is None
    table = store.lance_db(store.staging_dir(tmp_path)).open_table("text_units")
    assert table.count_rows() == 2
    assert table.schema.field("vector").type.list_size == HashEmbedder.dim


def test_metadata_preview_escapes_html_and_pipes():
    from assets.metadata import markdown_preview

    md = markdown_preview(pl.DataFrame({"text": ["<script>alert(1)</script> a|b"]}))
    assert "<script>" not in md
    assert "&lt;script&gt;" in md and "a\\|b" in md

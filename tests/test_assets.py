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


def test_chunks_asset_reports_token_metadata(tmp_path):
    docs = pl.DataFrame(
        {
            "id": ["d1"],
            "human_readable_id": [0],
            "text": ["Ada Lovelace wrote notes. " * 200],
            "n_pages": [1],
        }
    )
    config = DocgraphConfig(output_dir=str(tmp_path))
    out = chunks(docgraph=config, documents=docs)
    df = out.value
    assert df.height > 1
    assert out.metadata["tokens_max"].value <= config.settings().chunking.chunk_size
    assert set(df["document_id"]) == {"d1"}


def test_vector_asset_writes_a_lance_table_of_every_row(tmp_path):
    config = DocgraphConfig(output_dir=str(tmp_path))
    frame = pl.DataFrame(
        {"id": ["u1", "u2"], "text": ["Ada Lovelace", "Charles Babbage"], "document_id": ["d", "d"]}
    )
    asset_fn = next(a for a in vector_assets if a.key.to_user_string() == "text_units_vectors")
    result = asset_fn(docgraph=config, embedder=FakeEmbedderResource(config=config), frame=frame)
    assert result.metadata["rows"] == 2
    table = store.lance_db(tmp_path).open_table("text_units")
    assert table.count_rows() == 2
    assert table.schema.field("vector").type.list_size == HashEmbedder.dim


def test_metadata_preview_escapes_html_and_pipes():
    from assets.metadata import markdown_preview

    md = markdown_preview(pl.DataFrame({"text": ["<script>alert(1)</script> a|b"]}))
    assert "<script>" not in md
    assert "&lt;script&gt;" in md and "a\\|b" in md

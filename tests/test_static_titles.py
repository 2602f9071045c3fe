"""Entity titles' static vectors: the model's token states, written once beside its ONNX
export, give title vectors near the model's own without a forward pass, and entity vectors
use them only for the configured model."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.config import EmbeddingSettings
from pipeline.vectors import embed_onnx, static_titles
from pipeline.vectors.derive_vectors import mean_vectors, normalise
from pipeline.vectors.embed import resolve_model
from pipeline.vectors.embed_onnx import (
    TOKEN_STATES_FILE,
    OnnxEmbedder,
    ensure_exported,
    export,
    onnx_path,
)
from pipeline.vectors.embed_worker import EmbeddingWorker
from pipeline.vectors.lance import build_vector_table, compute_vectors, entity_model_texts

# distinct names of several kinds: each one's model vector must be nearest its static one
TITLES = [
    "Marie Curie",
    "Warsaw",
    "polonium",
    "Nobel Prize in Physics",
    "University of Paris",
    "Pierre Curie",
    "radioactivity",
    "Albert Einstein",
    "Mount Kilimanjaro",
    "Bank of England",
    "Tallinn",
    "photosynthesis",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh $XDG_CACHE_HOME holding the packaged model's ONNX export (copied from this
    machine's cache when it has one: an export costs a torch import) and no token states."""
    xdg = tmp_path_factory.mktemp("xdg")
    model_id = resolve_model(EmbeddingSettings().model)
    have = onnx_path(model_id)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(xdg))
        mp.setattr(embed_onnx, "_ONNX_EMBEDDERS", {})
        mp.setattr(static_titles, "_LOADED", {})
        path = onnx_path(model_id)
        path.parent.mkdir(parents=True)
        if have is not None and have.is_file():
            shutil.copyfile(have, path)
        else:
            export(Path(model_id), path)
        yield path


def test_a_worker_writes_the_token_states_as_it_starts_and_titles_sum_them(cache: Path):
    states = cache.with_name(TOKEN_STATES_FILE)
    assert ensure_exported(EmbeddingSettings(title_vectors="model")) == cache
    assert not states.exists()  # only where they are used
    onnx = OnnxEmbedder(resolve_model(EmbeddingSettings().model), cache)
    assert static_titles.wanted(onnx, EmbeddingSettings())
    assert static_titles.static_titles(onnx, EmbeddingSettings()) is None  # inline: no table
    # a step that finds no table waits for its worker, which writes it as it starts
    worker = EmbeddingWorker(EmbeddingSettings())
    try:
        assert static_titles.static_titles(worker, EmbeddingSettings()) is not None
    finally:
        worker.close()
    assert states.is_file()
    table = np.load(states)
    onnx = OnnxEmbedder(resolve_model(EmbeddingSettings().model), cache)
    vocab = onnx.tokenizer.get_vocab_size()
    assert table.shape == (vocab + 1, 384)
    cls, sep = onnx.tokenizer.token_to_id("[CLS]"), onnx.tokenizer.token_to_id("[SEP]")
    for token in (1996, 3000, 7592, 29000):  # each row: the token's state alone, exactly
        ids = np.array([[cls, token, sep]])
        alone = onnx._hidden(ids, np.ones_like(ids), np.zeros_like(ids))[0, 1]
        np.testing.assert_allclose(table[token], alone, atol=1e-5)

    static = static_titles.static_titles(onnx, EmbeddingSettings())
    assert static is not None
    paris = onnx.tokenizer.token_to_id("paris")
    np.testing.assert_allclose(
        static.embed(["Paris"])[0], normalise(table[[paris]] + table[vocab])[0], atol=1e-6
    )
    got, model = static.embed(TITLES), onnx.embed(TITLES)
    assert np.all((got * model).sum(axis=1) > 0.6)
    assert ((model @ got.T).argmax(axis=1) == np.arange(len(TITLES))).all()
    assert static.embed([""]).shape == (1, 384)  # a title of no tokens: the specials alone


def test_entity_vectors_take_static_titles_for_the_configured_model_only(cache: Path, tmp_path):
    ensure_exported(EmbeddingSettings())
    onnx = OnnxEmbedder(resolve_model(EmbeddingSettings().model), cache)
    units = pl.DataFrame(
        {
            "id": ["u1", "u2"],
            "text": ["Marie Curie was born in Warsaw.", "Polonium decays."],
            "document_id": ["d1", "d2"],
        }
    )
    build_vector_table(tmp_path, "text_units", units, onnx)
    ents = pl.DataFrame(
        {
            "id": ["e1", "e2", "e3"],
            "title": ["Marie Curie", "Warsaw", "polonium"],
            "type": ["PERSON", "GEO", "CONCEPT"],
            "frequency": [1, 1, 2],
            "text_unit_ids": [["u1"], ["u1"], ["u1", "u2"]],
        }
    )
    context = mean_vectors(
        ents["text_unit_ids"], ["u1", "u2"], onnx.embed(units["text"].to_list()), 384
    )
    titles = ents["title"].to_list()

    def vectors(settings: EmbeddingSettings, embedder) -> np.ndarray:
        return compute_vectors(tmp_path, "entities", ents, embedder, settings)

    static = static_titles.static_titles(onnx, EmbeddingSettings())
    got = vectors(EmbeddingSettings(), onnx)
    np.testing.assert_allclose(got, normalise(context + static.embed(titles)), atol=1e-5)
    assert entity_model_texts(ents, onnx, EmbeddingSettings()) == []  # nothing to prefetch

    model = EmbeddingSettings(title_vectors="model")
    np.testing.assert_allclose(
        vectors(model, onnx), normalise(context + onnx.embed(titles)), atol=1e-5
    )
    assert entity_model_texts(ents, onnx, model) == titles
    assert not np.allclose(got, vectors(model, onnx), atol=1e-3)

    class OtherModel:  # a caller's own embedder: its titles go to it, not to the table
        model_id, dim = "another-model", 384

        def __init__(self):
            self.calls: list[list[str]] = []

        def embed(self, texts: list[str]) -> np.ndarray:
            self.calls.append(texts)
            return onnx.embed(texts)

    other = OtherModel()
    np.testing.assert_allclose(
        vectors(EmbeddingSettings(), other), normalise(context + onnx.embed(titles)), atol=1e-5
    )
    assert other.calls == [titles]
    assert entity_model_texts(ents, other, EmbeddingSettings()) == titles


def test_a_damaged_table_is_removed_and_the_model_embeds_the_titles(
    cache: Path, monkeypatch, capsys
):
    ensure_exported(EmbeddingSettings())
    states = cache.with_name(TOKEN_STATES_FILE)
    states.write_bytes(states.read_bytes()[:4096])  # cut short (a full disk, a bad copy)
    monkeypatch.setattr(static_titles, "_LOADED", {})
    onnx = OnnxEmbedder(resolve_model(EmbeddingSettings().model), cache)
    assert static_titles.static_titles(onnx, EmbeddingSettings()) is None
    assert "removed the token states" in capsys.readouterr().err
    assert not states.exists()  # the next worker writes it again
    np.testing.assert_allclose(
        static_titles.title_vectors(TITLES, onnx, EmbeddingSettings()), onnx.embed(TITLES)
    )

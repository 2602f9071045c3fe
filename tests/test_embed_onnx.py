"""The ONNX query embedder gives sentence-transformers' vectors, and the vector copies
that let a cold query skip lancedb are used only while they match their Lance table."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.vectors import embed_onnx
from pipeline.vectors import lance as vectors
from pipeline.vectors import vector_copies as vector_cache
from pipeline.vectors.embed import Embedder, get_embedder, resolve_model
from pipeline.vectors.embed_onnx import (
    OnnxEmbedder,
    export,
    index_embedder,
    onnx_path,
    query_embedder,
)
from pipeline.vectors.embed_worker import EmbeddingWorker

# the export alone: its token states (test_static_titles) would add ~15 s to each fresh cache
NO_STATES = EmbeddingSettings(title_vectors="model")
TEXTS = [
    "Who did Einstein work with?",
    "a",
    "",
    "Ünïcode tëxt — 東京, naïve café 🎉",
    # longer than the model's 256-token window: both sides must truncate alike
    "Marie Curie discovered polonium and radium in Paris in 1898. " * 60,
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A real export of the packaged model (torch.onnx), into a fresh folder."""
    target = tmp_path_factory.mktemp("onnx") / "model.onnx"
    export(Path(resolve_model(EmbeddingSettings().model)), target)
    return target


def test_onnx_vectors_match_sentence_transformers(exported: Path):
    onnx = OnnxEmbedder(resolve_model(EmbeddingSettings().model), exported)
    reference = get_embedder(EmbeddingSettings()).embed(TEXTS)
    batched = onnx.embed(TEXTS)  # padded to the longest text
    single = np.stack([onnx.embed([t])[0] for t in TEXTS])  # unpadded, as a query runs
    assert onnx.dim == reference.shape[1] == 384
    for got in (batched, single):
        cosine = (got * reference).sum(axis=1)
        assert np.all(cosine > 1 - 1e-5), cosine
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert onnx.embed([]).shape == (0, 384)


def test_query_embedder_uses_the_export_only_when_it_is_there(
    exported: Path, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(embed_onnx, "_ONNX_EMBEDDERS", {})
    settings = NO_STATES
    assert isinstance(query_embedder(settings), Embedder)  # nothing exported: torch
    path = onnx_path(resolve_model(settings.model))
    assert path is not None and path.is_relative_to(tmp_path / "xdg")
    path.parent.mkdir(parents=True)
    shutil.copyfile(exported, path)
    assert isinstance(query_embedder(settings), OnnxEmbedder)
    assert embed_onnx.ensure_exported(settings) == path  # present: no second export


def test_batches_by_tokens_keep_order_and_vectors(exported: Path):
    """The index's batches: texts sorted by length into passes of at most 64 padded tokens
    and 4 texts (many passes, one text alone over the budget), every vector in its row."""
    texts = TEXTS * 2 + [f"Entity number {i} of the list" for i in range(9)]
    onnx = OnnxEmbedder(
        resolve_model(EmbeddingSettings().model), exported, 2, batch_tokens=64, batch_size=4
    )
    got = onnx.embed(texts)
    reference = get_embedder(EmbeddingSettings()).embed(texts)
    assert got.shape == reference.shape == (len(texts), 384)
    assert np.all((got * reference).sum(axis=1) > 1 - 1e-5)


def test_streams_run_passes_side_by_side_and_make_one_streams_vectors(exported: Path, monkeypatch):
    """Two streams: the batches run on two threads at once and every vector is the one a
    single stream makes, bit for bit; a stream given up to another process (the worker's
    parent, busy) leaves every pass to the other."""
    model = resolve_model(EmbeddingSettings().model)
    texts = TEXTS * 2 + [f"Entity number {i} of the list" for i in range(9)]
    alone = OnnxEmbedder(model, exported, 1, batch_tokens=64, batch_size=4).embed(texts)
    onnx = OnnxEmbedder(model, exported, 2, batch_tokens=64, batch_size=4)
    threads: list[int] = []
    run = onnx._run

    def slow_run(encodings, width):  # slow passes: the second stream surely takes some
        threads.append(threading.get_ident())
        time.sleep(0.05)
        return run(encodings, width)

    monkeypatch.setattr(onnx, "_run", slow_run)
    assert np.array_equal(onnx.embed(texts), alone)
    assert len(set(threads)) == 2
    threads.clear()
    monkeypatch.setattr(onnx, "_streams_now", lambda: 1)  # what leave_cores_to says then
    assert np.array_equal(onnx.embed(texts), alone)
    assert len(set(threads)) == 1


def test_the_first_worker_exports_the_model_and_the_next_runs_without_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the workers inherit it
    monkeypatch.setattr(embed_onnx, "_ONNX_EMBEDDERS", {})
    settings = NO_STATES
    path = onnx_path(resolve_model(settings.model))
    assert isinstance(index_embedder(settings), Embedder)  # nothing exported yet: torch
    gpu = settings.model_copy(update={"device": "cuda"})
    reference = get_embedder(settings).embed(TEXTS)
    vectors, maps = [], []
    for _ in range(2):  # the first run's worker, then the next run's
        worker = EmbeddingWorker(settings)
        try:
            vectors.append(worker.embed(TEXTS))
            maps.append(Path(f"/proc/{worker._proc.pid}/maps").read_text())
        finally:
            worker.close()
        assert path.is_file()  # exported by the first
    assert "libtorch" in maps[0]  # it imported torch to export
    assert "onnxruntime" in maps[1] and "libtorch" not in maps[1]
    for got in vectors:
        assert np.all((got * reference).sum(axis=1) > 1 - 1e-5)
    assert isinstance(index_embedder(settings), OnnxEmbedder)
    assert isinstance(index_embedder(gpu), Embedder)  # the export runs on the CPU only


def test_an_export_that_does_not_load_leaves_sentence_transformers(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(embed_onnx, "_ONNX_EMBEDDERS", {})
    settings = NO_STATES
    path = onnx_path(resolve_model(settings.model))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an onnx model")  # a damaged file (a full disk, a bad copy)
    assert isinstance(query_embedder(settings), Embedder)  # the query goes on, on torch
    assert "does not load" in capsys.readouterr().err
    assert not path.exists()  # removed: the next worker exports the model again
    path.write_bytes(b"not an onnx model")
    worker = EmbeddingWorker(settings)
    try:
        got = worker.embed(TEXTS)  # the run goes on, on torch
    finally:
        worker.close()
    np.testing.assert_allclose(got, get_embedder(settings).embed(TEXTS), atol=1e-5)
    assert not path.exists()
    assert isinstance(index_embedder(settings, export=True), OnnxEmbedder)  # exported anew


def _model_folder(root: Path, pooling: str = "pooling_mode_mean_tokens") -> Path:
    (root / "1_Pooling").mkdir(parents=True)
    modules = [
        {"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "1_Pooling" / "config.json").write_text(json.dumps({pooling: True}))
    (root / "tokenizer.json").write_text("{}")
    (root / "model.safetensors").write_bytes(b"weights")
    return root


def test_the_export_is_keyed_by_the_model_files_and_layout(tmp_path):
    folder = _model_folder(tmp_path / "m")
    first = onnx_path(str(folder))
    assert first is not None and first.name == "model.onnx"
    assert onnx_path(str(folder)) == first
    (folder / "model.safetensors").write_bytes(b"other weights")  # a changed model
    assert onnx_path(str(folder)) not in (None, first)
    cls = _model_folder(tmp_path / "cls", pooling="pooling_mode_cls_token")
    assert onnx_path(str(cls)) is None  # not reproduced: stays on sentence-transformers
    assert onnx_path("sentence-transformers/some-hub-name") is None


def test_vector_copies_match_lance_and_follow_its_table(sample_index, monkeypatch):
    _, out, _, _ = sample_index
    version = store.resolve(out)
    copy = out / vector_cache.CACHE_DIR / version.name / "text_units.json"
    copy.unlink(missing_ok=True)
    ids, mat = vectors.read_vectors(out, "text_units")  # through lancedb; writes the copy
    assert copy.is_file() and len(ids) == mat.shape[0] > 0
    cached = vector_cache.load(version, "text_units")
    assert cached is not None
    assert cached[0] == ids and np.array_equal(cached[1], mat)
    # the index's copy, made block by block, is the same file's content
    copy.unlink()
    monkeypatch.setattr(vector_cache, "READ_ROWS", 7)  # blocks of 7 rows, a short last one
    vector_cache.copy_table(version, "text_units")
    streamed = vector_cache.load(version, "text_units")
    assert streamed is not None and len(ids) % 7
    assert streamed[0] == ids and np.array_equal(streamed[1], mat)
    # the first copy's files went with it: one copy's ids and vectors are left
    assert len(list(copy.parent.glob("text_units.*.npy"))) == 2
    # a copy whose vectors file is gone is only a miss
    token = json.loads(copy.read_text())["token"]
    (copy.parent / f"text_units.{token}.vectors.npy").rename(copy.parent / "aside.npy")
    assert vector_cache.load(version, "text_units") is None
    (copy.parent / "aside.npy").rename(copy.parent / f"text_units.{token}.vectors.npy")
    # a copy that does not match its Lance table (recreated: new file names) is not used
    monkeypatch.setattr(vector_cache, "fingerprint", lambda *_: "another table")
    assert vector_cache.load(version, "text_units") is None
    # a folder that is not a published version gets no copy
    assert vector_cache._copy_path(out, "text_units") is None

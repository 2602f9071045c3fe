"""The embedding worker: the model in a child process, the same vectors as inline."""

from __future__ import annotations

import queue
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.vectors import embed_worker
from pipeline.vectors.embed import CachedEmbedder, get_embedder
from pipeline.vectors.embed_worker import EmbeddingWorker

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["Ebenezer Scrooge keeps a counting-house in London.", "Marley was dead.", "Tiny Tim"]


@pytest.fixture(scope="module")
def worker():
    w = EmbeddingWorker(EmbeddingSettings())
    yield w
    w.close()


def test_worker_vectors_equal_inline_ones(worker):
    inline = get_embedder(EmbeddingSettings()).embed(TEXTS)
    futures = [worker.submit(TEXTS[:1]), worker.submit(TEXTS)]  # queued, answered in turn
    first, whole = (f.result(timeout=120) for f in futures)
    assert whole.shape == (3, 384) and whole.dtype == np.float32
    np.testing.assert_allclose(whole, inline, atol=1e-5)
    np.testing.assert_allclose(first[0], inline[0], atol=1e-5)
    assert worker.embed([]).shape == (0, 384)


class _Doubler:
    """An embedder whose vector of a text is (len, 2*len); "bad" fails a call."""

    dim = 2

    def embed(self, texts):
        if "bad" in texts:
            raise ValueError("bad text")
        return np.array([[len(t), 2 * len(t)] for t in texts], dtype=np.float32)


def test_the_worker_embeds_the_requests_waiting_together_and_answers_each(monkeypatch):
    """Requests already waiting are embedded in one pass (sorted by length over all of them),
    up to REQUEST_TEXTS texts; each still gets its own vectors, or its own error."""
    monkeypatch.setattr(embed_worker, "REQUEST_TEXTS", 4)
    inbox: queue.Queue = queue.Queue()
    for item in [(0, ["a"]), (1, ["bb", "ccc"]), (2, ["dddd", "e"]), (3, None), (4, ["f"]), None]:
        inbox.put(item)
    batches = list(embed_worker._batches(inbox))
    assert [[rid for rid, _ in b] for b in batches] == [[0, 1], [2], [3], [4]]
    replies = embed_worker._answer(_Doubler(), batches[0])
    assert [(rid, ok) for rid, ok, _ in replies] == [(0, True), (1, True)]
    np.testing.assert_array_equal(replies[1][2], [[2, 4], [3, 6]])
    assert embed_worker._answer(_Doubler(), batches[2]) == [(3, True, 2)]  # the width
    mixed = embed_worker._answer(_Doubler(), [(5, ["ok"]), (6, ["bad"])])
    assert mixed[0][:2] == (5, True) and mixed[1] == (6, False, "ValueError: bad text")
    # the worker reads at most maxsize texts ahead of the model (a request without texts: 1)
    ahead = embed_worker._TextQueue(maxsize=3)
    ahead.put((7, ["a", "b"]))
    ahead.put((8, None))
    assert ahead.full() and ahead.qsize() == 3
    assert ahead.get() == (7, ["a", "b"]) and ahead.qsize() == 1


def test_a_worker_that_dies_fails_its_pending_requests_and_the_next_one_starts_again(worker):
    worker.embed(TEXTS[:1])
    proc = worker._proc
    pending = worker.submit([f"{TEXTS[0]} {i}" for i in range(5000)])  # seconds of work
    proc.kill()
    with pytest.raises(RuntimeError, match="embedding worker exited with code -9"):
        pending.result(timeout=60)
    again = worker.embed(TEXTS)  # a new child
    assert worker._proc is not proc and again.shape == (3, 384)


def test_the_index_process_never_loads_torch(tmp_path):
    """The embedder resource an index uses embeds through the worker: torch and the model stay
    out of the process that runs the stages."""
    code = textwrap.dedent(
        f"""
        import sys
        from resources import DocgraphConfig, EmbedderResource
        embedder = EmbedderResource(config=DocgraphConfig(output_dir={str(tmp_path)!r})).get()
        vectors = embedder.embed({TEXTS!r})
        assert vectors.shape == (3, 384), vectors.shape
        print("torch" in sys.modules, "sentence_transformers" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]
    assert list((tmp_path / "cache" / "embeddings").rglob("*.parquet"))  # cached as before


def test_prefetched_texts_are_asked_once_and_taken_by_a_later_embed(worker, tmp_path):
    inline = get_embedder(EmbeddingSettings()).embed(TEXTS + ["Bob Cratchit"])
    ahead = CachedEmbedder(worker, tmp_path)
    assert ahead.prefetch(TEXTS) == 3
    assert ahead.prefetch(TEXTS[:2]) == 0  # queued already: not asked twice
    first_id = next(worker._ids)
    later = CachedEmbedder(worker, tmp_path)  # a later step's: the same process, the same queue
    vectors = later.embed(TEXTS + ["Bob Cratchit"])
    assert next(worker._ids) == first_id + 2  # one request in between: "Bob Cratchit" only
    np.testing.assert_allclose(vectors, inline, atol=1e-5)
    assert later.misses == 4 and ahead.prefetch(TEXTS) == 0  # now in the cache
    assert CachedEmbedder(get_embedder(EmbeddingSettings()), tmp_path).prefetch(["x"]) == 0


def test_a_prefetch_lost_with_its_worker_is_asked_again(worker, tmp_path):
    texts = [f"{TEXTS[0]} {i}" for i in range(3000)]  # seconds of work
    cached = CachedEmbedder(worker, tmp_path)
    worker.embed(TEXTS[:1])
    assert cached.prefetch(texts) == 3000
    worker._proc.kill()
    vectors = cached.embed(texts[:2])  # the queued request failed: asked of a new worker
    np.testing.assert_allclose(
        vectors, get_embedder(EmbeddingSettings()).embed(texts[:2]), atol=1e-5
    )


def _metadata(result) -> dict[str, dict]:
    meta: dict[str, dict] = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        meta.setdefault(mat.asset_key.to_user_string(), dict(mat.metadata))
    return meta


def test_an_in_process_index_queues_chunks_ahead(sample_index):
    """The chunks step queues its texts; the step that takes their vectors waits for them
    beside the others, and puts them into the right rows. Entity titles need no model
    (static_titles): none queued."""
    _, out, result, _ = sample_index
    meta = _metadata(result)
    units = store.read_table(out, "text_units")
    assert meta["chunks"]["prefetched"].value == units["text"].n_unique()
    assert meta["chunk_embeddings"]["embedded"].value == units["text"].n_unique()
    assert meta["entities"]["prefetched"].value == 0
    lance = store.lance_db(out).open_table("text_units").to_polars().collect()
    lance = lance.sort("id").head(5)
    rows = lance.join(units.select("id", "text"), on="id")
    expected = get_embedder(EmbeddingSettings()).embed(rows["text"].to_list())
    np.testing.assert_allclose(np.stack(rows["vector"].to_numpy()), expected, atol=1e-5)
    # it waits for them beside the steps that do not need them (the side lane), not before
    events = [(e.event_type_value, e.step_key) for e in result.all_events]
    started = events.index(("STEP_START", "chunk_embeddings"))
    assert events.index(("STEP_START", "extracted_graph")) < events.index(
        ("STEP_SUCCESS", "chunk_embeddings")
    )
    assert started < events.index(("STEP_SUCCESS", "extracted_graph"))


def test_titles_for_the_model_are_queued_by_the_graph_step(tmp_path, monkeypatch):
    """embedding.title_vectors: model: the graph step queues the entity titles on the worker
    and entities_vectors takes them."""
    from app.run import run_index

    monkeypatch.setenv("DOCGRAPH_EMBEDDING__TITLE_VECTORS", "model")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.md").write_text(
        "# Curie\n\nMarie Curie worked with Pierre Curie in Paris, the capital of France.\n"
    )
    result = run_index(
        input_dir=str(tmp_path / "in"), output_dir=str(tmp_path / "out"), log_level="ERROR"
    )
    meta = _metadata(result)
    prefetched = meta["entities"]["prefetched"].value
    assert prefetched > 0
    assert meta["entities_vectors"]["title_vectors"].value == "model"
    # the titles it embedded were queued (taken from the queue, none asked anew)
    assert 0 < meta["entities_vectors"]["embedding_cache_misses"].value <= prefetched


def test_prefetch_holds_at_most_prefetch_max_vectors(worker, tmp_path, monkeypatch):
    monkeypatch.setattr("pipeline.vectors.embed.PREFETCH_MAX", 2)
    cached = CachedEmbedder(worker, tmp_path)
    assert cached.prefetch(["Fezziwig", "Belle", "Fred"]) == 2  # the third waits to be asked
    assert cached.prefetch(["Jacob Marley"]) == 0
    cached.embed(["Fezziwig", "Belle", "Fred", "Jacob Marley"])  # takes the two, asks two
    assert cached.prefetch(["Ghost of Christmas Past"]) == 1


def test_a_run_that_does_not_embed_its_chunks_queues_nothing(tmp_path):
    """Chunks materialized without chunk_embeddings: nobody would take queued vectors."""
    from dagster import materialize

    from assets.chunking import chunks_asset
    from assets.ingest import documents_asset
    from assets.structure import structure_asset
    from resources import DocgraphConfig, EmbedderResource

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.md").write_text("# Alpha\n\nAda Lovelace met Charles Babbage.\n")
    config = DocgraphConfig(input_dir=str(tmp_path / "in"), output_dir=str(tmp_path / "out"))
    result = materialize(
        [documents_asset(1), structure_asset(1), chunks_asset(1)],
        partition_key="000",
        resources={"docgraph": config, "embedder": EmbedderResource(config=config)},
    )
    [event] = [
        e for e in result.get_asset_materialization_events() if e.asset_key.path == ["chunks"]
    ]
    assert event.materialization.metadata["prefetched"].value == 0

"""The embedding worker: the model in a child process, the same vectors as inline."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import EmbeddingSettings
from pipeline.vectors.embed import get_embedder
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

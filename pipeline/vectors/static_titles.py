"""Entity titles' vectors without a forward pass, from the model's context-free token states.

Why: an entity's default vector is its title's vector plus the mean of its text units'
(embedding.entity_vectors "name+context"), and embedding the titles was the model's
second-largest job: on MuSiQue 11,854 titles, 57.8k tokens against the text units' 204.5k,
17 of the embedding worker's 81 CPU-s, paid after the text units. The model's vector of a
title is the normalised mean of the last hidden states over its tokens and the specials
([CLS], [SEP]) around them. Here each token's state is the one it has alone in a text,
computed once per model for the whole vocabulary (`OnnxEmbedder.token_states`, written
beside the ONNX export by the index's embedding worker: ~15 s and 47 MB for MiniLM's 30,522
tokens), and the specials' states by their mean over the vocabulary; a title then costs a
tokenization and a sparse sum (4,000 titles: 0.08 s against 3.2 s through the model).

Against the model's own title vectors, on MuSiQue's titles: cosine 0.82 on average, and the
model's vector of a title is nearest to its own static vector for 96.6% of them. In the
index (benchmarks/retrieval.py, 100 questions): R@5 local/expand/flow/flow_quick 74.3 /
72.1 / 70.6 / 64.3 against 74.8 / 72.9 / 70.6 / 65.8, within the questions' noise; the
entities_vectors step 9.0 s -> 1.5 s (benchmarks/throughput.py, docs/scale.md).
`embedding.title_vectors: model` embeds the titles instead.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pipeline.config import EmbeddingSettings
from pipeline.vectors.derive_vectors import normalise
from pipeline.vectors.embed import resolve_model
from pipeline.vectors.embed_onnx import TOKEN_STATES_FILE, max_length, onnx_path


class StaticTitles:
    """`embed(titles)` from a token-state table (rows: tokens, then the specials' sum)."""

    def __init__(self, tokenizer_file: Path, table_file: Path, max_tokens: int):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.table = np.load(table_file, mmap_mode="r")
        rows = self.tokenizer.get_vocab_size() + 1
        if self.table.ndim != 2 or self.table.shape[0] != rows or self.table.dtype != np.float32:
            raise ValueError(f"{self.table.shape} {self.table.dtype}, not ({rows}, dim) float32")
        # the model sees at most max_tokens with the specials; titles are tokenized without
        specials = len(self.tokenizer.encode("").ids)
        self.tokenizer.enable_truncation(max_length=max(1, max_tokens - specials))
        self.tokenizer.no_padding()

    def embed(self, titles: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(titles, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(titles))
        ids = np.fromiter(
            (t for e in encodings for t in e.ids), dtype=np.int64, count=int(lengths.sum())
        )
        vocab = self.table.shape[0] - 1
        rows = np.repeat(np.arange(len(titles)), lengths)
        counts = sp.csr_matrix(
            (np.ones(len(ids), dtype=np.float32), (rows, ids)), shape=(len(titles), vocab)
        )
        return normalise(np.asarray(counts @ self.table[:vocab]) + self.table[vocab])


_LOADED: dict[str, StaticTitles] = {}
_LOCK = threading.Lock()


def static_titles(embedder, settings: EmbeddingSettings) -> StaticTitles | None:
    """The token-state titles for `embedder` when the settings ask for them (`wanted`) and its
    model's table exists; None: embed the titles with the model. A missing table is waited
    for once from the embedder's worker, which writes it as it starts (a step in a process
    of its own, on a new machine, may be the first to start one)."""
    if not wanted(embedder, settings):
        return None
    model_id = resolve_model(settings.model)
    table = onnx_path(model_id).with_name(TOKEN_STATES_FILE)
    if not table.is_file() and (ready := getattr(embedder, "ready", None)) is not None:
        ready()
    if not table.is_file():
        return None  # not exported (another device, an inline model not yet exported)
    with _LOCK:
        key = str(table)
        if key not in _LOADED:
            folder = Path(model_id)
            try:
                _LOADED[key] = StaticTitles(folder / "tokenizer.json", table, max_length(folder))
            except (OSError, ValueError) as exc:  # a damaged file: the next worker writes it
                table.unlink(missing_ok=True)
                print(
                    f"docgraph: warning: removed the token states {table}: {exc}; "
                    "entity titles are embedded by the model this time",
                    file=sys.stderr,
                )
                return None
        return _LOADED[key]


def wanted(embedder, settings: EmbeddingSettings) -> bool:
    """Whether titles should come from token states: the settings say so and `embedder` runs
    the configured model (a caller's own embedder's vectors are not the table's), one
    that can be exported (pipeline.vectors.embed_onnx.supported). Decided from these alone,
    not from what this machine's cache holds, so that every run of the same settings makes
    the same vectors and a step can tell before the table exists."""
    if settings.title_vectors != "static" or settings.entity_vectors != "name+context":
        return False
    if settings.device != "cpu":
        return False  # the model is exported for the CPU only
    model_id = resolve_model(settings.model)
    return getattr(embedder, "model_id", None) == model_id and onnx_path(model_id) is not None


def title_vectors(titles: list[str], embedder, settings: EmbeddingSettings) -> np.ndarray:
    """(n, dim) vectors of entity titles: static (above) or embedded by the model."""
    static = static_titles(embedder, settings)
    return static.embed(titles) if static is not None else embedder.embed(titles)

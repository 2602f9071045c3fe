"""Semantic chunking: cuts where the topic changes, measured on sentence embeddings.

SemanticChunker scores boundaries by the similarity of the sentences around them; SemanticSmart
is SmartChunker with those cuts and every sentence embedded up front in one batched call."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.chunking.segments import HEADING, Span
from pipeline.chunking.simple import SimpleChunker
from pipeline.chunking.smart import Node, Nodes, SmartChunker, Tree, as_nodes
from pipeline.chunking.sources import Text
from pipeline.config import ChunkingSettings


class SemanticChunker(SimpleChunker):
    """Cuts where the topic changes: the cosine between the mean embeddings of the
    `semantic_window` sentences before and after a boundary; boundaries at or below the
    `semantic_percentile` of a text's boundaries (and heading boundaries) are the cut
    candidates, and the content-anchored machinery of SimpleChunker picks among them (the
    local minimum of similarity within `min_size` tokens) and splits over-long spans at their
    least similar boundary. A text that fits chunk_size is still cut at a topic change.

    Cost: it embeds every sentence (about 15-25 per 300-token unit), so indexing embeds
    ~20x more (shorter) texts than chunk-level embedding: minutes per thousand pages on a CPU.
    Sentence vectors are looked up in `vectors` (text -> L2-normalised vector), filled in
    one batched call before chunking (see `SemanticSmart.prepare`).
    """

    fast_path = False
    windowed = False  # a boundary's score is a percentile over the whole text: one window
    CANDIDATE = 4.0

    def __init__(self, settings: ChunkingSettings, vectors: dict[str, np.ndarray] | None = None):
        super().__init__(settings)
        self.vectors: dict[str, np.ndarray] = vectors if vectors is not None else {}
        self.percentile = settings.semantic_percentile
        self.sim_window = max(1, settings.semantic_window)

    def sentences(self, text: str, spans: Sequence[Span] | None = None) -> list[str]:
        starts, ends, _, _ = self._sentences(text, spans)
        return [text[a:b] for a, b in zip(starts, ends, strict=True)]

    def similarities(self, text: Text, starts: list[int], ends: list[int]) -> np.ndarray:
        """Cosine across each boundary i (after sentence i) of the windows around it."""
        n = len(starts)
        if n < 2:
            return np.ones(max(n, 0), dtype=np.float32)
        vecs = np.stack([self.vectors[text[a:b]] for a, b in zip(starts, ends, strict=True)])
        cs = np.vstack([np.zeros((1, vecs.shape[1]), dtype=np.float64), np.cumsum(vecs, axis=0)])
        idx = np.arange(1, n)  # boundary after sentence idx-1 sits at cumulative index idx
        w = self.sim_window
        before = cs[idx] - cs[np.maximum(idx - w, 0)]
        after = cs[np.minimum(idx + w, n)] - cs[idx]
        num = (before * after).sum(axis=1)
        den = np.linalg.norm(before, axis=1) * np.linalg.norm(after, axis=1)
        sims = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0)
        return np.append(sims, 1.0).astype(np.float64)  # the text's end: not a cut

    def _scores(self, text: Text, starts: list[int], ends: list[int], levels: list[float]):
        sims = self.similarities(text, starts, ends)
        lv = np.asarray(levels, dtype=np.float64)
        inner = sims[:-1]
        thr = np.percentile(inner, self.percentile) if inner.size else -1.0
        cand = (sims <= thr) | (lv >= HEADING)
        cand[-1] = False
        scores = np.where(cand, self.CANDIDATE, 0.0) + 0.25 * np.maximum(lv, -2.0) + (1 - sims) / 2
        return scores.tolist()

    def _anchors(self, cum: list[int], scores: list[float], first: int, stop: int) -> list[int]:
        anchors = super()._anchors(cum, scores, first, stop)
        return [i for i in anchors if scores[i] >= self.CANDIDATE - 0.5]


class SemanticSmart(SmartChunker):
    """SmartChunker whose cuts are SemanticChunker's; sentence vectors embedded up front."""

    def __init__(self, settings: ChunkingSettings, embedder) -> None:
        super().__init__(settings, SemanticChunker)
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}

    def _make(self, settings: ChunkingSettings) -> SimpleChunker:
        return SemanticChunker(settings, self.vectors)

    def prepare(self, docs: list[tuple[Tree, list[Node] | Nodes]]) -> None:
        """Embed every sentence of every group once, in one batched call."""
        todo: dict[str, None] = {}
        for tree, doc_nodes in docs:
            nodes = as_nodes(doc_nodes)
            for group in self.groups(tree, nodes):
                read = nodes.read(group[0].start, group[-1].stop)
                text, spans, gnodes = self.group_text(list(read))
                if not gnodes:
                    continue
                longest = max(self._prefix_tokens(tree, b.section_id) for b in group)
                chunker = self.chunker(self.settings.chunk_size - longest)
                for s in chunker.sentences(text, spans):  # type: ignore[attr-defined]
                    if s not in self.vectors:
                        todo[s] = None
        texts = list(todo)
        if texts:
            vecs = np.asarray(self.embedder.embed(texts), dtype=np.float64)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs / np.where(norms == 0, 1.0, norms)
            self.vectors.update(zip(texts, vecs, strict=True))

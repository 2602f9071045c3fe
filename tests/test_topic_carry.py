"""SAME_TOPIC carried over (pipeline.vectors.topic_carry): after any sequence of edits,
additions and deletions of documents the lists and edges equal a full search of the same
sections (above exact_max_sections: a full search over the kept centroids), and the run goes
whole when it should."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.config import SameTopicSettings
from pipeline.vectors.same_topic import edges_frame, full_search, group_codes
from pipeline.vectors.topic_carry import (
    RETRAIN_FRACTION,
    TopicState,
    _lists_frame,
    carry_search,
    read_state,
    write_state,
)
from pipeline.vectors.topic_search import Lists, cosines, neighbour_lists, top_k_columns, unit_rows


class Corpus:
    """Documents of 1-3 sections, each section near one of `topics` centres (seeded)."""

    def __init__(self, seed: int, topics: int = 12, dim: int = 24) -> None:
        self.rng = np.random.default_rng(seed)
        self.centres = self.rng.normal(size=(topics, dim))
        self.docs: dict[str, list[tuple[str, np.ndarray]]] = {}
        self.made = 0

    def add(self) -> str:
        doc = f"d{self.made:04d}"
        self.made += 1
        sections = []
        for s in range(int(self.rng.integers(1, 4))):
            centre = self.centres[self.rng.integers(len(self.centres))]
            vec = centre + self.rng.normal(scale=0.5, size=centre.shape)
            sections.append((f"s{self.made:04d}{s}{doc}", vec.astype(np.float32)))
        self.docs[doc] = sections
        return doc

    def rows(self) -> tuple[pl.DataFrame, np.ndarray]:
        """(id, document_id) by id, and their vectors (unit rows)."""
        items = sorted((sid, doc, vec) for doc, secs in self.docs.items() for sid, vec in secs)
        rows = pl.DataFrame({"id": [i[0] for i in items], "document_id": [i[1] for i in items]})
        return rows, unit_rows(np.stack([i[2] for i in items]))


def _full(rows, unit, settings, centroids=None):
    if centroids is None:
        return full_search(unit, group_codes(rows), settings)
    lists = Lists(unit, centroids, settings.probes)
    k = min(settings.max_connections, len(unit) - 1)
    cross = group_codes(rows) if settings.cross_doc_only else None
    return neighbour_lists(unit, cross, lists, k, settings.min_similarity), centroids


def _state(rows, found, centroids, settings, changed=0):
    k = min(settings.max_connections, rows.height - 1)
    trained = rows.height if centroids is not None else 0
    return TopicState(_lists_frame(rows["id"], found), k, centroids, trained, changed)


@pytest.mark.parametrize(
    ("exact_max", "cross"), [(10_000, True), (10_000, False), (150, True)], ids=str
)
def test_a_random_sequence_of_changes_equals_a_full_search(exact_max, cross):
    settings = SameTopicSettings(
        exact_max_sections=exact_max, probes=4, min_similarity=0.3, cross_doc_only=cross
    )
    corpus = Corpus(seed=exact_max + cross)
    for _ in range(150):
        corpus.add()
    rows, unit = corpus.rows()
    found, centroids = _full(rows, unit, settings)
    assert (centroids is not None) == (exact_max < rows.height)
    state = _state(rows, found, centroids, settings)
    carried_runs = 0
    for step in range(20):  # edits, additions, deletions, a few at a time
        added, removed = set(), set()
        for _ in range(int(corpus.rng.integers(1, 4))):
            op = corpus.rng.choice(["edit", "add", "delete"])
            doc = sorted(corpus.docs)[int(corpus.rng.integers(len(corpus.docs)))]
            if op in ("edit", "delete"):
                removed |= {sid for sid, _ in corpus.docs.pop(doc)}
            if op in ("edit", "add"):
                added |= {sid for sid, _ in corpus.docs[corpus.add()]}
        rows, unit = corpus.rows()
        carried = carry_search(rows["id"], unit, group_codes(rows), settings, state, added, removed)
        if isinstance(carried, str):  # the run goes whole (the lists are trained again)
            assert "since training" in carried, carried
            found, centroids = _full(rows, unit, settings)
            state = _state(rows, found, centroids, settings)
            continue
        carried_runs += 1
        found, meta = carried
        want, _ = _full(rows, unit, settings, state.centroids)
        got_lists, want_lists = (_lists_frame(rows["id"], f) for f in (found, want))
        assert got_lists.equals(want_lists), step
        got = edges_frame(rows["id"], found, settings, {})
        assert got.equals(edges_frame(rows["id"], want, settings, {})), step
        assert meta["rows_recomputed"] + meta["rows_carried"] == rows.height
        assert meta["rows_recomputed"] < rows.height / 4
        changed = state.changed + len(added) + len(removed) if state.centroids is not None else 0
        lists = _lists_frame(rows["id"], found)
        state = TopicState(lists, state.k, state.centroids, state.trained, changed)
    assert carried_runs >= 10


def test_lists_are_trained_again_past_the_retrain_fraction():
    settings = SameTopicSettings(exact_max_sections=50, probes=3, min_similarity=0.3)
    corpus = Corpus(seed=5)
    for _ in range(60):
        corpus.add()
    rows, unit = corpus.rows()
    found, centroids = _full(rows, unit, settings)
    state = _state(rows, found, centroids, settings)
    added = set()
    while len(added) <= RETRAIN_FRACTION * rows.height:
        added |= {sid for sid, _ in corpus.docs[corpus.add()]}
    now, unit = corpus.rows()
    reason = carry_search(now["id"], unit, group_codes(now), settings, state, added, set())
    assert isinstance(reason, str) and "since training" in reason


def test_crossing_exact_max_or_too_much_change_runs_whole():
    corpus = Corpus(seed=7)
    for _ in range(40):
        corpus.add()
    rows, unit = corpus.rows()
    exact = SameTopicSettings(exact_max_sections=rows.height + 1, min_similarity=0.3)
    found, _ = _full(rows, unit, exact)
    state = _state(rows, found, None, exact)
    added = {sid for sid, _ in corpus.docs[corpus.add()]}
    added |= {sid for sid, _ in corpus.docs[corpus.add()]}
    now, unit2 = corpus.rows()
    assert now.height > exact.exact_max_sections
    reason = carry_search(now["id"], unit2, group_codes(now), exact, state, added, set())
    assert isinstance(reason, str) and "past same_topic.exact_max_sections" in reason
    gone = {sid for doc in sorted(corpus.docs)[:30] for sid, _ in corpus.docs[doc]}
    keep = ~rows["id"].is_in(list(gone))
    small, unit3 = rows.filter(keep), unit[keep.to_numpy()]
    reason = carry_search(small["id"], unit3, group_codes(small), exact, state, set(), gone)
    assert isinstance(reason, str) and "sections to search" in reason


def test_the_state_round_trips_and_a_foreign_one_is_ignored(tmp_path):
    corpus = Corpus(seed=9)
    for _ in range(30):
        corpus.add()
    rows, unit = corpus.rows()
    settings = SameTopicSettings(exact_max_sections=20, probes=3, min_similarity=0.3)
    found, centroids = _full(rows, unit, settings)
    state = _state(rows, found, centroids, settings, changed=4)
    write_state(tmp_path, state)
    back = read_state(tmp_path)
    assert back is not None and back.lists.equals(state.lists)
    assert np.array_equal(back.centroids, centroids)
    assert (back.k, back.trained, back.changed) == (state.k, state.trained, 4)
    write_state(tmp_path, _state(rows, found, None, settings))  # replaced whole
    assert read_state(tmp_path).centroids is None  # type: ignore[union-attr]
    (tmp_path / "same_topic_state" / "state.json").write_text('{"format": 99}')
    assert read_state(tmp_path) is None
    write_state(tmp_path, None)
    assert read_state(tmp_path) is None and not (tmp_path / "same_topic_state").exists()


def test_cosines_are_the_same_floats_in_any_product():
    """What carrying lists rests on: an entry of a product does not depend on the shapes
    (OpenBLAS rounds single rows and small products differently: cosines pads them)."""
    rng = np.random.default_rng(0)
    unit = unit_rows(rng.normal(size=(1500, 384)).astype(np.float32))
    whole = cosines(unit, unit)
    assert np.array_equal(whole, whole.T)
    for _ in range(200):
        q = np.sort(rng.choice(1500, int(rng.integers(1, 60)), replace=False))
        c = np.sort(rng.choice(1500, int(rng.integers(1, 400)), replace=False))
        assert np.array_equal(cosines(unit[q], unit[c]), whole[np.ix_(q, c)])


def test_top_k_breaks_ties_by_column():
    s = np.array([[0.5, 0.9, 0.5, 0.5, 0.1], [0.2, 0.2, 0.2, 0.2, 0.2]], dtype=np.float32)
    top = top_k_columns(s, 3)
    assert sorted(top[0].tolist()) == [0, 1, 2] and sorted(top[1].tolist()) == [0, 1, 2]

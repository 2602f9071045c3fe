"""SAME_TOPIC after an edit: only the sections the edit touched are searched (issue 49), and
the edges equal those of a full search of the same sections.

The edges are a function of every section's top-k list (pipeline.vectors.same_topic: the
union of the lists, thinned by `cap_degree`). A version keeps those lists (`STATE_DIR`), so a
run recomputes only the lists an edit can change, then unions and thins all lists again (the
greedy thinning is global, but ~O(n log n) over n*k pairs: 0.1 s at 40k sections):

- a section of a document the run added gets its list searched afresh (an edited document
  is removed and added: its vectors may have changed, whatever its sections' ids);
- a kept section that had a removed section in its list is searched afresh (its next best
  partner may be any section);
- every other kept section keeps its list, merged with the added sections that beat its
  k-th cosine (or pass `min_similarity` while its list is short): the added sections'
  cosines with every kept section are one (added x all) product.

Lists hold cosines to the bit (pipeline.vectors.topic_search), so the merge orders exactly
as a full search does. Above `exact_max_sections` the search is approximate (each section
against the rows of its k-means list's `probes` nearest lists), and the lists themselves
depend on every section. A carried run keeps the base's centroids and assigns new sections
to them: its edges equal a full search over those centroids (tested), not a search over
centroids trained afresh on today's sections, which would find other approximate
neighbours. The centroids are trained again (a whole run) once the sections added and
removed since they were trained pass `RETRAIN_FRACTION` of the rows they were trained on,
when the corpus crosses `exact_max_sections` either way, and on any whole run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import SameTopicSettings
from pipeline.storage.files import umask
from pipeline.storage.run_changes import RunChanges
from pipeline.vectors.same_topic import (
    about,
    edges_frame,
    full_search,
    group_codes,
    section_vectors,
)
from pipeline.vectors.topic_search import (
    BLOCK_ELEMENTS,
    Found,
    Lists,
    cosines,
    neighbour_lists,
    unit_rows,
)

STATE_DIR = "same_topic_state"  # in a version: lists.parquet, state.json, centroids.npy
FORMAT = 1
# A run searches whole once the sections to search afresh pass this fraction of all. A carried
# run also compares the added sections with every section and reads and ranks the lists:
# measured (8k sections, 1 BLAS thread, docs/incremental.md) at 0.27 of a whole search's CPU
# with 10% searched, 0.53 with 41% (exact), and ~0.6 from 5% to 41% in the inverted-list
# regime (assigning every row to its list is a fixed cost there).
WHOLE_FRACTION = 0.5
# Approximate regime: the centroids are trained again once the sections added and removed
# since training reach this fraction of the rows they were trained on. Measured: no loss of
# recall for growth from the same corpus (8k sections, 16 probes: 0.852 trained on all, 0.867
# with 49% added since, 0.872 with 100%); half leaves room for a drift to new topics, which
# puts new sections into the lists of old centroids.
RETRAIN_FRACTION = 0.5


@dataclass
class TopicState:
    """What a version keeps of its SAME_TOPIC search: every section's top-k list, the
    k it was searched with, and in the approximate regime the centroids, the rows they
    were trained on and the sections added and removed since."""

    lists: pl.DataFrame  # section_id, neighbour_id, similarity (float32)
    k: int
    centroids: np.ndarray | None = None
    trained: int = 0
    changed: int = 0


@dataclass
class TopicRun:
    edges: pl.DataFrame
    state: TopicState | None
    meta: dict = field(default_factory=dict)


def read_state(version: Path | None) -> TopicState | None:
    """The state `version` keeps (None: none, or not one this code wrote)."""
    folder = Path(version) / STATE_DIR if version is not None else None
    try:
        info = json.loads((folder / "state.json").read_text(encoding="utf-8"))  # type: ignore[operator]
        if info.get("format") != FORMAT:
            return None
        lists = pl.read_parquet(folder / "lists.parquet")  # type: ignore[operator]
        centroids = np.load(folder / "centroids.npy") if info["centroids"] else None  # type: ignore[operator]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return TopicState(lists, info["k"], centroids, info["trained"], info["changed"])


def write_state(folder: Path, state: TopicState | None) -> None:
    """Into `folder`/STATE_DIR, replacing what is there in one rename (None: removed)."""
    target = Path(folder) / STATE_DIR
    if state is None:
        shutil.rmtree(target, ignore_errors=True)
        return
    tmp = Path(tempfile.mkdtemp(prefix=f".{STATE_DIR}-", dir=folder))
    tmp.chmod(0o777 & ~umask())
    try:
        state.lists.write_parquet(tmp / "lists.parquet")
        if state.centroids is not None:
            np.save(tmp / "centroids.npy", state.centroids)
        info = {
            "format": FORMAT,
            "k": state.k,
            "centroids": state.centroids is not None,
            "trained": state.trained,
            "changed": state.changed,
        }
        (tmp / "state.json").write_text(json.dumps(info), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)  # its files may be links into the last version
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def touched_sections(changes: RunChanges, sections: pl.DataFrame) -> tuple[set[str], set[str]]:
    """(added, removed) section ids: the sections of each document the run added (today's
    `sections`, id and document_id) and of each it removed (the base's, read from the
    shards the run changed); an edited document's sections are both."""
    docs = changes.of("documents")
    added = set(sections.filter(pl.col("document_id").is_in(list(docs.added)))["id"].to_list())
    removed: set[str] = set()
    for shard in sorted(changes.shards):
        base = changes.base_shard("sections", shard, ["id", "document_id"])
        removed |= set(base.filter(pl.col("document_id").is_in(list(docs.removed)))["id"])
    rows = changes.of("sections")
    return added | rows.added, removed | rows.removed


def _lists_frame(ids: pl.Series, found: Found) -> pl.DataFrame:
    """The lists as kept, by (section, partner): the same file whatever searched them."""
    order = np.lexsort((found[1], found[0]))
    src, dst, sim = (f[order] for f in found)
    return pl.DataFrame(
        {
            "section_id": ids.gather(src),
            "neighbour_id": ids.gather(dst),
            "similarity": pl.Series(sim, dtype=pl.Float32),
        }
    )


def _rows_of(ids: pl.Series, keys: pl.Series) -> np.ndarray:
    """The row of each of `keys` in `ids` (-1: absent)."""
    index = pl.DataFrame({"key": ids, "row": np.arange(len(ids), dtype=np.int64)})
    joined = keys.to_frame("key").join(index, on="key", how="left", maintain_order="left")
    return joined["row"].fill_null(-1).to_numpy()


def _rank_within(src: np.ndarray, dst: np.ndarray, sim: np.ndarray, k: int) -> Found:
    """Each row's best k of (src, dst, sim) in (cosine descending, partner ascending)."""
    order = np.lexsort((dst, -sim.astype(np.float64), src))
    src, dst, sim = src[order], dst[order], sim[order]
    starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, len(src)]))
    keep = np.arange(len(src)) - first < k
    return src[keep], dst[keep], sim[keep]


def _added_beating(
    unit, groups, lists: Lists, added: np.ndarray, kept: np.ndarray, bar: np.ndarray
) -> Found:
    """(kept row, added row, cosine) for each added row whose cosine with a kept row that
    compares with it (its list probes the added row's) reaches that row's `bar`: few added
    rows against every row (outside the lists masked), many a list at a time."""
    is_kept = np.zeros(len(unit), dtype=bool)
    is_kept[kept] = True
    if lists.masked_is_cheaper(added, reverse=True):
        batches = [(added, np.arange(len(unit)))]  # every row: no copy of the matrix
    else:
        batches = [
            (added[lists.row_list[added] == c], lists.candidates(lists.probing(c)))
            for c in np.unique(lists.row_list[added]).tolist()
        ]
    found = []
    for rows, cands in batches:
        cands = cands[is_kept[cands]]
        step = max(1, BLOCK_ELEMENTS // max(len(cands), 1))
        matrix = unit[cands].astype(np.float64)  # once, not per block (cosines)
        for at in range(0, len(rows), step):
            q = rows[at : at + step]
            s = cosines(unit[q], matrix)
            ok = s >= bar[cands][None, :]
            if groups is not None:
                ok &= groups[q][:, None] != groups[cands][None, :]
            if lists.centroids is not None:
                ok &= lists.compared(cands, q).T
            a, i = np.nonzero(ok)
            found.append((cands[i], q[a], s[a, i]))
    if not found:
        none = np.zeros(0, dtype=np.int64)
        return none, none, np.zeros(0, dtype=np.float32)
    return tuple(np.concatenate([f[j] for f in found]) for j in range(3))  # type: ignore[return-value]


def carry_search(
    ids: pl.Series,
    unit: np.ndarray,
    groups: np.ndarray,
    settings: SameTopicSettings,
    state: TopicState,
    added: set[str],
    removed: set[str],
) -> tuple[Found, dict] | str:
    """Every row's top-k list from `state`'s, searching only the rows the change touched;
    a reason string instead when the run must search whole."""
    n, k = len(ids), min(settings.max_connections, len(ids) - 1)
    if state.k != k:
        return f"max partners per section {state.k} -> {k}"
    approx = n > settings.exact_max_sections
    if approx != (state.centroids is not None):
        return f"{n} sections: {'past' if approx else 'back under'} same_topic.exact_max_sections"
    changed = state.changed + len(added) + len(removed)
    if approx and changed > RETRAIN_FRACTION * state.trained:
        return f"{changed} sections added or removed since training on {state.trained}"
    src_old = state.lists["section_id"]
    src, dst = _rows_of(ids, src_old), _rows_of(ids, state.lists["neighbour_id"])
    gone_src = src_old.is_in(list(removed)).to_numpy()
    gone_dst = state.lists["neighbour_id"].is_in(list(removed)).to_numpy()
    if ((src < 0) & ~gone_src).any() or ((dst < 0) & ~gone_dst).any():
        return "the base's lists name sections that are neither today's nor removed"
    is_added = ids.is_in(list(added)).to_numpy()
    dirty = np.zeros(n, dtype=bool)
    dirty[src[gone_dst & ~gone_src]] = True
    search = np.flatnonzero(is_added | dirty)
    if len(search) > WHOLE_FRACTION * n:
        return f"{len(search)} of {n} sections to search (over {WHOLE_FRACTION:.0%})"
    lists = Lists(unit, state.centroids, settings.probes)
    cross = groups if settings.cross_doc_only else None
    fresh = neighbour_lists(unit, cross, lists, k, settings.min_similarity, rows=search)
    keep = ~gone_src & ~gone_dst & (src >= 0)
    keep[keep] = ~(is_added | dirty)[src[keep]]
    old: Found = (src[keep], dst[keep], state.lists["similarity"].to_numpy()[keep])
    bar = np.full(n, settings.min_similarity, dtype=np.float32)
    counts = np.bincount(old[0], minlength=n)
    kth = np.full(n, np.inf, dtype=np.float32)
    np.minimum.at(kth, old[0], old[2])
    full = counts >= k
    bar[full] = np.maximum(kth[full], settings.min_similarity)
    kept = np.flatnonzero(~(is_added | dirty))
    new = _added_beating(unit, cross, lists, np.flatnonzero(is_added), kept, bar)
    # only the lists an added row reached are ranked again; the others stay as they were
    reached = np.zeros(n, dtype=bool)
    reached[new[0]] = True
    touched = reached[old[0]]
    merged = _rank_within(
        *(np.concatenate([o[touched], w]) for o, w in zip(old, new, strict=True)), k
    )
    found: Found = tuple(  # type: ignore[assignment]
        np.concatenate([f, o[~touched], m]) for f, o, m in zip(fresh, old, merged, strict=True)
    )
    meta = {
        "sections_added": int(is_added.sum()),
        "sections_removed": len(removed),
        "sections_searched_again": int(dirty.sum()),
        "lists_merged": int(len(np.unique(new[0]))),
        "rows_recomputed": len(search),
        "rows_carried": n - len(search),
    }
    return found, meta


def same_topic_run(
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    embedder,
    settings: SameTopicSettings,
    changes: RunChanges | None,
    text_units: pl.DataFrame | None = None,
    unit_vectors: Callable[[], tuple[list[str], np.ndarray]] | None = None,
) -> TopicRun:
    """SAME_TOPIC edges (pipeline.vectors.same_topic) and the state to keep, carried over
    from `changes.base` where it can be (see the module docstring). `unit_vectors` reads
    the text units' (ids, vectors), held only while the sections' means are made (it runs
    beside the reports: 69 MB at 40k documents)."""
    if not settings.enabled:
        return TopicRun(schemas.empty("structure_edges"), None, _whole(0, "disabled"))
    units = None if unit_vectors is None else unit_vectors()
    rows, vecs, method = section_vectors(
        sections, content_nodes, embedder, settings, text_units, units
    )
    del units
    n = rows.height
    if n < 2:
        return TopicRun(schemas.empty("structure_edges"), None, _whole(n, "under two sections"))
    unit, groups, ids = unit_rows(vecs, in_place=True), group_codes(rows), rows["id"]
    reason = changes.whole if changes is not None else "no base version"
    state = read_state(changes.base) if changes is not None and reason is None else None
    if reason is None and state is None:
        reason = "the base version keeps no SAME_TOPIC lists"
    carried = None
    if reason is None:
        assert state is not None and changes is not None
        added, removed = touched_sections(changes, sections)
        carried = carry_search(ids, unit, groups, settings, state, added, removed)
        reason = carried if isinstance(carried, str) else None
    if reason is None and not isinstance(carried, str) and carried is not None:
        assert state is not None
        found, meta = carried
        meta = {**meta, "incremental": "carried", "incremental_reason": "sections changed"}
        changed = 0  # counted towards training the lists again; exact search has none
        if state.centroids is not None:
            changed = state.changed + meta["sections_added"] + meta["sections_removed"]
        new_state = TopicState(
            _lists_frame(ids, found), state.k, state.centroids, state.trained, changed
        )
    else:
        found, centroids = full_search(unit, groups, settings)
        meta = _whole(n, reason or "")
        k = min(settings.max_connections, n - 1)
        trained = n if centroids is not None else 0
        new_state = TopicState(_lists_frame(ids, found), k, centroids, trained)
    edges = edges_frame(ids, found, settings, about(method, n, settings))
    return TopicRun(edges, new_state, meta)


def _whole(rows: int, reason: str) -> dict:
    return {
        "rows_recomputed": rows,
        "rows_carried": 0,
        "incremental": "whole",
        "incremental_reason": reason,
    }

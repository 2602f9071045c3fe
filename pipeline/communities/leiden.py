"""Hierarchical Leiden communities over the entity graph, deterministic: the stage's entry.

`hierarchical_leiden` builds the communities table: the hierarchy from scratch
(pipeline.communities.hierarchy) or, on a re-run, carried over from the previous table
(pipeline.communities.carry_over), then rows with ids (pipeline.communities.table).

Re-runs (`previous`, the last run's table): after a small change (at most
`incremental_max_change` of the clustered entities new or gone) the previous hierarchy is
carried over instead of recomputed, so that communities, their numbers and their cached LLM
reports survive one added document. A larger change recomputes, and so does a change
accumulated over many small runs: `plan_communities` decides from a small state (`next_state`:
counts since the last full recompute, a hash of the partition settings) that the caller keeps
beside the table; this module holds that decision and its state.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np
import polars as pl

from pipeline.communities.carry_over import Diff, carry_blocker, diff_previous, update_hierarchy
from pipeline.communities.hierarchy import build_hierarchy, edge_arrays, frames_of
from pipeline.communities.table import Reuse, communities_table
from pipeline.config import GraphSettings
from pipeline.ids import sha256_hex
from pipeline.schemas import empty

# The columns of each input table this stage reads (incremental carry-over included): its
# Dagster asset loads only these (resources.parquet_io); tests/test_stage_inputs.py checks it.
INPUT_COLUMNS = {
    "entities": ["id", "text_unit_ids"],
    "relationships": ["id", "source_id", "target_id", "weight"],
}

# The columns of the last run's communities table that planning, carrying it over
# (pipeline.communities.carry_over) and stamping periods (pipeline.compat.columns) read:
# its text unit lists, most of its bytes (4.6M ids for one 151 MB file), are not read.
PREVIOUS_COLUMNS = ["id", "community", "level", "parent", "children", "entity_ids", "period"]

# Graph settings that shape the partition: a change to any of them recomputes. Bump
# PARTITION_VERSION when the algorithm itself changes in a way that should do the same.
PARTITION_SETTINGS = ("seed", "max_cluster_size", "max_levels")
PARTITION_VERSION = 2  # 2: igraph's Leiden instead of leidenalg's
STATE_VERSION = 1


def partition_hash(settings: GraphSettings) -> str:
    data = {"version": PARTITION_VERSION, **settings.model_dump(include=set(PARTITION_SETTINGS))}
    return sha256_hex(json.dumps(data, sort_keys=True).encode("utf-8"))


def table_hash(communities: pl.DataFrame) -> str:
    """Fingerprint of a communities table (numbers and member-derived ids): a state sidecar
    names the table it describes, so a sidecar left beside another table is not trusted."""
    lines = communities.sort("community").select(
        pl.format("{}:{}", pl.col("community"), pl.col("id"))
    )
    return sha256_hex("\n".join(lines.to_series().to_list()).encode("utf-8"))


def _valid_state(state: object) -> bool:
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return False
    ints = ("base_entities", "added", "removed")
    return all(isinstance(state.get(k), str) for k in ("partition_hash", "table_hash")) and all(
        isinstance(state.get(k), int) and state[k] >= 0 for k in ints
    )


class GraphArrays(NamedTuple):
    """The entity graph as planning and clustering read it: sorted entity ids, edge ends and
    weights, and its difference from the previous table's (None: no previous)."""

    ids: pl.Series
    eu: np.ndarray
    ev: np.ndarray
    ew: np.ndarray
    diff: Diff | None


def graph_arrays(
    entities: pl.DataFrame, relationships: pl.DataFrame, previous: pl.DataFrame | None
) -> GraphArrays:
    """Made once a run and handed to `plan_communities` and `hierarchical_leiden` (each made
    them again: 0.6 s at 40k documents)."""
    ids = entities["id"].cast(pl.Utf8).unique().sort()
    eu, ev, ew = edge_arrays(ids, relationships)
    diff = diff_previous(ids, eu, ev, previous) if previous is not None else None
    return GraphArrays(ids, eu, ev, ew, diff)


def plan_communities(
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    settings: GraphSettings,
    previous: pl.DataFrame | None,
    state: dict | None,
    arrays: GraphArrays | None = None,
) -> dict:
    """Whether this run carries the previous communities over, as plain data.

    Why cumulative: a per-run threshold never fires for a corpus that grows 2 % a night, so
    the partition would drift from what Leiden finds without anyone noticing. `state` (the
    sidecar the last run wrote, see `next_state`) counts entities added and removed since the
    last full recompute; the run carries over only if this run's change and the accumulated
    one (over the entity count of that recompute) are both within `incremental_max_change`,
    the partition settings are unchanged and the state describes `previous`.
    `state=None` means "no sidecar" (an index written before it existed): the run carries
    over on its own change, as before, and starts counting. A state that is present but
    unreadable, stale (describes another table) or of other settings recomputes.

    Returns carry_over (bool), reason, run_change and change (fractions), base_entities,
    added, removed (cumulative, this run included) and partition_hash."""
    arrays = arrays or graph_arrays(entities, relationships, previous)
    eu, diff = arrays.eu, arrays.diff
    phash = partition_hash(settings)
    plan = {
        "carry_over": False,
        "reason": "",
        "run_change": 0.0,
        "change": 0.0,
        "base_entities": 0,
        "added": 0,
        "removed": 0,
        "partition_hash": phash,
    }
    blocker = carry_blocker(diff, len(eu), settings)
    if diff is not None:
        plan["run_change"] = (diff.added + diff.removed) / diff.n_prev
        if state is None:
            base, added, removed = diff.n_prev, diff.added, diff.removed
        elif _valid_state(state):
            base = state["base_entities"]
            added, removed = state["added"] + diff.added, state["removed"] + diff.removed
        else:
            base, added, removed = 0, 0, 0
        plan.update(base_entities=base, added=added, removed=removed)
        plan["change"] = (added + removed) / base if base else 1.0
    if blocker is None and state is not None:
        if not _valid_state(state):
            blocker = "state sidecar unreadable"
        elif state["partition_hash"] != phash:
            blocker = "partition settings changed"
        elif previous is not None and state["table_hash"] != table_hash(previous):
            blocker = "state sidecar describes another table"
        elif plan["change"] > settings.incremental_max_change:
            blocker = "cumulative change above incremental_max_change"
    plan["carry_over"] = blocker is None
    plan["reason"] = blocker or ("carried over" if state is not None else "carried over (no state)")
    return plan


def next_state(plan: dict, communities: pl.DataFrame) -> dict:
    """The sidecar to keep beside `communities` (the table this plan produced): the counts
    restart at a full recompute. No run date or mode in it, so an unchanged re-run writes the
    identical state."""
    if plan["carry_over"]:
        base, added, removed = plan["base_entities"], plan["added"], plan["removed"]
    else:
        level0 = communities.filter(pl.col("level") == 0)["entity_ids"].explode().drop_nulls()
        base, added, removed = level0.n_unique(), 0, 0
    return {
        "version": STATE_VERSION,
        "partition_hash": plan["partition_hash"],
        "table_hash": table_hash(communities),
        "base_entities": int(base),
        "added": int(added),
        "removed": int(removed),
    }


def hierarchical_leiden(
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    settings: GraphSettings,
    previous: pl.DataFrame | None = None,
    reuse: Reuse | None = None,
    arrays: GraphArrays | None = None,
) -> pl.DataFrame:
    """communities frame with exactly schemas.COMMUNITIES columns.

    `previous` (the last run's communities table, if any) makes a re-run incremental: see
    `carry_over.update_hierarchy`; without it, or after a large change, Leiden runs from
    scratch. This checks only this run's change: a caller that keeps state across runs asks
    `plan_communities` first and passes `previous` only when it says carry_over. `reuse`
    (table.Reuse, of the version `previous` is from) keeps unchanged communities' lists
    when the hierarchy is carried over. `arrays`: `graph_arrays` of the same inputs and
    `previous` (or of no previous), when the caller made them already."""
    ids, eu, ev, ew, diff = arrays or graph_arrays(entities, relationships, previous)
    diff = diff if previous is not None else None
    if diff is not None and carry_blocker(diff, len(eu), settings) is None:
        head, vmembers = update_hierarchy(len(ids), eu, ev, ew, diff, settings)
    else:
        reuse = None
        comms = build_hierarchy(len(ids), eu, ev, ew, settings)
        if not comms:
            return empty("communities")
        head, vmembers = frames_of(comms)
    return communities_table(ids, entities, relationships, head, vmembers, reuse)

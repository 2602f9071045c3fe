"""The per-community frames an extractive report is assembled from, and its rating.

`gather` turns the communities, entities, relationships and text units into one row per
community (stats, rating) and flat frames of its top members (with their neighbours and
evidence relationship), strongest relationships and candidate sentences, best first. Joins and
rankings are vectorised in polars; the frames carry integer keys until the few rows a report
shows, which keeps memory flat at 40k documents.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl

from pipeline.communities.reports.evidence_cache import fill_sentences
from pipeline.communities.reports.find_evidence import (
    Evidence,
    aliases,
    candidates,
    held_by_some,
    hrid,
    sentence_mentions,
    sentence_pool,
)
from pipeline.config import ReportSettings

# Pairs of a community member and a sentence naming it scored at once, at most (whole
# communities): a batch's group-by holds ~150 bytes a pair (+0.15 GB). Counted in members
# (50k), a 151 MB file repeating its text 15 times made one batch of 15.9M pairs, +2.6 GB;
# batches of 1M pairs took no longer there than batches of 2M.
CANDIDATE_BATCH_PAIRS = 1_000_000
# Community x text unit pairs joined to their sources at a time (`_own_sources`): one 151 MB
# file's communities list 4.7M units; exploded and joined at once on (kind, key) strings
# they took the reports step 0.6 GB over its frames.
UNITS_PER_SLICE = 500_000


def gather(
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: ReportSettings,
    everyone: pl.DataFrame | None = None,
    evidence: pl.DataFrame | None = None,
) -> tuple[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame], pl.DataFrame | None, int]:
    """What the text assembly needs of `communities`: flat frames of each one's top members,
    strongest relationships and candidate sentences, best first; the evidence cache's rows
    of the sources they were found in and how many of those were split and matched
    (find_evidence). `everyone`: all of the run's
    communities when `communities` are some of them (the rest kept from the last run); their
    relationships name the neighbours whose mentions a member's description is searched for,
    so that a community's rows are those a build of all of them gives. `evidence`: the last
    run's evidence cache (evidence_cache)."""
    ents = _entity_frame(entities)
    rels = _relationship_frame(relationships)
    edges = _edges(communities, rels, ents)
    members = _ranked_members(communities, ents, edges)
    neighbour_rels = None if everyone is None else held_by_some(everyone, rels, members)
    found = sentence_mentions(
        members, edges, rels, text_units, ents, communities, neighbour_rels, evidence
    )
    cand = _candidate_sentences(members, found, _own_sources(communities, members, edges, found))
    title_of = ents.select("trank", "title").unique("trank")
    top_members = _top_members(members, ents, rels, title_of, settings)
    top_rels = _top_relationships(edges, rels, title_of, settings)
    return (top_members, top_rels, cand), found.rows, found.split


def _ranked_members(
    communities: pl.DataFrame, ents: pl.DataFrame, edges: pl.DataFrame
) -> pl.DataFrame:
    """A row per community member, ranked in its community (`rank`) by weighted degree over
    the community's edges, then global degree and title; with its first neighbours, their
    ids, its first relationships and the first one that has a description."""
    # The per-community frames (a row per member, per internal edge and direction) carry
    # integers only: a title is sorted by its rank (`trank`, the same order), and the strings
    # (titles, descriptions) join the few rows a report shows. With strings, every level's
    # copy of every relationship held its description (+1.5 GB at 40k documents).
    members = (
        communities.select("community", pl.col("entity_ids").alias("entity_id"))
        .explode("entity_id")
        .drop_nulls("entity_id")
        .join(ents.select("entity_id", "e_hrid", "g_degree", "trank"), on="entity_id")
    )
    # both directions: every edge seen from each endpoint, to rank members and their neighbours
    cols = ["community", "r_hrid", "has_desc", "weight"]
    ends = pl.concat(
        [
            edges.select(
                *cols,
                pl.col("source_id").alias("entity_id"),
                pl.col("t_trank").alias("n_trank"),
                pl.col("t_hrid").alias("n_hrid"),
            ),
            edges.select(
                *cols,
                pl.col("target_id").alias("entity_id"),
                pl.col("s_trank").alias("n_trank"),
                pl.col("s_hrid").alias("n_hrid"),
            ),
        ]
    ).sort(
        ["community", "entity_id", "weight", "n_trank", "r_hrid"],
        descending=[False, False, True, False, False],
    )
    per_member = ends.group_by(["community", "entity_id"], maintain_order=True).agg(
        pl.col("weight").sum().alias("w_degree"),
        pl.col("n_trank").unique(maintain_order=True).head(3).alias("neighbours"),
        pl.col("n_hrid").unique(maintain_order=True).head(4).alias("n_hrids"),
        pl.col("r_hrid").head(3).alias("m_rel_hrids"),
        pl.col("r_hrid").filter(pl.col("has_desc")).first().alias("m_rel"),
    )
    del ends
    return (
        members.join(per_member, on=["community", "entity_id"], how="left")
        .with_columns(pl.col("w_degree").fill_null(0.0))
        .sort(
            ["community", "w_degree", "g_degree", "trank", "entity_id"],
            descending=[False, True, True, False, False],
        )
        .with_columns(pl.int_range(pl.len()).over("community").alias("rank"))
    )


def _own_sources(
    communities: pl.DataFrame, members: pl.DataFrame, edges: pl.DataFrame, found: Evidence
) -> pl.DataFrame:
    """(community, src): the sources that are a community's own rows (its members'
    descriptions, its relationships, its text units). Only their sentences are its
    candidates: the pool also holds other communities' sources, and a sentence of a
    non-member's description or of a relationship outside the community that names a member
    made the report depend on rows its digest (reuse_unchanged) does not cover, and on
    which communities were gathered together."""
    keys = found.sources.select("src", "kind", "key")

    def own(kind: str, frame: pl.DataFrame, col: str) -> pl.DataFrame:
        of_kind = keys.filter(pl.col("kind") == kind).select("src", pl.col("key").alias(col))
        return frame.select("community", col).join(of_kind, on=col).select("community", "src")

    lists = communities.select("community", "text_unit_ids")
    return pl.concat(
        [own("Entities", members, "entity_id"), own("Relationships", edges, "rel_id")]
        + [own("Sources", part.explode("text_unit_ids"), "text_unit_ids") for part in _spans(lists)]
    )


def _spans(lists: pl.DataFrame) -> Iterator[pl.DataFrame]:
    """Slices of `lists` (community, text_unit_ids) listing ~UNITS_PER_SLICE ids each."""
    listed = lists.get_column("text_unit_ids").list.len().fill_null(0).cum_sum().to_numpy()
    at = 0
    while at < len(listed):
        end = max(at + 1, int(np.searchsorted(listed, listed[at] + UNITS_PER_SLICE, side="right")))
        yield lists.slice(at, end - at)
        at = end


def _candidate_sentences(members: pl.DataFrame, found: Evidence, own: pl.DataFrame) -> pl.DataFrame:
    """Each community's candidate sentences (of its own sources, `own`: community, src),
    scored for a batch of communities at a time."""
    mentions, pool, codes = found.mentions, found.pool, found.codes
    mentions = mentions.join(pool.select("sid", "src"), on="sid")
    # each community's candidate sentences, for a batch of communities at a time (a
    # community's pairs of member x mention are all in one batch: exact, and the group-by
    # over them peaked at +1.2 GB at 40k documents when done at once); a batch is
    # CANDIDATE_BATCH_PAIRS pairs, counted from each member's mentions
    scored = (
        members.select(
            "community",
            "entity_id",
            "rank",
            # each member counts 1 + log(1 + weighted degree): central ones outweigh others
            (1.0 + pl.col("w_degree").log1p()).alias("mw"),
        )
        .join(codes, on="entity_id")
        .drop("entity_id")
    )
    pairs = scored.join(mentions.group_by("e").len(), on="e", how="left")
    batch = (
        pairs.group_by("community")
        .agg(pl.col("len").sum())
        .sort("community")
        .select("community", (pl.col("len").cum_sum() // CANDIDATE_BATCH_PAIRS).alias("b"))
    )
    del pairs
    scored = scored.join(batch, on="community")

    def of_batch(frame: pl.DataFrame, part: pl.DataFrame, col: str) -> pl.DataFrame:
        # a batch's own rows only: joined whole, every batch hashed all of the mentions or
        # own sources (+0.6 GB a batch for one 151 MB file's 5.4M mentions, 4.8M sources)
        return frame.filter(pl.col(col).is_in(part.get_column(col).unique().implode()))

    parts = [scored.filter(pl.col("b") == b).drop("b") for b in batch["b"].unique().sort()]
    cand = pl.concat(
        [
            candidates(of_batch(mentions, part, "e"), part, pool, of_batch(own, part, "community"))
            for part in parts
        ]
        or [candidates(mentions, scored.drop("b"), pool, own)]
    )
    # the sentences the cache gave without their text: their sources are split again
    return fill_sentences(cand, pool, found.sources, sentence_pool).drop("sid")


def _top_members(
    members: pl.DataFrame,
    ents: pl.DataFrame,
    rels: pl.DataFrame,
    title_of: pl.DataFrame,
    settings: ReportSettings,
) -> pl.DataFrame:
    """The top members of each community with their strings: title, type, description,
    neighbours' titles and the description of their first described relationship."""
    neighbours = (
        members.filter(pl.col("rank") < max(settings.max_findings, 3))
        .select("community", "entity_id", pl.col("neighbours").alias("trank"))
        .explode("trank")
        .join(title_of, on="trank", how="left", maintain_order="left")
        .group_by("community", "entity_id", maintain_order=True)
        .agg(pl.col("title").drop_nulls().alias("neighbours"))
    )
    return (
        members.filter(pl.col("rank") < max(settings.max_findings, 3))
        .drop("neighbours")
        .join(neighbours, on=["community", "entity_id"], how="left", maintain_order="left")
        .join(
            ents.select("entity_id", "title", "type", "description"),
            on="entity_id",
            how="left",
            maintain_order="left",
        )
        .join(
            rels.select(pl.col("r_hrid").alias("m_rel"), pl.col("r_desc").alias("m_rel_desc")),
            on="m_rel",
            how="left",
            maintain_order="left",
        )
        .select(
            "community",
            "e_hrid",
            "title",
            "type",
            "description",
            "neighbours",
            "n_hrids",
            "m_rel_hrids",
            "m_rel_desc",
        )
    )


def _top_relationships(
    edges: pl.DataFrame, rels: pl.DataFrame, title_of: pl.DataFrame, settings: ReportSettings
) -> pl.DataFrame:
    """Each community's strongest relationships with their type, description and ends."""
    return (
        edges.sort(["community", "weight", "r_hrid"], descending=[False, True, False])
        .group_by("community", maintain_order=True)
        .head(max(settings.max_findings, 1))
        .join(rels.select("rel_id", "r_type", "r_desc"), on="rel_id", maintain_order="left")
        .join(
            title_of.rename({"trank": "s_trank", "title": "s_title"}),
            on="s_trank",
            maintain_order="left",
        )
        .join(
            title_of.rename({"trank": "t_trank", "title": "t_title"}),
            on="t_trank",
            maintain_order="left",
        )
        .select("community", "r_hrid", "r_type", "r_desc", "s_title", "t_title", "s_hrid", "t_hrid")
    )


def community_head(
    communities: pl.DataFrame, entities: pl.DataFrame, relationships: pl.DataFrame
) -> pl.DataFrame:
    """One row per community: its numbers, stats and rating (over all of `communities`: the
    rating is relative to the largest)."""
    # the relationships whose two ends are entities (`_edges`' rows), joined by id alone:
    # `_edges` of every community (373k rows at 40k documents, three joins) took 0.25 s
    ids = entities.get_column("id").implode()
    linked = relationships.filter(pl.col("source_id").is_in(ids), pl.col("target_id").is_in(ids))
    stats = (
        communities.select("community", pl.col("relationship_ids").alias("rel_id"))
        .explode("rel_id")
        .join(_relationship_frame(linked).select("rel_id", "weight"), on="rel_id")
        .group_by("community")
        .agg(pl.len().alias("n_rels"), pl.col("weight").sum().alias("total_weight"))
    )
    return (
        communities.select(
            "id",
            "community",
            "level",
            "parent",
            "children",
            "size",
            "period",
            pl.col("text_unit_ids").list.len().alias("n_units"),
        )
        .join(stats, on="community", how="left")
        .with_columns(pl.col("n_rels").fill_null(0), pl.col("total_weight").fill_null(0.0))
        .pipe(_ratings)
        .sort("community")
    )


def _entity_frame(entities: pl.DataFrame) -> pl.DataFrame:
    """The entity columns reports use, typed, with `trank` (the dense rank of the title)."""
    return entities.select(
        pl.col("id").alias("entity_id"),
        hrid(entities).alias("e_hrid"),
        pl.col("title").cast(pl.Utf8).fill_null(""),
        pl.col("type").cast(pl.Utf8).fill_null(""),
        pl.col("description").cast(pl.Utf8).fill_null(""),
        (pl.col("degree") if "degree" in entities.columns else pl.lit(0))
        .cast(pl.Int64)
        .fill_null(0)
        .alias("g_degree"),
        aliases(entities),
    ).with_columns(pl.col("title").rank("dense").alias("trank"))


def _relationship_frame(relationships: pl.DataFrame) -> pl.DataFrame:
    return relationships.select(
        pl.col("id").alias("rel_id"),
        hrid(relationships).alias("r_hrid"),
        "source_id",
        "target_id",
        (pl.col("type") if "type" in relationships.columns else pl.lit(""))
        .cast(pl.Utf8)
        .fill_null("")
        .alias("r_type"),
        pl.col("description").cast(pl.Utf8).fill_null("").alias("r_desc"),
        pl.col("weight").cast(pl.Float64).fill_null(1.0).alias("weight"),
    )


def _edges(communities: pl.DataFrame, rels: pl.DataFrame, ents: pl.DataFrame) -> pl.DataFrame:
    """A row per community and relationship of it whose two ends are entities, as integers."""
    ends_of = ents.select("entity_id", "e_hrid", "trank")
    return (
        communities.select("community", pl.col("relationship_ids").alias("rel_id"))
        .explode("rel_id")
        .drop_nulls("rel_id")
        .join(
            rels.select(
                "rel_id", "r_hrid", "source_id", "target_id", "weight", pl.col("r_desc") != ""
            ).rename({"r_desc": "has_desc"}),
            on="rel_id",
            how="inner",
        )
        .join(
            ends_of.rename({"entity_id": "source_id", "e_hrid": "s_hrid", "trank": "s_trank"}),
            on="source_id",
        )
        .join(
            ends_of.rename({"entity_id": "target_id", "e_hrid": "t_hrid", "trank": "t_trank"}),
            on="target_id",
        )
    )


def _ratings(frame: pl.DataFrame) -> pl.DataFrame:
    """Importance 0-10: mean of log sizes (entities, relation weight, text units), / the max.

    Logs keep a few huge communities from flattening all others to ~0; dividing by the maximum
    over all communities makes the largest 10.0 and keeps every non-empty community above 0
    (global search drops 0-rated reports).
    """
    raw = (
        pl.col("size").cast(pl.Float64).log1p()
        + pl.col("total_weight").log1p()
        + pl.col("n_units").cast(pl.Float64).log1p()
    ) / 3.0
    top = (pl.col("total_weight").rank(method="min", descending=True) / pl.len() * 100.0).ceil()
    return frame.with_columns(
        raw.alias("raw"), top.cast(pl.Int64).alias("weight_top_pct")
    ).with_columns(
        pl.when(pl.col("raw").max() > 0)
        .then((10.0 * pl.col("raw") / pl.col("raw").max()).round(1))
        .otherwise(0.0)
        .alias("rating")
    )

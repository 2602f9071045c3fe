"""Evidence sentences for extractive reports: which community members each sentence names,
and each community's best candidate sentences for its summary.

The pool is every sentence of the text units, relationship descriptions and member
descriptions the communities use, as text (a page's Markdown links, tags and emphasis read as
what they show); a sentence names an entity when the entity's title or an alias occurs in it
as whole words, checked only against the entities of its origin. The work runs in slices (of
sources, of sentences) because at 40k documents the sentence x candidate pairs are tens of
millions.
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from pipeline.communities.reports import evidence_cache
from pipeline.communities.reports.compose_text import MAX_SENTENCE_CHARS
from pipeline.sentences import sentences_expr
from pipeline.structure.markdown_inline import plain_markup

_CANDIDATES_PER_COMMUNITY = 12
# sentences matched, sources split per step
_SENTENCES_PER_SLICE = 20_000
_SOURCES_PER_SLICE = 50_000


def _norm(expr: pl.Expr) -> pl.Expr:
    """Lower-cased words separated by single spaces and padded, for whole-word `contains`."""
    words = expr.str.to_lowercase().str.replace_all(r"[^\p{L}\p{N}]+", " ").str.strip_chars()
    return pl.lit(" ") + words + pl.lit(" ")


def _sentences(frame: pl.DataFrame, text_col: str) -> pl.DataFrame:
    """Explode `text_col` into one row per sentence (`sentence`, its markup read as text),
    keeping the other columns."""
    return (
        frame.with_columns(sentences_expr(pl.col(text_col)).alias("sentence"))
        .drop(text_col)
        .explode("sentence")
        .with_columns(plain_markup(pl.col("sentence")))
        .filter(pl.col("sentence").str.len_chars() >= 15)
    )


def hrid(frame: pl.DataFrame) -> pl.Expr:
    """human_readable_id, or the row number where a frame has none."""
    if "human_readable_id" in frame.columns:
        return pl.col("human_readable_id").cast(pl.Int64)
    return pl.int_range(pl.len(), dtype=pl.Int64)


class Evidence(NamedTuple):
    mentions: pl.DataFrame  # sid, e
    pool: pl.DataFrame  # sid, src, rank, sentence (null: kept from the cache), length
    codes: pl.DataFrame  # e, entity_id
    sources: pl.DataFrame  # src, kind, ref, key, text, cands
    rows: pl.DataFrame | None  # the evidence cache's rows of `sources` (None: not kept)
    split: int  # sources split and matched (the others: from the cache)


def sentence_mentions(
    members: pl.DataFrame,
    edges: pl.DataFrame,
    rels: pl.DataFrame,
    text_units: pl.DataFrame,
    ents: pl.DataFrame,
    communities: pl.DataFrame,
    neighbour_rels: pl.DataFrame | None = None,
    cache: pl.DataFrame | None = None,
) -> Evidence:
    """Which entities each evidence sentence names (as integer codes `e`), and the sentences.

    Candidate entities per sentence come from its origin (a text unit's entity_ids, a
    relationship's endpoints, an entity and its neighbours), and a candidate counts when its
    title or an alias occurs in the sentence as whole words (case-insensitive). Candidates
    stay with their origin (one list per text unit, not per sentence) and are paired with
    the sentences as integers, a slice of sentences at a time: at 40k documents the pairs
    are tens of millions, and each pair once held its sentence's text and candidate list.
    `neighbour_rels` (rel_id): the relationships that make entities neighbours (default: those
    of `edges`). `cache`: the last run's evidence (evidence_cache): a source whose digest is
    in it is neither split nor matched again, and its sentences come without their text.
    """
    sources = _sources(members, edges, rels, text_units, ents, communities, neighbour_rels)
    surface = _surface_forms(ents)
    ids = surface.select("e", "entity_id").unique()
    cands = _sorted_pairs(_source_candidates(sources, ids))
    cands = cands.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).over("src").alias("pos"))
    # a source is its (kind, ref) in the pool's order: where two share one, nothing is cached
    keyed = sources.select(pl.struct("kind", "ref").is_unique().all()).item()
    digests = evidence_cache.source_digests(sources, cands, surface)
    hits = evidence_cache.cached(sources, digests, cache if keyed else None)
    fresh = sources.join(hits.select("src"), on="src", how="anti")
    split = sentence_pool(fresh)
    named = _named(split, cands, surface.select("e", "nform"))  # src, rank, e, pos
    hit_pool, hit_named = evidence_cache.hit_pool(hits, cands)
    rows = None
    if keyed:
        lengths = split.select("src", "rank", "length")
        made = evidence_cache.fresh_rows(fresh, digests, lengths, named)
        rows = pl.concat([made, hits.select(made.columns)])
    pool = (
        pl.concat(
            [
                split.select("src", "rank", "sentence", "length"),
                hit_pool.select("src", "rank", pl.lit(None, pl.Utf8).alias("sentence"), "length"),
            ],
            how="vertical_relaxed",
        )
        .join(sources.select("src", "kind", "ref"), on="src")
        .sort("kind", "ref", "rank")
        .with_row_index("sid")
        .select("sid", "src", "rank", "sentence", pl.col("length").cast(pl.UInt32))
    )
    del split  # its sentences are the pool's now
    # joined on one integer (a sentence's source and rank): on the two columns the join
    # took one 151 MB file's step ~0.3 GB over its frames (5.4M mentions, 1.5M sentences)
    mentions = (
        pl.concat([named.select("src", "rank", "e"), hit_named], how="vertical_relaxed")
        .select(evidence_cache.pair_key("src", "rank"), "e")
        .join(pool.select("sid", evidence_cache.pair_key("src", "rank")), on="key")
        .select("sid", "e")
    )
    return Evidence(mentions, pool, ids, sources, rows, fresh.height)


def held_by_some(everyone: pl.DataFrame, rels: pl.DataFrame, members: pl.DataFrame) -> pl.DataFrame:
    """(rel_id) of the members' relationships that some community of `everyone` holds: those
    with both ends in one top-level community, as a community holds the relationships with
    both ends in it (pipeline.communities.table) and lies inside a top-level one. Only the
    members' own: every community's relationships (at 40k documents 0.4 s of a 6-member
    community's gather) only to find them."""
    top = everyone.filter(pl.col("level") == everyone.get_column("level").min()).select(
        pl.col("community").alias("c"), pl.col("entity_ids").alias("entity_id")
    )
    top = top.explode("entity_id").drop_nulls("entity_id")
    ids = members.get_column("entity_id").unique().implode()
    near = rels.filter(pl.col("source_id").is_in(ids) | pl.col("target_id").is_in(ids))
    return (
        near.select("rel_id", "source_id", "target_id")
        .join(top.rename({"entity_id": "source_id", "c": "cs"}), on="source_id")
        .join(top.rename({"entity_id": "target_id", "c": "ct"}), on="target_id")
        .filter(pl.col("cs") == pl.col("ct"))
        .select("rel_id")
    )


def _sources(
    members: pl.DataFrame,
    edges: pl.DataFrame,
    rels: pl.DataFrame,
    text_units: pl.DataFrame,
    ents: pl.DataFrame,
    communities: pl.DataFrame,
    neighbour_rels: pl.DataFrame | None,
) -> pl.DataFrame:
    """(src, kind, ref, key, text, cands): the member entities' descriptions (candidates: the
    entity and its neighbours), the used relationships' descriptions (their two ends) and the
    used text units (their entity_ids), in that order."""
    used_units = communities.select(pl.col("text_unit_ids").alias("unit_id")).explode("unit_id")
    units = text_units.select(
        pl.col("id").alias("unit_id"), hrid(text_units).alias("ref"), "text", "entity_ids"
    ).join(used_units.unique(), on="unit_id", how="semi")
    unit_src = units.select(
        pl.lit("Sources").alias("kind"),
        "ref",
        pl.col("unit_id").alias("key"),
        "text",
        pl.col("entity_ids").alias("cands"),
    )
    member_ids = members.select("entity_id").unique()
    used_rels = rels.join(edges.select("rel_id").unique(), on="rel_id", how="semi")
    rel_src = used_rels.select(
        pl.lit("Relationships").alias("kind"),
        pl.col("r_hrid").alias("ref"),
        pl.col("rel_id").alias("key"),
        pl.col("r_desc").alias("text"),
        pl.concat_list("source_id", "target_id").alias("cands"),
    )
    linking = (
        used_rels if neighbour_rels is None else rels.join(neighbour_rels, on="rel_id", how="semi")
    )
    # the members' neighbours only: `neighbour_rels` are every community's (at 40k documents
    # an edit gathers ~7k members beside 373k such relationships)
    nbrs = pl.concat(
        [
            linking.select(pl.col("source_id").alias("entity_id"), pl.col("target_id").alias("n")),
            linking.select(pl.col("target_id").alias("entity_id"), pl.col("source_id").alias("n")),
        ]
    ).join(member_ids, on="entity_id", how="semi")
    ent_src = (
        ents.join(member_ids, on="entity_id", how="semi")
        .select("entity_id", "e_hrid", "description")
        .join(
            nbrs.group_by("entity_id").agg(pl.col("n").unique().sort()), on="entity_id", how="left"
        )
        .select(
            pl.lit("Entities").alias("kind"),
            pl.col("e_hrid").alias("ref"),
            pl.col("entity_id").alias("key"),
            pl.col("description").alias("text"),
            pl.concat_list(pl.col("entity_id"), pl.col("n").fill_null([])).alias("cands"),
        )
    )
    return pl.concat([ent_src, rel_src, unit_src]).with_row_index("src")


def sentence_pool(sources: pl.DataFrame) -> pl.DataFrame:
    """(src, kind, ref, rank, sentence, length): the sources' sentences, ranked within their
    (kind, ref) by text: the pool's order (sid) must not depend on the input row order."""
    # split a slice of the sources at a time: each step of the split copies every text
    texts = sources.select("src", "kind", "ref", "text").iter_slices(_SOURCES_PER_SLICE)
    return (
        pl.concat(
            [_sentences(part, "text") for part in texts]
            or [_sentences(sources.select("src", "kind", "ref", "text"), "text")]
        )
        .sort("kind", "ref", "sentence")
        .with_columns(
            pl.int_range(pl.len(), dtype=pl.UInt32).over("kind", "ref").alias("rank"),
            pl.col("sentence").str.len_chars().alias("length"),
        )
        .select("src", "kind", "ref", "rank", "sentence", "length")
    )


def aliases(entities: pl.DataFrame) -> pl.Expr:
    """The entities' aliases as reports read them (none where the column is absent)."""
    listed = pl.col("aliases") if "aliases" in entities.columns else pl.lit([], pl.List(pl.Utf8))
    return listed.cast(pl.List(pl.Utf8)).fill_null([]).alias("aliases")


def unit_views(units: pl.DataFrame, entities: pl.DataFrame) -> pl.DataFrame:
    """(id, view): a hash of what a report can read of each text unit (id, text,
    entity_ids), found as `sentence_mentions` finds it: its entities and those of its
    sentences that name one of them (as `sentence_pool` orders them), each with the entities
    it names. A sentence naming none of them is no report's candidate, so two units with
    one view at one reference number give every report the same evidence."""
    listed = units.get_column("entity_ids").explode().drop_nulls().unique().implode()
    ents = entities.filter(pl.col("id").is_in(listed)).select(
        pl.col("id").alias("entity_id"),
        pl.col("title").cast(pl.Utf8).fill_null(""),
        aliases(entities),
    )
    surface = _surface_forms(ents)
    sources = units.select(
        pl.lit("Sources").alias("kind"), "text", pl.col("entity_ids").alias("cands")
    ).with_row_index("src")
    sources = sources.with_columns(pl.col("src").alias("ref"))
    split = sentence_pool(sources)
    codes = surface.select("e", "entity_id").unique()
    cands = _source_candidates(sources, codes).with_columns(pos=pl.lit(0, pl.UInt32))
    named = (
        _named(split, cands, surface.select("e", "nform"))
        .join(codes, on="e")
        .group_by("src", "rank")
        .agg(pl.col("entity_id").sort())
        .join(split.select("src", "rank", "sentence"), on=["src", "rank"])
        .sort("src", "rank")
        .group_by("src", maintain_order=True)
        .agg(pl.struct("sentence", "entity_id").hash(_VIEW_SEED).alias("said"))
    )
    return (
        sources.join(named, on="src", how="left")
        .join(units.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("src"), "id"), on="src")
        .select(
            "id",
            pl.struct(pl.col("cands").list.sort(), pl.col("said").fill_null([]))
            .hash(_VIEW_SEED)
            .alias("view"),
        )
    )


_VIEW_SEED = 20_251


def _surface_forms(ents: pl.DataFrame) -> pl.DataFrame:
    """(entity_id, nform, e): each entity's title and aliases normalised (`_norm`), with
    the entity's integer code `e`."""
    forms = ents.select("entity_id", pl.concat_list("title", "aliases").alias("form"))
    return (
        forms.explode("form")
        .drop_nulls("form")
        .with_columns(_norm(pl.col("form")).alias("nform"))
        .filter(pl.col("nform").str.len_chars() >= 4)  # " x " and blanks match everything
        .select("entity_id", "nform")
        .unique()
        .with_columns(pl.col("entity_id").rank("dense").alias("e"))
    )


def _source_candidates(sources: pl.DataFrame, ids: pl.DataFrame) -> pl.DataFrame:
    """(src, e): each source's candidate entities as codes (those with a surface form)."""
    # a slice of the sources at a time: a unit lists its entities' ids as strings, exploded
    # (one 151 MB file's units list 4.3M, +0.2 GB at once)
    listed = sources.select("src", pl.col("cands").alias("entity_id"))
    return pl.concat(
        [
            part.explode("entity_id").join(ids, on="entity_id", how="inner").select("src", "e")
            for part in listed.iter_slices(_SOURCES_PER_SLICE)
        ]
        or [listed.explode("entity_id").join(ids, on="entity_id").select("src", "e")]
    )


def _sorted_pairs(pairs: pl.DataFrame) -> pl.DataFrame:
    """The distinct (src, e) of `pairs` sorted, by one 64-bit key: polars' unique over the two
    columns took one 151 MB file's 4.4M candidates +0.8 GB and 0.6 s."""
    key = evidence_cache.pair_key("src", "e")
    return pairs.select(key.unique().sort()).select(evidence_cache.key_parts("src", "e"))


def _named(split: pl.DataFrame, cands: pl.DataFrame, nforms: pl.DataFrame) -> pl.DataFrame:
    """(src, rank, e, pos): the candidates (`cands`: src, e, pos) whose form occurs in a
    sentence of `split` (sentence_pool) as whole words, a slice of sentences at a time."""
    hits = []
    for at in range(0, split.height, _SENTENCES_PER_SLICE):
        part = split.slice(at, _SENTENCES_PER_SLICE)
        hits.append(
            part.select("src", "rank", _norm(pl.col("sentence")).alias("norm"))
            .join(cands, on="src")
            .join(nforms, on="e")
            .filter(pl.col("norm").str.contains(pl.col("nform"), literal=True))
            .select("src", "rank", "e", "pos")
            .unique()
        )
    schema = {"src": pl.UInt32, "rank": pl.UInt32, "e": pl.UInt32, "pos": pl.UInt32}
    return pl.concat(hits) if hits else pl.DataFrame(schema=schema)


def candidates(
    mentions: pl.DataFrame, scored: pl.DataFrame, pool: pl.DataFrame, own: pl.DataFrame
) -> pl.DataFrame:
    """The best `_CANDIDATES_PER_COMMUNITY` sentences of each community in `scored`
    (community, e, rank, mw) among those of its own sources (`mentions`: sid, src, e; `own`:
    community, src): those naming the most member weight, long ones discounted. Scored on
    sums first; the members each one names (ranks and weights, in rank order) are listed for
    the best only (listing them for every pair of a batch, 1M pairs, took most of its time)."""
    # in member rank order within each community: a sentence's sum and lists follow it;
    # (community, source) and (community, sentence) as one integer each (pair_key): joined
    # and grouped on two columns, a 40k add run's batches took 2.35 s against 1.9-2.2
    key = evidence_cache.pair_key
    owned = own.select(key("community", "src").alias("owned"))
    pairs = (
        mentions.join(scored.sort("community", "rank"), on="e", how="inner", maintain_order="right")
        .with_columns(key("community", "src").alias("owned"))
        .join(owned, on="owned", how="semi")
        .select(key("community", "sid"), "rank", "mw")
    )
    best = (
        pairs.group_by("key")
        # rounded: a sum of logs in another order must not break a tie (sentences naming the
        # same members scored apart in the last bit, and a kept report differed from a
        # fresh one: tests/test_shards.py failed 1 run in 3 under load)
        .agg(
            pl.col("mw").sum().round(9).alias("n_mentioned"),
            pl.col("rank").min().alias("best_rank"),
        )
        .with_columns(evidence_cache.key_parts("community", "sid", pl.Int64))
        .join(pool.select("sid", "length"), on="sid")
        .with_columns(
            # a sentence longer than the clip limit loses part of its evidence: discount it
            (
                MAX_SENTENCE_CHARS / pl.max_horizontal(pl.col("length"), pl.lit(MAX_SENTENCE_CHARS))
            ).alias("factor"),
            (pl.col("length") - 160).abs().alias("len_penalty"),
        )
        .with_columns((pl.col("n_mentioned") * pl.col("factor")).alias("score"))
        .sort(
            ["community", "score", "best_rank", "len_penalty", "sid"],
            descending=[False, True, False, False, False],
        )
        .group_by("community", maintain_order=True)
        .head(_CANDIDATES_PER_COMMUNITY)
    )
    named = (
        pairs.join(best.select("key"), on="key", how="semi")
        .group_by("key", maintain_order=True)
        .agg(pl.col("rank").alias("ranks"), pl.col("mw").alias("weights"))
    )
    return (
        best.join(named, on="key", how="left", maintain_order="left")
        .join(pool.select("sid", "sentence"), on="sid", how="left", maintain_order="left")
        .select("community", "sid", "sentence", "ranks", "weights", "factor")
    )

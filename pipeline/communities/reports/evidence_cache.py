"""Which entities each evidence sentence names, kept from the last run per source.

Why: after a one-file edit only a few reports are assembled again, but they include the big
top-level communities that hold the edited entities, so gathering them split and matched the
sentences of most of the corpus's text units and descriptions again (6 of the 9.6 s the
stage took on an edit at 40k documents). A source's sentences and the candidates they name
are a pure function of its text and of its candidate entities with their surface forms, so
a digest of those (`source_digests`) says when the last run's result holds.

The sidecar (`EVIDENCE`, beside the table) holds one row per source (kind, key: the text
unit, relationship or entity id; its digest) with the lengths of its sentences in pool order
(`lengths`) and which sentence (`at`) names which candidate (`pos`: a position in the
source's candidates with a surface form, sorted by id); not the sentences' text, which is
split again only for the few sentences a report shows (`fill_sentences`). A source's row
is used only when its digest is today's; rows of sources today's gathering did not reach
are carried over while their key still exists. Hashes are polars' (stable within one polars
version, which the sidecar records).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.storage.files import read_hashes, write_hashes

EVIDENCE = "community_reports_evidence.parquet"
_SEED = 20_233
_LIST = pl.List(pl.UInt32)
COLUMNS = {
    "kind": pl.Utf8,
    "key": pl.Utf8,
    "digest": pl.UInt64,
    "lengths": _LIST,
    "at": _LIST,
    "pos": _LIST,
}


def source_digests(sources: pl.DataFrame, cands: pl.DataFrame, surface: pl.DataFrame):
    """(src, digest): a hash of each source's text and of its candidates (`cands`: src, e,
    sorted) with their surface forms (`surface`: entity_id, nform, e)."""
    forms = (
        surface.sort("e", "nform")
        .group_by("e", maintain_order=True)
        .agg(pl.col("entity_id").first(), pl.col("nform"))
        .select("e", pl.struct("entity_id", "nform").hash(_SEED).alias("fh"))
    )
    listed = (
        cands.join(forms, on="e", how="left", maintain_order="left")
        .group_by("src", maintain_order=True)
        .agg(pl.col("fh"))
    )
    return (
        sources.select("src", pl.col("text").hash(_SEED + 1).alias("th"))
        .join(listed, on="src", how="left")
        .select(
            "src",
            pl.struct("th", pl.col("fh").fill_null(pl.lit([], pl.List(pl.UInt64))))
            .hash(_SEED + 2)
            .alias("digest"),
        )
    )


def pair_key(high: str, low: str) -> pl.Expr:
    """Two UInt32 columns as one UInt64 `key` (high * 2**32 + low): polars' joins and
    uniques on two integer columns held ~185 bytes a row, on one a fraction of that."""
    return (pl.col(high).cast(pl.UInt64) * 2**32 + pl.col(low)).alias("key")


def key_parts(high: str, low: str, high_type: type[pl.DataType] = pl.UInt32) -> list[pl.Expr]:
    """The two columns a `pair_key` was made of (`low` UInt32, `high` as `high_type`)."""
    return [
        (pl.col("key") // 2**32).cast(high_type).alias(high),
        (pl.col("key") % 2**32).cast(pl.UInt32).alias(low),
    ]


def cached(
    sources: pl.DataFrame, digests: pl.DataFrame, cache: pl.DataFrame | None
) -> pl.DataFrame:
    """(src, kind, key, digest, lengths, at, pos): the cache rows that hold for `sources`."""
    keys = sources.select("src", "kind", "key").join(digests, on="src")
    if cache is None or cache.is_empty():
        return keys.join(empty_cache(), on=["kind", "key", "digest"])
    return keys.join(cache.select(*COLUMNS), on=["kind", "key", "digest"])


def hit_pool(hits: pl.DataFrame, cands: pl.DataFrame):
    """(pool: src, rank, length; named: src, rank, e) of the cached sources; `cands` (src,
    e, pos) decodes the positions."""
    pool = (
        hits.select(
            "src",
            pl.int_ranges(pl.col("lengths").list.len(), dtype=pl.UInt32).alias("rank"),
            pl.col("lengths").alias("length"),
        )
        .explode("rank", "length")
        .drop_nulls("rank")
    )
    # joined on one integer: on (src, pos) the join of a 40k add run's ~3M mentions was
    # the reports step's peak
    key = pair_key("src", "pos")
    named = (
        hits.select("src", pl.col("at").alias("rank"), "pos")
        .explode("rank", "pos")
        .drop_nulls("rank")
        .select("src", "rank", key)
        .join(cands.select(key, "e"), on="key")
        .select("src", "rank", "e")
    )
    return pool, named


def fresh_rows(
    fresh: pl.DataFrame, digests: pl.DataFrame, lengths: pl.DataFrame, named: pl.DataFrame
) -> pl.DataFrame:
    """Cache rows of the sources split and matched this run (`fresh`: src, kind, key;
    `lengths`: src, rank, length of their sentences; `named`: src, rank, e, pos)."""
    lengths = (
        lengths.sort("src", "rank")
        .group_by("src", maintain_order=True)
        .agg(pl.col("length").cast(pl.UInt32).alias("lengths"))
    )
    pairs = (
        named.sort("src", "rank", "pos")
        .group_by("src", maintain_order=True)
        .agg(pl.col("rank").cast(pl.UInt32).alias("at"), pl.col("pos").cast(pl.UInt32))
    )
    return (
        fresh.select("src", "kind", "key")
        .join(digests, on="src")
        .join(lengths, on="src", how="left")
        .join(pairs, on="src", how="left")
        .select(*(pl.col(c).fill_null([]) if t == _LIST else pl.col(c) for c, t in COLUMNS.items()))
        .cast(COLUMNS)  # type: ignore[arg-type]
    )


def fill_sentences(cand: pl.DataFrame, pool: pl.DataFrame, sources: pl.DataFrame, split):
    """`cand` (with sid) with the text of the sentences the cache gave without it: their
    sources split again (`split`: find_evidence's pool of `sources`)."""
    missing = cand.filter(pl.col("sentence").is_null()).select("sid").unique()
    if missing.is_empty():
        return cand
    where = pool.join(missing, on="sid", how="semi").select("sid", "src", "rank")
    again = split(sources.join(where.select("src").unique(), on="src", how="semi"))
    text = where.join(again.select("src", "rank", "sentence"), on=["src", "rank"]).select(
        "sid", pl.col("sentence").alias("text")
    )
    return (
        cand.join(text, on="sid", how="left", maintain_order="left")
        .with_columns(pl.col("sentence").fill_null(pl.col("text")))
        .drop("text")
    )


def empty_cache() -> pl.DataFrame:
    return pl.DataFrame(schema=COLUMNS)


def carried(
    cache: pl.DataFrame | None, rows: pl.DataFrame | None, existing: pl.DataFrame
) -> pl.DataFrame | None:
    """The sidecar to write: this run's `rows` and the last run's rows of the other sources
    whose key still exists (`existing`: kind, key)."""
    if rows is None:
        return None if cache is None else cache.join(existing, on=["kind", "key"], how="semi")
    if cache is None or cache.is_empty():
        return rows
    other = cache.join(rows.select("kind", "key"), on=["kind", "key"], how="anti").join(
        existing, on=["kind", "key"], how="semi"
    )
    return pl.concat([rows, other.select(*COLUMNS)])


def read_evidence(folder: Path) -> pl.DataFrame | None:
    frame = read_hashes(folder / EVIDENCE, COLUMNS)
    return None if frame is None else frame.select(*COLUMNS).cast(COLUMNS)  # type: ignore[arg-type]


def write_evidence(folder: Path, frame: pl.DataFrame | None) -> None:
    """The sidecar, atomically; None: it goes (nothing of it would be checked)."""
    write_hashes(folder / EVIDENCE, frame)

"""Strings as integer codes, and back to strings a slice of rows at a time.

Why: the merge groups and sorts millions of mention rows; on integer codes (indices into a
sorted vocabulary, so codes sort as their strings) that costs a fraction of the memory the
same work on strings does, and strings come back only for what the output holds, SLICE_ROWS
rows at a time (pipeline.graph.merge has the figures).
"""

from __future__ import annotations

import numpy as np
import polars as pl

# Rows of mentions turned into strings at a time (descriptions, id lists): bounds the copies.
SLICE_ROWS = 200_000


def sorted_vocab(*cols: pl.Series) -> pl.Series:
    """Sorted distinct non-null strings of `cols`. A string's code is its index here, so
    codes sort as the strings do (polars compares strings bytewise either way)."""
    return pl.concat([c.drop_nulls().unique().cast(pl.Utf8) for c in cols]).unique().sort()


def codes_in(s: pl.Series, vocab: pl.Series) -> pl.Series:
    """UInt32 code of each string of `s` in `vocab`; null where null or not in it. A
    Categorical `s` is coded through its distinct values, its strings never copied."""
    idx = pl.int_range(vocab.len(), dtype=pl.UInt32, eager=True)
    if isinstance(s.dtype, pl.Categorical):
        distinct = s.drop_nulls().unique()
        code_of = distinct.cast(pl.Utf8).replace_strict(
            vocab, idx, default=None, return_dtype=pl.UInt32
        )
        lut = pl.Series(np.full(int(distinct.to_physical().max() or 0) + 1, -1, np.int64))
        lut = lut.scatter(distinct.to_physical(), code_of.fill_null(-1).cast(pl.Int64))
        found = lut.gather(s.to_physical()).to_frame("c")  # -1: not in vocab
        return found.select(pl.when(pl.col("c") >= 0).then("c").cast(pl.UInt32)).to_series()
    return s.replace_strict(vocab, idx, default=None, return_dtype=pl.UInt32)


def dense_codes(s: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(codes, vocab) of strings `s`, as `codes_in(s, sorted_vocab(s))`: by a sort, for many
    distinct strings (ids: 30 MB where hashing them took 130 MB)."""
    return (s.rank("dense") - 1).cast(pl.UInt32), s.unique().sort()


def decode(vocab: pl.Series, code: str) -> pl.Expr:
    """The values of `vocab` at a code column (the strings of codes, a lookup table)."""
    return pl.lit(vocab).gather(pl.col(code))


def group_runs(df: pl.DataFrame, by: list[str], *aggs: pl.Expr, sort: bool = True) -> pl.DataFrame:
    """`df.group_by(by).agg(*aggs)` (no aggs: the distinct rows), sorted by `by`, computed
    by a stable sort (`sort=False`: `df` is sorted by `by` already) after which a group is
    a run of equal rows: hashing a million distinct keys of two or three columns took
    ~150 MB, the sort ~15 MB. Row order within a group is kept."""
    if sort:
        df = df.sort(by, maintain_order=True)
    return (
        df.group_by(pl.struct(by).rle_id().alias("_run"), maintain_order=True)
        .agg(*(pl.col(c).first() for c in by), *aggs)
        .drop("_run")
    )


def row_slices(df: pl.DataFrame, group: str, n: int):
    """(lo, hi, the rows of groups lo..hi-1) over `df` sorted by `group` (codes 0..n-1),
    about SLICE_ROWS rows at a time: work on strings one slice at a time, so that only the
    output is ever whole."""
    g = df.get_column(group)
    edges = sorted({0, n, *g.gather_every(SLICE_ROWS, offset=SLICE_ROWS).to_list()})
    at = g.search_sorted(pl.Series(edges, dtype=g.dtype), side="left").to_list()
    for lo, hi, a, b in zip(edges, edges[1:], at, at[1:], strict=False):
        yield lo, hi, df.slice(a, b - a)


def aligned(out: pl.DataFrame, group: str, lo: int, hi: int) -> pl.DataFrame:
    """`out` (one row per group, some of lo..hi-1) as one row per group lo..hi-1."""
    full = pl.DataFrame({group: pl.int_range(lo, hi, dtype=out.schema[group], eager=True)})
    return full.join(out, on=group, how="left", maintain_order="left")


def code_lists(
    pairs: pl.DataFrame, group: str, code: str, vocab: pl.Series, n: int, empty: bool = False
) -> pl.Series:
    """For each group 0..n-1, the strings of its distinct codes in code (= string) order;
    null for a group with none (`empty`: an empty list, filled a slice at a time: filled
    whole, a 151 MB file's 5.4M ids were copied at once). Built a slice at a time, as
    `extractive_descriptions`."""
    pairs = group_runs(pairs.select(group, code), [group, code])
    none = pl.lit([], dtype=pl.List(pl.Utf8)) if empty else None
    parts = [
        aligned(
            part.select(group, decode(vocab, code).alias("values"))
            .group_by(group, maintain_order=True)
            .agg("values"),
            group,
            lo,
            hi,
        )
        .select(pl.col("values").fill_null(none) if empty else pl.col("values"))
        .get_column("values")
        for lo, hi, part in row_slices(pairs, group, n)
    ]
    return pl.concat(parts, rechunk=False) if parts else pl.Series([], dtype=pl.List(pl.Utf8))

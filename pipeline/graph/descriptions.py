"""Extractive descriptions: an entity's or relationship's best evidence sentences, in budget.

Why its own module: the offline description of a merged item is a ranking of the distinct
sentences its mentions came with (pipeline.graph.merge), kept as codes and turned into strings
only for what is kept; the LLM summaries (pipeline.graph.summarize_llm) replace it only for
items with many descriptions.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from pipeline.graph.codes import aligned, codes_in, row_slices, sorted_vocab
from pipeline.tokens import count_tokens, truncate_tokens

# Strings of codes (evidence sentences): a Series of codes -> the Series of their strings.
TextOf = Callable[[pl.Series], pl.Series]


def evidence_codes(*cols: pl.Series) -> tuple[list[pl.Series], TextOf]:
    """Codes of evidence sentences: one per distinct non-empty sentence, in sorted order
    (null: no evidence), for each of `cols`; and their strings' lookup, which reads them
    back from `cols` (a row holding each code) instead of keeping a copy of them all
    (100 MB at 40k documents)."""
    vocab = sorted_vocab(*cols)
    vocab = vocab.filter(vocab != "")
    codes = [codes_in(c, vocab) for c in cols]
    del vocab
    sentences = pl.concat(cols, rechunk=False)  # no copy
    row_of = (
        pl.concat(codes)
        .to_frame("d")
        .with_row_index("row")
        .drop_nulls()
        .group_by("d")
        .agg(pl.col("row").first())
        .sort("d")
        .get_column("row")
    )
    return codes, lambda d: sentences.gather(row_of.gather(d)).cast(pl.Utf8)


def token_counts(codes: pl.Series, text_of: TextOf) -> pl.DataFrame:
    """(d, ntok) for each distinct code; texts go to Python a slice at a time."""
    codes = codes.drop_nulls().unique().sort()
    ntok: list[int] = []
    for part in codes.to_frame("d").iter_slices(50_000):
        ntok += [count_tokens(t) for t in text_of(part.get_column("d")).to_list()]
    return pl.DataFrame({"d": codes, "ntok": pl.Series(ntok, dtype=pl.Int64)})


def extractive_descriptions(
    ev: pl.DataFrame, group: str, n: int, text_of: TextOf, ntok: pl.DataFrame, max_tokens: int
) -> pl.Series:
    """Extractive description of each group 0..n-1 ("" for none): its distinct evidence
    sentences, best first, while they fit in `max_tokens`.

    `ev` has columns group, d (code of a non-empty sentence, see `text_of`), units (how many
    text units gave that sentence for that group) and centrality (how many distinct groups
    share the sentence: a sentence naming many entities says more about how this one
    connects); `ntok` the token count of each code. Ranked on codes (they sort as the
    sentences do: deterministic); only kept sentences become strings, a slice at a time.
    """
    kept = (
        ev.join(ntok, on="d", how="left")
        .sort(
            [group, "units", "centrality", "ntok", "d"],
            descending=[False, True, True, False, False],
        )
        .with_columns(
            rank=pl.int_range(pl.len()).over(group),
            used=(pl.col("ntok") + 1).cum_sum().over(group),
        )
        .filter((pl.col("rank") == 0) | (pl.col("used") <= max_tokens))
        .select(group, "d", "ntok")
    )
    parts = []
    for lo, hi, part in row_slices(kept, group, n):
        out = (
            part.select(group, "ntok", description=text_of(part.get_column("d")))
            .group_by(group, maintain_order=True)
            .agg(pl.col("description").str.join(" "), pl.col("ntok").sum())
        )
        # A single over-long sentence, or BPE merges across the joins: enforce the limit
        # exactly.
        over = out.filter(pl.col("ntok") > max_tokens - 2)
        if not over.is_empty():
            fixed = [
                d if count_tokens(d) <= max_tokens else truncate_tokens(d, max_tokens)
                for d in over.get_column("description").to_list()
            ]
            out = out.join(
                over.select(group).with_columns(pl.Series("fixed", fixed, dtype=pl.Utf8)),
                on=group,
                how="left",
                maintain_order="left",
            ).with_columns(pl.coalesce("fixed", "description").alias("description"))
        parts.append(aligned(out, group, lo, hi).get_column("description").fill_null(""))
    return pl.concat(parts, rechunk=False) if parts else pl.Series([], dtype=pl.Utf8)

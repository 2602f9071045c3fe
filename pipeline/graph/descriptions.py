"""Extractive descriptions: an entity's or relationship's best evidence sentences, in budget.

Why its own module: the offline description of a merged item is a ranking of the distinct
sentences its mentions came with (pipeline.graph.merge), kept as codes and turned into strings
only for what is kept; the LLM summaries (pipeline.graph.summarize_llm) replace it only for
items with many descriptions.

A description is read first by its opening sentence, so that one is chosen apart: a sentence
that can stand alone (`pipeline.sentences.sentence_kind`: not "It ...", "But ...", "…" or a
lower-case fragment; not a title line; not "In 1911 he ..."), from the document or section
about the item when there is one, naming it, nearest its start. The others follow as before
(most text units, most shared, shortest), those that cannot stand alone last, a title line
that is the name alone dropped. Sentences are text, not markup
(`pipeline.structure.markdown_inline.plain_markup`).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from pipeline.graph.encode_strings import SLICE_ROWS, aligned, codes_in, row_slices, sorted_vocab
from pipeline.sentences import DANGLING, FRAGMENT, LEADS, sentence_kind_expr
from pipeline.structure.markdown_inline import plain_markup
from pipeline.tokens import count_tokens, truncate_tokens

# Tokens a head line adds, about (a name and its type; the exact limit is enforced after)
_HEAD_TOKENS = 8
# Strings of codes (evidence sentences): a Series of codes -> the Series of their strings.
TextOf = Callable[[pl.Series], pl.Series]


def evidence_codes(*cols: pl.Series) -> tuple[list[pl.Series], TextOf]:
    """Codes of evidence sentences: one per distinct non-empty sentence, in sorted order
    (null: no evidence), for each of `cols`; and their strings' lookup, which reads them
    back from `cols` (a row holding each code) instead of keeping a copy of them all
    (100 MB at 40k documents). The strings come back as text, their markup read
    (`plain_markup`)."""
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

    def text_of(d: pl.Series) -> pl.Series:
        raw = sentences.gather(row_of.gather(d)).cast(pl.Utf8)
        return raw.to_frame("s").select(plain_markup(pl.col("s"))).to_series()

    return codes, text_of


def sentence_features(codes: pl.Series, text_of: TextOf) -> pl.DataFrame:
    """(d, ntok, kind) for each distinct code: its token count and `sentence_kind`; texts go
    to Python (token counts) a slice at a time."""
    codes = codes.drop_nulls().unique().sort()
    parts = []
    for part in codes.to_frame("d").iter_slices(50_000):
        texts = text_of(part.get_column("d"))
        ntok = pl.Series("ntok", [count_tokens(t) for t in texts.to_list()], dtype=pl.Int64)
        kind = texts.to_frame("s").select(sentence_kind_expr(pl.col("s")).alias("kind"))
        parts.append(part.with_columns(ntok, kind.to_series()))
    if not parts:
        return pl.DataFrame(schema={"d": codes.dtype, "ntok": pl.Int64, "kind": pl.UInt8})
    return pl.concat(parts)


def name_positions(ev: pl.DataFrame, group: str, titles: pl.Series, text_of: TextOf) -> pl.Series:
    """For each row of `ev` (group, d), where its sentence first names its group's title:
    the character offset, case-folded; null where it does not. A slice of rows at a time."""
    folded = titles.str.to_lowercase()
    parts = [
        pl.DataFrame(
            {"s": text_of(part.get_column("d")), "t": folded.gather(part.get_column(group))}
        )
        .select(pl.col("s").str.to_lowercase().str.find(pl.col("t"), literal=True))
        .to_series()
        for part in ev.select(group, "d").iter_slices(SLICE_ROWS)
    ]
    return pl.concat(parts).alias("at") if parts else pl.Series("at", [], dtype=pl.UInt32)


def _ranked(ev: pl.DataFrame, group: str, feats: pl.DataFrame) -> pl.DataFrame:
    """`ev` with its features, sorted in description order: the lead (the best opener) of
    each group first, then the others as they rank, those that cannot open last."""
    ev = ev.join(feats, on="d", how="left")
    # from the document about the group, earliest first (a relationship: all 0)
    home = pl.col("home").fill_null(2**40) if "home" in ev.columns else pl.lit(0)
    # named near the start: 0-5 by 40 characters, 6 not named (a relationship: all 6)
    near = (pl.col("at") // 40).clip(0, 5).fill_null(6) if "at" in ev.columns else pl.lit(6)
    lead = (
        ev.select(group, "d", "kind", "units", "centrality", "ntok", home=home, near=near)
        .sort(
            [group, "kind", "home", "near", "units", "centrality", "ntok", "d"],
            descending=[False, False, False, False, True, True, False, False],
        )
        .filter(pl.col(group).is_first_distinct())
        .select(group, "d", lead=pl.lit(True))
    )
    # a title line or heading that is the name alone says nothing more after the lead
    bare = (pl.col("kind") == FRAGMENT) & (pl.col("ntok") <= _HEAD_TOKENS) & (near == 0)
    return (
        ev.join(lead, on=[group, "d"], how="left")
        .with_columns(pl.col("lead").fill_null(False), late=pl.col("kind") != LEADS)
        .filter(pl.col("lead") | ~bare)
        .sort(
            [group, "lead", "late", "units", "centrality", "ntok", "d"],
            descending=[False, True, False, True, True, False, False],
        )
    )


def extractive_descriptions(
    ev: pl.DataFrame,
    group: str,
    n: int,
    text_of: TextOf,
    feats: pl.DataFrame,
    max_tokens: int,
    heads: pl.Series,
) -> pl.Series:
    """Extractive description of each group 0..n-1 ("" for none): its distinct evidence
    sentences, best first, while they fit in `max_tokens`.

    `ev` has columns group, d (code of a non-empty sentence, see `text_of`), units (how many
    text units gave that sentence for that group) and centrality (how many distinct groups
    share the sentence: a sentence naming many entities says more about how this one
    connects), and may have home (the position in its document of the first unit of the
    document or section titled by the group's name that gave it, null: none) and at (see
    `name_positions`); `feats` the `sentence_features` of each code. Ranked on codes
    (`_ranked`; codes sort as the sentences do: deterministic); only kept sentences become
    strings, a slice at a time, a sentence that reads as an earlier one once its markup is
    read kept once. A group whose every sentence opens dangling ("He died in 1937 ...")
    opens with its `heads` line instead ("1937 (date)."), which names it.
    """
    kept = (
        _ranked(ev, group, feats)
        .with_columns(
            rank=pl.int_range(pl.len()).over(group),
            used=(pl.col("ntok") + 1).cum_sum().over(group),
        )
        .filter((pl.col("rank") == 0) | (pl.col("used") <= max_tokens))
        .select(group, "d", "ntok", head=(pl.col("rank") == 0) & (pl.col("kind") == DANGLING))
    )
    parts = []
    for lo, hi, part in row_slices(kept, group, n):
        out = _joined(part, group, text_of, heads)
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


def _joined(part: pl.DataFrame, group: str, text_of: TextOf, heads: pl.Series) -> pl.DataFrame:
    """(group, description, ntok) of kept rows (group, d, ntok, head) in order: the strings
    of d, without repeats, a head line before those flagged."""
    text = text_of(part.get_column("d"))
    head = pl.lit(heads).gather(pl.col(group)) + " " + pl.col("description")
    return (
        part.with_columns(description=text)
        .with_columns(
            pl.when(pl.col("head")).then(head).otherwise("description").alias("description"),
            ntok=pl.col("ntok") + pl.col("head").cast(pl.Int64) * _HEAD_TOKENS,
        )
        .group_by(group, maintain_order=True)
        .agg(
            pl.col("description")
            .filter(pl.col("description") != "")
            .unique(maintain_order=True)
            .str.join(" "),
            pl.col("ntok").sum(),
        )
    )


def head_lines(names: pl.Expr, kinds: pl.Expr) -> pl.Expr:
    """A line naming each group, for a description with no sentence to open it: "Name
    (kind).", its first letter upper-case."""
    line = names + " (" + kinds.str.to_lowercase().str.replace_all("_", " ") + ")."
    return line.str.slice(0, 1).str.to_uppercase() + line.str.slice(1)

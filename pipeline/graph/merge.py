"""Merge per-unit triplets into the entity graph: keys, aliases, extractive summaries.

Entities merge on a normalised key (`title_key`: NFKC, casefold, punctuation, possessives
and a leading article dropped, Russian words crudely stemmed so "Москва"/"Москве" meet).
The displayed title is the most frequent cleaned surface form, the others are aliases:
GraphRAG upper-cases titles, we keep a readable one. Everything is vectorised polars on
integer codes of the strings (see `merge_graph`); the only per-string Python is the key
function over *distinct* surface forms and token counting over *distinct* evidence
sentences.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import GraphSettings
from pipeline.extract.nlp import _ru_stem
from pipeline.ids import stable_id_expr
from pipeline.storage import store
from pipeline.tokens import count_tokens, truncate_tokens

# Relation types whose direction carries no meaning: merged as unordered pairs.
SYMMETRIC_TYPES = frozenset({"RELATED_TO", "SPOUSE", "SIBLING", "RELATIVE", "ALTERNATIVE_NAME"})
FALLBACK_TYPE = "CONCEPT"  # for relation endpoints no entity row mentions
# Rows of mentions turned into strings at a time (descriptions, id lists): bounds the copies.
SLICE_ROWS = 200_000
# Strings of codes (evidence sentences): a Series of codes -> the Series of their strings.
TextOf = Callable[[pl.Series], pl.Series]

_QUOTES = "\"'“”‘’«»„`´"
_POSSESSIVE_RE = re.compile(r"['’]s\b|(?<=s)['’](?=\s|$)", re.IGNORECASE)
_KEY_PUNCT_RE = re.compile(r"[^\w\s&+#]")
_CYR_RE = re.compile(r"[а-яё]", re.IGNORECASE)
_LEADING_ARTICLES = frozenset({"the", "a", "an"})


def normalize_title(title: str) -> str:
    """Display form of a surface title: NFKC, whitespace collapsed, outer quotes and
    brackets and a trailing possessive removed. Case is kept ("Scrooge's" -> "Scrooge")."""
    t = " ".join(unicodedata.normalize("NFKC", title).split())
    t = t.strip(_QUOTES + "()[]{}<>,;:!?*_ ").rstrip(".") if len(t) > 3 else t.strip(_QUOTES)
    if t[-2:] in ("'s", "’s", "'S", "’S") and len(t) > 2:
        t = t[:-2]
    return t.rstrip("'’ ")


def title_key(title: str) -> str:
    """Merge key of a title: case, punctuation, possessives and a leading article ignored.

    "Scrooge", "SCROOGE", "Scrooge's" and "the Scrooge" share a key; "U.S." meets "US";
    Cyrillic words are stemmed ("Москве" -> "москв").
    """
    t = unicodedata.normalize("NFKC", title).casefold()
    t = _POSSESSIVE_RE.sub("", t).replace(".", "")
    t = _KEY_PUNCT_RE.sub(" ", t).replace("_", " ")
    words = t.split()
    if len(words) > 1 and words[0] in _LEADING_ARTICLES:
        words = words[1:]
    return " ".join(_ru_stem(w) if _CYR_RE.search(w) else w for w in words)


def _key_map(titles: pl.Series) -> pl.DataFrame:
    """(surface, key, display) for each distinct surface title."""
    uniq = titles.drop_nulls().unique().cast(pl.Utf8).sort().to_list()
    return pl.DataFrame(
        {
            "surface": uniq,
            "key": [title_key(t) for t in uniq],
            "display": [normalize_title(t) for t in uniq],
        },
        schema={"surface": pl.Utf8, "key": pl.Utf8, "display": pl.Utf8},
    )


def _vocab(*cols: pl.Series) -> pl.Series:
    """Sorted distinct non-null strings of `cols`. A string's code is its index here, so
    codes sort as the strings do (polars compares strings bytewise either way)."""
    return pl.concat([c.drop_nulls().unique().cast(pl.Utf8) for c in cols]).unique().sort()


def _codes(s: pl.Series, vocab: pl.Series) -> pl.Series:
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


def _ranks(s: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(codes, vocab) of strings `s`, as `_codes(s, _vocab(s))`: by a sort, for many
    distinct strings (ids: 30 MB where hashing them took 130 MB)."""
    return (s.rank("dense") - 1).cast(pl.UInt32), s.unique().sort()


def _decode(vocab: pl.Series, code: str) -> pl.Expr:
    """The values of `vocab` at a code column (the strings of codes, a lookup table)."""
    return pl.lit(vocab).gather(pl.col(code))


def _group(df: pl.DataFrame, by: list[str], *aggs: pl.Expr, sort: bool = True) -> pl.DataFrame:
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


def _evidence(*cols: pl.Series) -> tuple[list[pl.Series], TextOf]:
    """Codes of evidence sentences: one per distinct non-empty sentence, in sorted order
    (null: no evidence), for each of `cols`; and their strings' lookup, which reads them
    back from `cols` (a row holding each code) instead of keeping a copy of them all
    (100 MB at 40k documents)."""
    vocab = _vocab(*cols)
    vocab = vocab.filter(vocab != "")
    codes = [_codes(c, vocab) for c in cols]
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


def _token_counts(codes: pl.Series, text_of: TextOf) -> pl.DataFrame:
    """(d, ntok) for each distinct code; texts go to Python a slice at a time."""
    codes = codes.drop_nulls().unique().sort()
    ntok: list[int] = []
    for part in codes.to_frame("d").iter_slices(50_000):
        ntok += [count_tokens(t) for t in text_of(part.get_column("d")).to_list()]
    return pl.DataFrame({"d": codes, "ntok": pl.Series(ntok, dtype=pl.Int64)})


def _slices(df: pl.DataFrame, group: str, n: int):
    """(lo, hi, the rows of groups lo..hi-1) over `df` sorted by `group` (codes 0..n-1),
    about SLICE_ROWS rows at a time: work on strings one slice at a time, so that only the
    output is ever whole."""
    g = df.get_column(group)
    edges = sorted({0, n, *g.gather_every(SLICE_ROWS, offset=SLICE_ROWS).to_list()})
    at = g.search_sorted(pl.Series(edges, dtype=g.dtype), side="left").to_list()
    for lo, hi, a, b in zip(edges, edges[1:], at, at[1:], strict=False):
        yield lo, hi, df.slice(a, b - a)


def _aligned(out: pl.DataFrame, group: str, lo: int, hi: int) -> pl.DataFrame:
    """`out` (one row per group, some of lo..hi-1) as one row per group lo..hi-1."""
    full = pl.DataFrame({group: pl.int_range(lo, hi, dtype=out.schema[group], eager=True)})
    return full.join(out, on=group, how="left", maintain_order="left")


def _summaries(
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
    for lo, hi, part in _slices(kept, group, n):
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
        parts.append(_aligned(out, group, lo, hi).get_column("description").fill_null(""))
    return pl.concat(parts, rechunk=False) if parts else pl.Series([], dtype=pl.Utf8)


def _lists(pairs: pl.DataFrame, group: str, code: str, vocab: pl.Series, n: int) -> pl.Series:
    """For each group 0..n-1, the strings of its distinct codes in code (= string) order;
    null for a group with none. Built a slice at a time, as `_summaries`."""
    pairs = _group(pairs.select(group, code), [group, code])
    parts = [
        _aligned(
            part.select(group, _decode(vocab, code).alias("values"))
            .group_by(group, maintain_order=True)
            .agg("values"),
            group,
            lo,
            hi,
        ).get_column("values")
        for lo, hi, part in _slices(pairs, group, n)
    ]
    return pl.concat(parts, rechunk=False) if parts else pl.Series([], dtype=pl.List(pl.Utf8))


# The columns of the extracted tables merge_graph (and the LLM summaries) read.
MENTION_COLUMNS = {
    "extracted_entities": ["text_unit_id", "title", "type", "description"],
    "extracted_relationships": [
        "text_unit_id",
        "source",
        "target",
        "type",
        "description",
        "weight",
    ],
}


def read_mentions(root: str | Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The extracted entities and relationships of `root`, as merge_graph reads them: its
    columns only, the strings Categorical (one Categories for both tables, so their codes
    compare), a shard file at a time. A mention repeats its sentence, title and unit id:
    at 40k documents 2.4M rows hold 0.3M distinct sentences, 400 MB as strings."""
    categories = pl.Categories.random()
    frames = []
    for name, columns in MENTION_COLUMNS.items():
        files = store.table_files(root, name)
        parts = [
            pl.read_parquet(f, columns=columns).with_columns(
                pl.col(pl.Utf8).cast(pl.Categorical(categories))
            )
            for f in files
        ]
        empty = schemas.empty(name).select(columns)
        frames.append(pl.concat(parts) if parts else empty)
    return frames[0], frames[1]


def merge_graph(
    extracted_entities: pl.DataFrame,
    extracted_relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: GraphSettings,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(entities, relationships, text_units) — entities/relationships with exactly
    schemas.ENTITIES / RELATIONSHIPS columns; text_units = the input text_units with
    entity_ids / relationship_ids filled.

    Memory: every mention becomes integer codes first (text unit, key, display, type,
    evidence sentence: indices into sorted vocabularies, so codes sort as their strings);
    the group-bys (`_group`) and sorts run on those, entities and relationships are
    numbered in output order, and strings come back only for what the output holds, a
    slice of rows at a time. The same merge on strings copied every sentence per join and
    group: at 40k documents (2.4M mention rows, 0.77 GB process after loading) it peaked
    at 2.7 GB, this at 1.3 GB, the output tables identical.
    """
    max_tok = settings.description_max_tokens
    xe, xr = extracted_entities, extracted_relationships

    def col(df: pl.DataFrame, name: str, fill: str | None = None) -> pl.Series:
        s = df.get_column(name)  # Utf8, or Categorical (read_mentions): kept as it is
        s = s if isinstance(s.dtype, pl.Categorical) else s.cast(pl.Utf8)
        return s if fill is None else s.fill_null(fill)

    # ---- vocabularies: sorted distinct strings; a code is an index in one
    units = _vocab(col(xe, "text_unit_id"), col(xr, "text_unit_id"))
    km = _key_map(_vocab(col(xe, "title"), col(xr, "source"), col(xr, "target")))
    keys = _vocab(km.get_column("key").filter(km.get_column("key") != ""))
    displays = _vocab(km.get_column("display"))
    surf_key = _codes(km.get_column("key"), keys)  # null for a key-less surface ("...")
    surf_disp = _codes(km.get_column("display"), displays)
    surfaces = km.get_column("surface")
    del km
    etypes = _vocab(col(xe, "type", FALLBACK_TYPE), pl.Series([FALLBACK_TYPE]))
    rtypes = _vocab(col(xr, "type", "RELATED_TO"))
    fallback = etypes.index_of(FALLBACK_TYPE)

    (ed, rd), text_of = _evidence(col(xe, "description"), col(xr, "description"))
    # ---- mentions as codes: (u)nit, (k)ey, (disp)lay, (t)ype, (d)escription
    sc = _codes(col(xe, "title"), surfaces)
    ee = pl.DataFrame(
        {
            "u": _codes(col(xe, "text_unit_id"), units),
            "k": surf_key.gather(sc),
            "disp": surf_disp.gather(sc),
            "t": _codes(col(xe, "type", FALLBACK_TYPE), etypes),
            "d": ed,
        }
    ).filter(pl.col("k").is_not_null())
    ssc, tsc = _codes(col(xr, "source"), surfaces), _codes(col(xr, "target"), surfaces)
    er = pl.DataFrame(
        {
            "u": _codes(col(xr, "text_unit_id"), units),
            "sc": ssc,
            "tc": tsc,
            "sk": surf_key.gather(ssc),
            "tk": surf_key.gather(tsc),
            "t": _codes(col(xr, "type", "RELATED_TO"), rtypes),
            "d": rd,
            "w": xr.get_column("weight").cast(pl.Float64).fill_null(1.0),
        }
    )
    del sc, ssc, tsc, ed, rd
    er = er.filter(
        pl.col("sk").is_not_null()
        & pl.col("tk").is_not_null()
        & (pl.col("sk") != pl.col("tk"))  # self-loops, also after merging aliases
    )
    sym_types = [i for i, t in enumerate(rtypes.to_list()) if t in SYMMETRIC_TYPES]
    sym = pl.col("t").is_in(sym_types) & (pl.col("sk") > pl.col("tk"))
    er = er.with_columns(  # each end keeps its own surface form
        pl.when(sym).then(pl.col("tk")).otherwise(pl.col("sk")).alias("sk"),
        pl.when(sym).then(pl.col("sk")).otherwise(pl.col("tk")).alias("tk"),
        pl.when(sym).then(pl.col("tc")).otherwise(pl.col("sc")).alias("sc"),
        pl.when(sym).then(pl.col("sc")).otherwise(pl.col("tc")).alias("tc"),
    )

    # Relation endpoints no entity row names become entities too (an LLM may do that),
    # titled by their own surface forms.
    endpoints = pl.concat([er.select("u", k="sk", sc="sc"), er.select("u", k="tk", sc="tc")]).join(
        ee.select("k").unique(), on="k", how="anti"
    )
    if not endpoints.is_empty():
        ee = pl.concat(
            [
                ee,
                endpoints.select(
                    "u",
                    "k",
                    disp=_decode(surf_disp, "sc"),
                    t=pl.lit(fallback, dtype=pl.UInt32),
                    d=pl.lit(None, dtype=pl.UInt32),
                ),
            ]
        )
    del endpoints
    er = er.drop("sc", "tc")
    ntok = _token_counts(pl.concat([ee.get_column("d"), er.get_column("d")]), text_of)

    # ---- entities: one row per key, numbered in output order (pos)
    title_pick = (
        _group(ee.select("k", "disp"), ["k", "disp"], pl.len())
        .sort(["k", "len", "disp"], descending=[False, True, False])
        .with_columns(display=_decode(displays, "disp"))
        .group_by("k", maintain_order=True)
        .agg(
            pl.col("display").first().alias("title"),
            pl.col("disp").first().alias("title_code"),
            pl.col("display").alias("forms"),
        )
        .with_columns(
            aliases=pl.col("forms").list.slice(1).list.sort(),
            id=stable_id_expr(_decode(keys, "k")),
        )
        .drop("forms")
    )
    type_pick = (
        _group(ee.select("k", "t"), ["k", "t"], pl.len())
        .with_columns(concept=pl.col("t") == fallback)
        .sort(["k", "len", "concept", "t"], descending=[False, True, False, False])
        .group_by("k", maintain_order=True)
        .agg(pl.col("t").first())
        .select("k", type=_decode(etypes, "t"))
    )
    ent_units = _group(ee.select("k", "u"), ["k", "u"])
    frequency = _group(ent_units, ["k"], pl.len().cast(pl.Int64).alias("frequency"), sort=False)
    # a relationship per run of (sk, tk, t) in `er` sorted on them
    er = er.sort("sk", "tk", "t", maintain_order=True).with_columns(
        run=pl.struct("sk", "tk", "t").rle_id()
    )
    rel = er.group_by("run", maintain_order=True).agg(
        pl.col("sk", "tk", "t").first(), pl.col("w").sum()
    )
    ends = pl.concat([rel.select(a="sk", b="tk"), rel.select(a="tk", b="sk")])
    degree = _group(
        _group(ends, ["a", "b"]), ["a"], pl.len().cast(pl.Int64).alias("degree"), sort=False
    ).rename({"a": "k"})
    del ends
    ents = (
        title_pick.join(type_pick, on="k")
        .join(frequency, on="k")
        .join(degree, on="k", how="left")
        .with_columns(pl.col("degree").fill_null(0))
        .sort(["frequency", "title", "id"], descending=[True, False, False])
        .with_columns(human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64))
    )
    del title_pick, type_pick, frequency, degree
    pos = ents.select("k", pos=pl.col("human_readable_id").cast(pl.UInt32))
    ev = _group(ee.filter(pl.col("d").is_not_null()).select("k", "d", "u"), ["k", "d", "u"])
    ev = (
        _group(ev, ["k", "d"], pl.len().alias("units"), sort=False)  # distinct units
        .with_columns(centrality=pl.col("k").count().over("d"))
        .join(pos, on="k")
    )
    del ee
    ents = ents.with_columns(
        description=_summaries(ev, "pos", ents.height, text_of, ntok, max_tok),
        text_unit_ids=_lists(ent_units.join(pos, on="k"), "pos", "u", units, ents.height),
    )
    del ev, pos
    idc, ent_ids = _ranks(ents.get_column("id"))
    ent_ref = ents.select("k", "id", "title_code", "degree", idc=idc)
    unit_ents = ent_units.join(ent_ref.select("k", "idc"), on="k").select("u", "idc")
    del ent_units

    # ---- relationships: sorted on codes (titles' codes sort as the titles), numbered in
    # output order (r)
    rel = (
        rel.with_columns(
            id=stable_id_expr(_decode(keys, "sk"), _decode(keys, "tk"), _decode(rtypes, "t"))
        )
        .join(ent_ref.select(sk="k", source_id="id", st="title_code", sd="degree"), on="sk")
        .join(ent_ref.select(tk="k", target_id="id", tt="title_code", td="degree"), on="tk")
        .sort(["w", "st", "tt", "t", "id"], descending=[True] + [False] * 4)
        .with_row_index("r")
    )
    del ent_ref
    # run -> r: `run` numbers the relationships in key order, `r` in output order
    er = er.select(r=_decode(rel.get_column("run").arg_sort(), "run"), u="u", d="d")
    rev = _group(er.filter(pl.col("d").is_not_null()), ["r", "d", "u"])
    rev = _group(rev, ["r", "d"], pl.len().alias("units"), sort=False).with_columns(
        centrality=pl.lit(0, dtype=pl.UInt32)
    )
    rel_units = _group(er.select("r", "u"), ["r", "u"])
    del er
    description = _summaries(rev, "r", rel.height, text_of, ntok, max_tok)
    del rev, text_of, ntok
    rels = rel.select(
        "id",
        pl.col("r").cast(pl.Int64).alias("human_readable_id"),
        source=_decode(displays, "st"),
        target=_decode(displays, "tt"),
        source_id="source_id",
        target_id="target_id",
        type=_decode(rtypes, "t"),
        description=description,
        weight="w",
        combined_degree=(pl.col("sd") + pl.col("td")).cast(pl.Int64),
        text_unit_ids=_lists(rel_units, "r", "u", units, rel.height),
    )
    del rel, description
    ridc, rel_ids = _ranks(rels.get_column("id"))  # by r
    unit_rels = rel_units.select("u", ridc=_decode(ridc, "r"))
    del rel_units, ridc

    # ---- text units: ids of the entities / relationships each unit holds
    tu = text_units.drop([c for c in ("entity_ids", "relationship_ids") if c in text_units.columns])
    at = pl.DataFrame(
        {
            "u": _codes(tu.get_column("id").cast(pl.Utf8), units),
            "row": pl.int_range(tu.height, dtype=pl.UInt32, eager=True),
        }
    )
    none = pl.lit([], dtype=pl.List(pl.Utf8))
    tu = tu.with_columns(
        entity_ids=_lists(unit_ents.join(at, on="u"), "row", "idc", ent_ids, tu.height),
        relationship_ids=_lists(unit_rels.join(at, on="u"), "row", "ridc", rel_ids, tu.height),
    ).with_columns(pl.col("entity_ids").fill_null(none), pl.col("relationship_ids").fill_null(none))
    return (
        _cast(ents, schemas.ENTITIES),
        _cast(rels, schemas.RELATIONSHIPS),
        tu,
    )


def _cast(df: pl.DataFrame, schema) -> pl.DataFrame:
    """Exactly `schema`'s columns and types (also for empty inputs). Cast by polars: a
    round trip through Arrow copied every string twice (400 MB at 40k documents)."""
    dtypes = pl.from_arrow(schema.empty_table()).schema
    return df.select(pl.col(name).cast(dtype) for name, dtype in dtypes.items())

"""Merge per-unit triplets into the entity graph: one entity per key, one relationship per
(source, target, type), with aliases, weights, degrees, extractive descriptions and the text
units they come from.

Entities merge on a normalised key (pipeline.graph.titles). The displayed title is the most
frequent cleaned surface form, the others are aliases. Everything is vectorised polars on
integer codes of the strings (pipeline.graph.encode_strings; see `merge_graph`); the only per-string
Python is the key function over *distinct* surface forms and token counting over *distinct*
evidence sentences (pipeline.graph.descriptions).
"""

from __future__ import annotations

import polars as pl

from pipeline import schemas
from pipeline.config import GraphSettings
from pipeline.graph.descriptions import (
    TextOf,
    extractive_descriptions,
    head_lines,
    name_positions,
    sentence_features,
)
from pipeline.graph.encode_mentions import FALLBACK_TYPE, Vocabularies, mention_codes
from pipeline.graph.encode_strings import (
    code_lists,
    codes_in,
    decode,
    dense_codes,
    group_runs,
    sorted_vocab,
)
from pipeline.graph.titles import key_map
from pipeline.ids import stable_id_expr


def merge_graph(
    extracted_entities: pl.DataFrame,
    extracted_relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: GraphSettings,
    homes: pl.DataFrame | None = None,
    given_titles: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(entities, relationships, text_units) — entities/relationships with exactly
    schemas.ENTITIES / RELATIONSHIPS columns; text_units = the input text_units with
    entity_ids / relationship_ids filled. `homes` (text_unit_id, title, seq: see
    `titles.unit_titles`): the titles of the document and sections each unit is in; an
    entity of that name opens its description with a sentence from there, the earliest
    unit's first (pipeline.graph.descriptions).

    Memory: every mention becomes integer codes first (text unit, key, display, type,
    evidence sentence: indices into sorted vocabularies, so codes sort as their strings);
    the group-bys (`group_runs`) and sorts run on those, entities and relationships are
    numbered in output order, and strings come back only for what the output holds, a
    slice of rows at a time. The same merge on strings copied every sentence per join and
    group: at 40k documents (2.4M mention rows, 0.77 GB process after loading) it peaked
    at 2.7 GB, this at 1.3 GB, the output tables identical.
    """
    max_tok = settings.description_max_tokens
    vocabularies, ee, er, text_of = mention_codes(extracted_entities, extracted_relationships)
    if given_titles is not None:
        vocabularies, ee = _with_displays(vocabularies, ee, given_titles.get_column("title"))
    units, keys, displays, etypes, rtypes = vocabularies
    feats = sentence_features(pl.concat([ee.get_column("d"), er.get_column("d")]), text_of)

    # ---- entities: one row per key, numbered in output order (pos)
    title_pick, type_pick = _entity_picks(ee, vocabularies)
    if given_titles is not None:
        title_pick = _given(title_pick, given_titles, vocabularies)
    ent_units = group_runs(ee.select("k", "u"), ["k", "u"])
    frequency = group_runs(ent_units, ["k"], pl.len().cast(pl.Int64).alias("frequency"), sort=False)
    er, rel = _relationship_runs(er)
    ents = _entity_rows(title_pick, type_pick, frequency, rel)
    del title_pick, type_pick, frequency
    pos = ents.select("k", pos=pl.col("human_readable_id").cast(pl.UInt32))
    ev = _entity_evidence(ee, pos, ents.get_column("title"), homes, units, keys, text_of)
    del ee
    ents = ents.with_columns(
        description=extractive_descriptions(
            ev, "pos", ents.height, text_of, feats, max_tok, _heads(ents, "title", "type")
        ),
        text_unit_ids=code_lists(ent_units.join(pos, on="k"), "pos", "u", units, ents.height),
    )
    del ev, pos
    idc, ent_ids = dense_codes(ents.get_column("id"))
    ent_ref = ents.select("k", "id", "title_code", "degree", idc=idc)
    unit_ents = ent_units.join(ent_ref.select("k", "idc"), on="k").select("u", "idc")
    del ent_units

    # ---- relationships: sorted on codes (titles' codes sort as the titles), numbered in
    # output order (r)
    rel = _number_relationships(rel, ent_ref, keys, rtypes)
    del ent_ref
    # run -> r: `run` numbers the relationships in key order, `r` in output order
    er = er.select(r=decode(rel.get_column("run").arg_sort(), "run"), u="u", d="d")
    rev, rel_units = _relationship_evidence(er)
    del er
    heads = _heads(
        rel.select(
            name=decode(displays, "st") + " – " + decode(displays, "tt"), t=decode(rtypes, "t")
        ),
        "name",
        "t",
    )
    description = extractive_descriptions(rev, "r", rel.height, text_of, feats, max_tok, heads)
    del rev, text_of, feats
    rels = _relationship_rows(rel, description, rel_units, vocabularies)
    del rel, description
    ridc, rel_ids = dense_codes(rels.get_column("id"))  # by r
    unit_rels = rel_units.select("u", ridc=decode(ridc, "r"))
    del rel_units, ridc
    tu = _text_unit_ids(text_units, units, unit_ents, ent_ids, unit_rels, rel_ids)
    return _cast(ents, schemas.ENTITIES), _cast(rels, schemas.RELATIONSHIPS), tu


def _entity_picks(
    ee: pl.DataFrame, vocabularies: Vocabularies
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per key (k): its title (the most frequent display form; title_code), sorted aliases
    and id; and its type (the most frequent, the fallback type last)."""
    fallback = vocabularies.etypes.index_of(FALLBACK_TYPE)
    title_pick = (
        group_runs(ee.select("k", "disp"), ["k", "disp"], pl.len())
        .sort(["k", "len", "disp"], descending=[False, True, False])
        .with_columns(display=decode(vocabularies.displays, "disp"))
        .group_by("k", maintain_order=True)
        .agg(
            pl.col("display").first().alias("title"),
            pl.col("disp").first().alias("title_code"),
            pl.col("display").alias("forms"),
        )
        .with_columns(
            aliases=pl.col("forms").list.slice(1).list.sort(),
            id=stable_id_expr(decode(vocabularies.keys, "k")),
        )
        .drop("forms")
    )
    type_pick = (
        group_runs(ee.select("k", "t"), ["k", "t"], pl.len())
        .with_columns(concept=pl.col("t") == fallback)
        .sort(["k", "len", "concept", "t"], descending=[False, True, False, False])
        .group_by("k", maintain_order=True)
        .agg(pl.col("t").first())
        .select("k", type=decode(vocabularies.etypes, "t"))
    )
    return title_pick, type_pick


def _with_displays(
    vocabularies: Vocabularies, ee: pl.DataFrame, more: pl.Series
) -> tuple[Vocabularies, pl.DataFrame]:
    """The display vocabulary with `more` strings in it, `ee`'s display codes moved to it."""
    displays = sorted_vocab(vocabularies.displays, more)
    moved = codes_in(vocabularies.displays, displays)
    ee = ee.with_columns(disp=pl.lit(moved).gather(pl.col("disp")))
    return vocabularies._replace(displays=displays), ee


def _given(
    title_pick: pl.DataFrame, given: pl.DataFrame, vocabularies: Vocabularies
) -> pl.DataFrame:
    """`title_pick` with the title (and its code) of the keys in `given` (key, title)."""
    given = given.select(
        k=codes_in(given.get_column("key").cast(pl.Utf8), vocabularies.keys),
        given=pl.col("title").cast(pl.Utf8),
        given_code=codes_in(given.get_column("title").cast(pl.Utf8), vocabularies.displays),
    ).drop_nulls("k")
    return (
        title_pick.join(given, on="k", how="left", maintain_order="left")
        .with_columns(
            title=pl.coalesce("given", "title"), title_code=pl.coalesce("given_code", "title_code")
        )
        .drop("given", "given_code")
    )


def _relationship_runs(er: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`er` sorted on (sk, tk, t), `run` numbering its runs; a relationship (w summed) per run."""
    er = er.sort("sk", "tk", "t", maintain_order=True).with_columns(
        run=pl.struct("sk", "tk", "t").rle_id()
    )
    rel = er.group_by("run", maintain_order=True).agg(
        pl.col("sk", "tk", "t").first(), pl.col("w").sum()
    )
    return er, rel


def _entity_rows(
    title_pick: pl.DataFrame, type_pick: pl.DataFrame, frequency: pl.DataFrame, rel: pl.DataFrame
) -> pl.DataFrame:
    """One row per key with title, type, frequency, degree, numbered in output order."""
    ends = pl.concat([rel.select(a="sk", b="tk"), rel.select(a="tk", b="sk")])
    degree = group_runs(
        group_runs(ends, ["a", "b"]), ["a"], pl.len().cast(pl.Int64).alias("degree"), sort=False
    ).rename({"a": "k"})
    del ends
    return (
        title_pick.join(type_pick, on="k")
        .join(frequency, on="k")
        .join(degree, on="k", how="left")
        .with_columns(pl.col("degree").fill_null(0))
        .sort(["frequency", "title", "id"], descending=[True, False, False])
        .with_columns(human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64))
    )


def _entity_evidence(
    ee: pl.DataFrame,
    pos: pl.DataFrame,
    titles: pl.Series,
    homes: pl.DataFrame | None,
    units: pl.Series,
    keys: pl.Series,
    text_of: TextOf,
) -> pl.DataFrame:
    """Per (entity pos, evidence sentence d): its distinct units, the earliest home unit,
    centrality (how many keys d is evidence of: counted here, or given per mention as c)
    and where the entity's name stands (`extractive_descriptions`' input)."""
    given = "c" in ee.columns  # each sentence's centrality, counted over the whole corpus
    first = [pl.col("c").first()] if given else []
    ev = ee.filter(pl.col("d").is_not_null()).select("k", "d", "u", *(["c"] if given else []))
    ev = group_runs(ev, ["k", "d", "u"], *first)
    # joined on (u, k) as one integer: on the two columns the join took +270 MB over 4M rows
    uk = pl.col("u").cast(pl.UInt64) * 2**32 + pl.col("k").cast(pl.UInt64)
    home = _home_units(homes, units, keys).select(uk=uk, home="home")
    ev = ev.with_columns(uk=uk).join(home, on="uk", how="left", maintain_order="left").drop("uk")
    ev = (
        group_runs(  # distinct units; the first of them in the entity's own document
            ev, ["k", "d"], pl.len().alias("units"), pl.col("home").min(), *first, sort=False
        )
        .with_columns(centrality=pl.col("c") if given else pl.col("k").count().over("d"))
        .drop("c", strict=False)
        .join(pos, on="k")
    )
    return ev.with_columns(name_positions(ev, "pos", titles, text_of))


def _number_relationships(
    rel: pl.DataFrame, ent_ref: pl.DataFrame, keys: pl.Series, rtypes: pl.Series
) -> pl.DataFrame:
    """Relationships with id, their ends' ids, title codes and degrees, sorted in output
    order (weight, then titles' codes, which sort as the titles) and numbered (r)."""
    return (
        rel.with_columns(
            id=stable_id_expr(decode(keys, "sk"), decode(keys, "tk"), decode(rtypes, "t"))
        )
        .join(ent_ref.select(sk="k", source_id="id", st="title_code", sd="degree"), on="sk")
        .join(ent_ref.select(tk="k", target_id="id", tt="title_code", td="degree"), on="tk")
        .sort(["w", "st", "tt", "t", "id"], descending=[True] + [False] * 4)
        .with_row_index("r")
    )


def _relationship_evidence(er: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """From (r, u, d): per (r, evidence sentence d) its unit count; each r's distinct units."""
    rev = group_runs(er.filter(pl.col("d").is_not_null()), ["r", "d", "u"])
    rev = group_runs(rev, ["r", "d"], pl.len().alias("units"), sort=False).with_columns(
        centrality=pl.lit(0, dtype=pl.UInt32)
    )
    return rev, group_runs(er.select("r", "u"), ["r", "u"])


def _relationship_rows(
    rel: pl.DataFrame, description: pl.Series, rel_units: pl.DataFrame, vocabularies: Vocabularies
) -> pl.DataFrame:
    """The relationships table's columns, strings decoded, in output order (r)."""
    units, _, displays, _, rtypes = vocabularies
    return rel.select(
        "id",
        pl.col("r").cast(pl.Int64).alias("human_readable_id"),
        source=decode(displays, "st"),
        target=decode(displays, "tt"),
        source_id="source_id",
        target_id="target_id",
        type=decode(rtypes, "t"),
        description=description,
        weight="w",
        combined_degree=(pl.col("sd") + pl.col("td")).cast(pl.Int64),
        text_unit_ids=code_lists(rel_units, "r", "u", units, rel.height),
    )


def _heads(frame: pl.DataFrame, name: str, kind: str) -> pl.Series:
    """Each row's `head_lines` (rows in output order)."""
    return frame.select(head_lines(pl.col(name), pl.col(kind))).to_series()


def _home_units(homes: pl.DataFrame | None, units: pl.Series, keys: pl.Series) -> pl.DataFrame:
    """(u, k, home): each text unit with the keys of its document's and sections' titles
    (`homes`: text_unit_id, title, seq) that are entities' keys, and its position in its
    document (home: seq)."""
    schema = {"u": pl.UInt32, "k": pl.UInt32, "home": pl.Int64}
    if homes is None or homes.is_empty():
        return pl.DataFrame(schema=schema)
    km = key_map(homes.get_column("title"))
    key_of = codes_in(km.get_column("key"), keys)  # by surface, null: no entity's key
    pairs = homes.select(
        u=codes_in(homes.get_column("text_unit_id").cast(pl.Utf8), units),
        sc=codes_in(homes.get_column("title").cast(pl.Utf8), km.get_column("surface")),
        home=pl.col("seq").fill_null(0),
    )
    return (
        pairs.select("u", k=decode(key_of, "sc"), home="home")
        .drop_nulls()
        .unique(["u", "k"])
        .cast(schema)
    )


def _cast(df: pl.DataFrame, schema) -> pl.DataFrame:
    """Exactly `schema`'s columns and types (also for empty inputs). Cast by polars: a
    round trip through Arrow copied every string twice (400 MB at 40k documents)."""
    dtypes = pl.from_arrow(schema.empty_table()).schema
    return df.select(pl.col(name).cast(dtype) for name, dtype in dtypes.items())


def _text_unit_ids(
    text_units: pl.DataFrame,
    units: pl.Series,
    unit_ents: pl.DataFrame,
    ent_ids: pl.Series,
    unit_rels: pl.DataFrame,
    rel_ids: pl.Series,
) -> pl.DataFrame:
    """`text_units` with entity_ids / relationship_ids: the ids of the entities and
    relationships each unit holds (`unit_ents` (u, idc), `unit_rels` (u, ridc): codes into
    `ent_ids` / `rel_ids`), an empty list for none."""
    tu = text_units.drop([c for c in ("entity_ids", "relationship_ids") if c in text_units.columns])
    at = pl.DataFrame(
        {
            "u": codes_in(tu.get_column("id").cast(pl.Utf8), units),
            "row": pl.int_range(tu.height, dtype=pl.UInt32, eager=True),
        }
    )
    ents = code_lists(unit_ents.join(at, on="u"), "row", "idc", ent_ids, tu.height, empty=True)
    rels = code_lists(unit_rels.join(at, on="u"), "row", "ridc", rel_ids, tu.height, empty=True)
    return tu.with_columns(entity_ids=ents, relationship_ids=rels)

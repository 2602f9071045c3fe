"""Merge per-unit triplets into the entity graph: keys, aliases, extractive summaries.

Entities merge on a normalised key (`title_key`: NFKC, casefold, punctuation, possessives
and a leading article dropped, Russian words crudely stemmed so "Москва"/"Москве" meet).
The displayed title is the most frequent cleaned surface form, the others are aliases:
GraphRAG upper-cases titles, we keep a readable one. Everything is polars group_by/explode;
the only per-string Python is the key function over *distinct* surface forms and token
counting over *distinct* evidence sentences.
"""

from __future__ import annotations

import re
import unicodedata

import polars as pl

from pipeline import schemas
from pipeline.config import GraphSettings
from pipeline.extract.nlp import _ru_stem
from pipeline.ids import stable_id_expr
from pipeline.tokens import count_tokens, truncate_tokens

# Relation types whose direction carries no meaning: merged as unordered pairs.
SYMMETRIC_TYPES = frozenset({"RELATED_TO", "SPOUSE", "SIBLING", "RELATIVE", "ALTERNATIVE_NAME"})
FALLBACK_TYPE = "CONCEPT"  # for relation endpoints no entity row mentions

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
    uniq = titles.drop_nulls().unique().sort().to_list()
    return pl.DataFrame(
        {
            "surface": uniq,
            "key": [title_key(t) for t in uniq],
            "display": [normalize_title(t) for t in uniq],
        },
        schema={"surface": pl.Utf8, "key": pl.Utf8, "display": pl.Utf8},
    )


def _summaries(ev: pl.DataFrame, group: str, max_tokens: int) -> pl.DataFrame:
    """Extractive description per `group`: its distinct evidence sentences, best first,
    while they fit in `max_tokens`.

    `ev` has columns group, description, units (how many text units gave that sentence for
    that group) and centrality (how many distinct groups share the sentence: a sentence
    naming many entities says more about how this one connects). Deterministic.
    """
    ev = ev.filter(pl.col("description").is_not_null() & (pl.col("description") != ""))
    if ev.is_empty():
        return pl.DataFrame(schema={group: pl.Utf8, "description": pl.Utf8})
    sents = ev.get_column("description").unique().sort()
    # One encode per distinct sentence: encode_ordinary_batch submits a thread task per text
    # (measured 3x slower for short sentences).
    ntok = pl.DataFrame(
        {"description": sents, "ntok": [count_tokens(s) for s in sents.to_list()]},
        schema={"description": pl.Utf8, "ntok": pl.Int64},
    )
    ranked = (
        ev.join(ntok, on="description", how="left")
        .sort(
            [group, "units", "centrality", "ntok", "description"],
            descending=[False, True, True, False, False],
        )
        .with_columns(
            rank=pl.int_range(pl.len()).over(group),
            used=(pl.col("ntok") + 1).cum_sum().over(group),
        )
        .filter((pl.col("rank") == 0) | (pl.col("used") <= max_tokens))
    )
    out = ranked.group_by(group).agg(
        pl.col("description").str.join(" "), pl.col("ntok").sum().alias("ntok")
    )
    # A single over-long sentence, or BPE merges across the joins: enforce the limit exactly.
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
        ).with_columns(pl.coalesce("fixed", "description").alias("description"))
    return out.select(group, "description")


def merge_graph(
    extracted_entities: pl.DataFrame,
    extracted_relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: GraphSettings,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(entities, relationships, text_units) — entities/relationships with exactly
    schemas.ENTITIES / RELATIONSHIPS columns; text_units = the input text_units with
    entity_ids / relationship_ids filled."""
    max_tok = settings.description_max_tokens
    ee = extracted_entities.select(
        pl.col("text_unit_id").cast(pl.Utf8),
        pl.col("title").cast(pl.Utf8),
        pl.col("type").cast(pl.Utf8).fill_null(FALLBACK_TYPE),
        pl.col("description").cast(pl.Utf8).fill_null(""),
    ).filter(pl.col("title").is_not_null())
    er = extracted_relationships.select(
        pl.col("text_unit_id").cast(pl.Utf8),
        pl.col("source").cast(pl.Utf8),
        pl.col("target").cast(pl.Utf8),
        pl.col("type").cast(pl.Utf8).fill_null("RELATED_TO"),
        pl.col("description").cast(pl.Utf8).fill_null(""),
        pl.col("weight").cast(pl.Float64).fill_null(1.0),
    ).filter(pl.col("source").is_not_null() & pl.col("target").is_not_null())

    km = _key_map(pl.concat([ee["title"], er["source"], er["target"]]))
    km = km.filter(pl.col("key") != "")
    ee = ee.join(km, left_on="title", right_on="surface", how="inner")
    er = (
        er.join(
            km.select(pl.col("surface"), pl.col("key").alias("skey")),
            left_on="source",
            right_on="surface",
            how="inner",
        )
        .join(
            km.select(pl.col("surface"), pl.col("key").alias("tkey")),
            left_on="target",
            right_on="surface",
            how="inner",
        )
        .filter(pl.col("skey") != pl.col("tkey"))  # self-loops, also after merging aliases
    )
    sym = pl.col("type").is_in(list(SYMMETRIC_TYPES)) & (pl.col("skey") > pl.col("tkey"))
    er = er.with_columns(
        pl.when(sym).then(pl.col("tkey")).otherwise(pl.col("skey")).alias("skey"),
        pl.when(sym).then(pl.col("skey")).otherwise(pl.col("tkey")).alias("tkey"),
    )

    # Relation endpoints no entity row names become entities too (an LLM may do that).
    endpoint_rows = pl.concat(
        [
            er.select("text_unit_id", pl.col("skey").alias("key"), pl.col("source").alias("title")),
            er.select("text_unit_id", pl.col("tkey").alias("key"), pl.col("target").alias("title")),
        ]
    )
    missing = endpoint_rows.join(ee.select("key").unique(), on="key", how="anti")
    if not missing.is_empty():
        ee = pl.concat(
            [
                ee.select("text_unit_id", "key", "title", "type", "description", "display"),
                missing.join(km.select("surface", "display"), left_on="title", right_on="surface")
                .with_columns(type=pl.lit(FALLBACK_TYPE), description=pl.lit(""))
                .select("text_unit_id", "key", "title", "type", "description", "display"),
            ]
        )

    # ---- entities
    title_pick = (
        ee.group_by("key", "display")
        .len()
        .sort(["key", "len", "display"], descending=[False, True, False])
        .group_by("key", maintain_order=True)
        .agg(pl.col("display").first().alias("title"), pl.col("display").alias("forms"))
        .with_columns(
            aliases=pl.col("forms").list.slice(1).list.sort(),
            id=stable_id_expr("key"),
        )
        .drop("forms")
    )
    type_pick = (
        ee.group_by("key", "type")
        .len()
        .with_columns(concept=pl.col("type") == FALLBACK_TYPE)
        .sort(["key", "len", "concept", "type"], descending=[False, True, False, False])
        .group_by("key", maintain_order=True)
        .agg(pl.col("type").first())
    )
    units = (
        ee.group_by("key")
        .agg(
            pl.col("text_unit_id").unique().sort().alias("text_unit_ids"),
        )
        .with_columns(frequency=pl.col("text_unit_ids").list.len().cast(pl.Int64))
    )
    ev = (
        ee.group_by("key", "description")
        .agg(pl.col("text_unit_id").n_unique().alias("units"))
        .with_columns(centrality=pl.col("key").count().over("description"))
    )
    ent_desc = _summaries(ev, "key", max_tok)

    # ---- relationships
    rel = (
        er.group_by("skey", "tkey", "type")
        .agg(
            pl.col("weight").sum(),
            pl.col("text_unit_id").unique().sort().alias("text_unit_ids"),
        )
        .with_columns(
            rkey=pl.concat_str(["skey", "tkey", "type"], separator="\x1f"),
            id=stable_id_expr("skey", "tkey", "type"),
        )
    )
    rev = (
        er.with_columns(rkey=pl.concat_str(["skey", "tkey", "type"], separator="\x1f"))
        .group_by("rkey", "description")
        .agg(pl.col("text_unit_id").n_unique().alias("units"))
        .with_columns(centrality=pl.lit(0, dtype=pl.UInt32))
    )
    rel_desc = _summaries(rev, "rkey", max_tok)
    degree = (
        pl.concat([rel.select(a="skey", b="tkey"), rel.select(a="tkey", b="skey")])
        .unique()
        .group_by("a")
        .len()
        .select(pl.col("a").alias("key"), pl.col("len").cast(pl.Int64).alias("degree"))
    )

    ents = (
        title_pick.join(type_pick, on="key")
        .join(units, on="key")
        .join(ent_desc, on="key", how="left")
        .join(degree, on="key", how="left")
        .with_columns(
            pl.col("description").fill_null(""),
            pl.col("degree").fill_null(0),
        )
        .sort(["frequency", "title", "id"], descending=[True, False, False])
        .with_columns(human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64))
    )
    ent_ref = ents.select("key", "id", "title", "degree")
    rels = (
        rel.join(rel_desc, on="rkey", how="left")
        .join(
            ent_ref.rename({"key": "skey", "id": "source_id", "title": "source", "degree": "sd"}),
            on="skey",
        )
        .join(
            ent_ref.rename({"key": "tkey", "id": "target_id", "title": "target", "degree": "td"}),
            on="tkey",
        )
        .with_columns(
            pl.col("description").fill_null(""),
            combined_degree=(pl.col("sd") + pl.col("td")).cast(pl.Int64),
        )
        .sort(["weight", "source", "target", "type", "id"], descending=[True] + [False] * 4)
        .with_columns(human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64))
    )

    # ---- text units: ids of the entities / relationships each unit holds
    unit_ents = (
        ee.select("text_unit_id", "key")
        .unique()
        .join(ent_ref.select("key", "id"), on="key")
        .group_by("text_unit_id")
        .agg(pl.col("id").unique().sort().alias("entity_ids"))
    )
    unit_rels = (
        rels.select("id", "text_unit_ids")
        .explode("text_unit_ids")
        .group_by(pl.col("text_unit_ids").alias("text_unit_id"))
        .agg(pl.col("id").unique().sort().alias("relationship_ids"))
    )
    tu = text_units.drop([c for c in ("entity_ids", "relationship_ids") if c in text_units.columns])
    tu = (
        tu.with_columns(pl.col("id").cast(pl.Utf8).alias("__uid"))
        .join(
            unit_ents, left_on="__uid", right_on="text_unit_id", how="left", maintain_order="left"
        )
        .join(
            unit_rels, left_on="__uid", right_on="text_unit_id", how="left", maintain_order="left"
        )
        .drop("__uid")
        .with_columns(
            pl.col("entity_ids").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))),
            pl.col("relationship_ids").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))),
        )
    )
    return (
        _cast(ents, schemas.ENTITIES),
        _cast(rels, schemas.RELATIONSHIPS),
        tu,
    )


def _cast(df: pl.DataFrame, schema) -> pl.DataFrame:
    """Exactly `schema`'s columns and types (also for empty inputs)."""
    return pl.from_arrow(df.select(schema.names).to_arrow().cast(schema))  # type: ignore[return-value]

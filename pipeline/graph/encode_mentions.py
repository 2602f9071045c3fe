"""Every entity and relation mention as integer codes, the first step of the merge
(pipeline.graph.merge): sorted vocabularies of the mentions' strings (units, merge keys,
display forms, types), each mention a row of codes into them, symmetric relations' ends in
key order, self-loops dropped, and relation endpoints no entity row names added as
entities. Why codes: the merge then groups and joins integers, never strings, so 10M
mentions fit in memory and take seconds (pipeline.graph.encode_strings).
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from pipeline.graph.descriptions import TextOf, evidence_codes
from pipeline.graph.encode_strings import codes_in, decode, sorted_vocab
from pipeline.graph.titles import key_map

# Relation types whose direction carries no meaning: merged as unordered pairs.
SYMMETRIC_TYPES = frozenset({"RELATED_TO", "SPOUSE", "SIBLING", "RELATIVE", "ALTERNATIVE_NAME"})
FALLBACK_TYPE = "CONCEPT"  # for relation endpoints no entity row mentions
# An optional column of entity mentions: how many keys, over the whole corpus, the mention's
# sentence is evidence of (the merge counts it over its own mentions when it is absent).
CENTRALITY = "centrality"


class Vocabularies(NamedTuple):
    """Sorted distinct strings of the mentions; a code is an index in one (codes sort as the
    strings do)."""

    units: pl.Series
    keys: pl.Series
    displays: pl.Series
    etypes: pl.Series
    rtypes: pl.Series


def _col(df: pl.DataFrame, name: str, fill: str | None = None) -> pl.Series:
    s = df.get_column(name)  # Utf8, or Categorical (read_mentions): kept as it is
    s = s if isinstance(s.dtype, pl.Categorical) else s.cast(pl.Utf8)
    return s if fill is None else s.fill_null(fill)


def mention_codes(
    xe: pl.DataFrame, xr: pl.DataFrame
) -> tuple[Vocabularies, pl.DataFrame, pl.DataFrame, TextOf]:
    """(vocabularies, ee, er, text_of): every mention as integer codes. ee: entity mentions
    (u, k, disp, t, d), plus the relation endpoints no entity row names; er: relation
    mentions (u, sk, tk, t, d, w) without self-loops, a symmetric type's ends in key order;
    text_of: the evidence sentences of codes d (see `evidence_codes`). With a CENTRALITY
    column in `xe`, ee has it as c."""
    # ---- vocabularies: sorted distinct strings; a code is an index in one
    units = sorted_vocab(_col(xe, "text_unit_id"), _col(xr, "text_unit_id"))
    km = key_map(sorted_vocab(_col(xe, "title"), _col(xr, "source"), _col(xr, "target")))
    keys = sorted_vocab(km.get_column("key").filter(km.get_column("key") != ""))
    displays = sorted_vocab(km.get_column("display"))
    surf_key = codes_in(km.get_column("key"), keys)  # null for a key-less surface ("...")
    surf_disp = codes_in(km.get_column("display"), displays)
    surfaces = km.get_column("surface")
    del km
    etypes = sorted_vocab(_col(xe, "type", FALLBACK_TYPE), pl.Series([FALLBACK_TYPE]))
    rtypes = sorted_vocab(_col(xr, "type", "RELATED_TO"))
    fallback = etypes.index_of(FALLBACK_TYPE)

    (ed, rd), text_of = evidence_codes(_col(xe, "description"), _col(xr, "description"))
    # ---- mentions as codes: (u)nit, (k)ey, (disp)lay, (t)ype, (d)escription
    sc = codes_in(_col(xe, "title"), surfaces)
    ee = pl.DataFrame(
        {
            "u": codes_in(_col(xe, "text_unit_id"), units),
            "k": surf_key.gather(sc),
            "disp": surf_disp.gather(sc),
            "t": codes_in(_col(xe, "type", FALLBACK_TYPE), etypes),
            "d": ed,
        }
    )
    if CENTRALITY in xe.columns:  # given per mention: a merge of a part of the corpus
        ee = ee.with_columns(c=xe.get_column(CENTRALITY).cast(pl.UInt32))
    ee = ee.filter(pl.col("k").is_not_null())
    ssc, tsc = codes_in(_col(xr, "source"), surfaces), codes_in(_col(xr, "target"), surfaces)
    er = pl.DataFrame(
        {
            "u": codes_in(_col(xr, "text_unit_id"), units),
            "sc": ssc,
            "tc": tsc,
            "sk": surf_key.gather(ssc),
            "tk": surf_key.gather(tsc),
            "t": codes_in(_col(xr, "type", "RELATED_TO"), rtypes),
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
                    disp=decode(surf_disp, "sc"),
                    t=pl.lit(fallback, dtype=pl.UInt32),
                    d=pl.lit(None, dtype=pl.UInt32),
                    **({"c": pl.lit(None, dtype=pl.UInt32)} if "c" in ee.columns else {}),
                ),
            ]
        )
    del endpoints
    er = er.drop("sc", "tc")
    return Vocabularies(units, keys, displays, etypes, rtypes), ee, er, text_of

"""Extractive community reports in GraphRAG's community-report shape (offline mode).

Every report is built from evidence that already exists in the index, so it needs no model:

- title: the two or three most central members (weighted degree inside the community).
- summary: 2-3 sentences, chosen greedily from a pool of sentences (text units, relationship
  and entity descriptions) by how many community members they mention, so that together they
  cover as many members as possible.
- rating: 0-10, a deterministic importance score from size, total internal relationship weight
  and number of text units, normalised over all communities (see `_ratings`).
- findings: one per key member (its type, strongest neighbours, its evidence sentence), then the
  strongest relationships, each with GraphRAG-style references to human_readable_ids:
  "[Data: Entities (12, 7); Relationships (40); Sources (3)]".

Gathering (membership, internal edges, sentence mentions, rankings) is vectorised in polars;
only the final per-community assembly of strings is a Python loop, linear in the number of
communities. Parent communities are summarised from their members exactly like leaves; a
bottom-up summary of child reports is for LLM mode.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline import progress
from pipeline.config import ReportSettings
from pipeline.ids import stable_id
from pipeline.schemas import TABLES, empty
from pipeline.sentences import sentences_expr, split_sentences
from pipeline.tokens import truncate_tokens

# The columns of each input table the extractive and the LLM reports read (communities: all):
# the asset loads only these (resources.parquet_io); tests/test_stage_inputs.py checks it.
INPUT_COLUMNS = {
    "entities": ["id", "title", "type", "description", "aliases", "degree"],
    "relationships": [
        "id",
        "human_readable_id",
        "source",
        "target",
        "source_id",
        "target_id",
        "type",
        "description",
        "weight",
    ],
    "text_units": ["id", "text", "entity_ids"],
}

_SUMMARY_SENTENCES = 3
_CANDIDATES_PER_COMMUNITY = 12
_MAX_SENTENCE_CHARS = 320
_MAX_EVIDENCE_CHARS = 240
_MAX_REFS = 5


def _norm(expr: pl.Expr) -> pl.Expr:
    """Lower-cased words separated by single spaces and padded, for whole-word `contains`."""
    words = expr.str.to_lowercase().str.replace_all(r"[^\p{L}\p{N}]+", " ").str.strip_chars()
    return pl.lit(" ") + words + pl.lit(" ")


def _sentences(frame: pl.DataFrame, text_col: str) -> pl.DataFrame:
    """Explode `text_col` into one row per sentence (`sentence`), keeping the other columns."""
    return (
        frame.with_columns(sentences_expr(pl.col(text_col)).alias("sentence"))
        .drop(text_col)
        .explode("sentence")
        .filter(pl.col("sentence").str.len_chars() >= 15)
    )


def _clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


def _evidence(texts: list[str], limit: int) -> str:
    """Quoted evidence within `limit` characters: the texts' sentences taken in turns (first of
    each, then second of each...), without repeats; the first one is clipped if too long."""
    split = [split_sentences(t) for t in texts if t]
    turns = [
        s for i in range(max(map(len, split), default=0)) for ss in split for s in ss[i : i + 1]
    ]
    out: list[str] = []
    seen: set[str] = set()
    used = 0
    for sentence in turns:
        key = sentence.casefold()
        if key in seen or (out and used + len(sentence) + 1 > limit):
            continue
        seen.add(key)
        out.append(sentence if out else _clip(sentence, limit))
        used += len(out[-1]) + 1
    return " ".join(out)


def _refs(kind: str, ids: list[int]) -> str:
    uniq = sorted(dict.fromkeys(int(i) for i in ids if i is not None))
    shown = ", ".join(str(i) for i in uniq[:_MAX_REFS])
    return f"{kind} ({shown}{', +more' if len(uniq) > _MAX_REFS else ''})"


def _data_refs(entities: list[int], relationships: list[int], sources: list[int]) -> str:
    parts = [
        _refs(kind, ids)
        for kind, ids in (
            ("Entities", entities),
            ("Relationships", relationships),
            ("Sources", sources),
        )
        if ids
    ]
    return f"[Data: {'; '.join(parts)}]" if parts else ""


def _join_titles(titles: list[str]) -> str:
    if len(titles) <= 1:
        return "".join(titles)
    return ", ".join(titles[:-1]) + " and " + titles[-1]


def _hrid(frame: pl.DataFrame) -> pl.Expr:
    """human_readable_id, or the row number where a frame has none."""
    if "human_readable_id" in frame.columns:
        return pl.col("human_readable_id").cast(pl.Int64)
    return pl.int_range(pl.len(), dtype=pl.Int64)


def _gather(
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: ReportSettings,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Everything the text assembly needs: one row per community (stats, rating), and flat
    frames of its top members, strongest relationships and candidate sentences, best first."""
    ents = entities.select(
        pl.col("id").alias("entity_id"),
        _hrid(entities).alias("e_hrid"),
        pl.col("title").cast(pl.Utf8).fill_null(""),
        pl.col("type").cast(pl.Utf8).fill_null(""),
        pl.col("description").cast(pl.Utf8).fill_null(""),
        (pl.col("degree") if "degree" in entities.columns else pl.lit(0))
        .cast(pl.Int64)
        .fill_null(0)
        .alias("g_degree"),
        (pl.col("aliases") if "aliases" in entities.columns else pl.lit([], pl.List(pl.Utf8)))
        .cast(pl.List(pl.Utf8))
        .fill_null([])
        .alias("aliases"),
    )
    # The per-community frames (a row per member, per internal edge and direction) carry
    # integers only: a title is sorted by its rank (`trank`, the same order), and the strings
    # (titles, descriptions) join the few rows a report shows. With strings, every level's
    # copy of every relationship held its description (+1.5 GB at 40k documents).
    ents = ents.with_columns(pl.col("title").rank("dense").alias("trank"))
    members = (
        communities.select("community", pl.col("entity_ids").alias("entity_id"))
        .explode("entity_id")
        .drop_nulls("entity_id")
        .join(ents.select("entity_id", "e_hrid", "g_degree", "trank"), on="entity_id")
    )
    rels = relationships.select(
        pl.col("id").alias("rel_id"),
        _hrid(relationships).alias("r_hrid"),
        "source_id",
        "target_id",
        (pl.col("type") if "type" in relationships.columns else pl.lit(""))
        .cast(pl.Utf8)
        .fill_null("")
        .alias("r_type"),
        pl.col("description").cast(pl.Utf8).fill_null("").alias("r_desc"),
        pl.col("weight").cast(pl.Float64).fill_null(1.0).alias("weight"),
    )
    ends_of = ents.select("entity_id", "e_hrid", "trank")
    edges = (
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
    members = (
        members.join(per_member, on=["community", "entity_id"], how="left")
        .with_columns(pl.col("w_degree").fill_null(0.0))
        .sort(
            ["community", "w_degree", "g_degree", "trank", "entity_id"],
            descending=[False, True, True, False, False],
        )
        .with_columns(pl.int_range(pl.len()).over("community").alias("rank"))
    )

    mentions, pool, codes = _mentions(members, edges, rels, text_units, ents, communities)
    # each community's candidate sentences, for a batch of communities at a time (a
    # community's pairs of member x mention are all in one batch: exact, and the group-by
    # over them peaked at +1.2 GB at 40k documents when done at once)
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
    batch = (
        scored.group_by("community")
        .len()
        .sort("community")
        .select("community", (pl.col("len").cum_sum() // CANDIDATE_BATCH_MEMBERS).alias("b"))
    )
    scored = scored.join(batch, on="community")
    cand = pl.concat(
        [
            _candidates(mentions, scored.filter(pl.col("b") == b).drop("b"), pool)
            for b in batch["b"].unique().sort().to_list()
        ]
        or [_candidates(mentions, scored.drop("b"), pool)]
    )

    title_of = ents.select("trank", "title").unique("trank")
    neighbours = (
        members.filter(pl.col("rank") < max(settings.max_findings, 3))
        .select("community", "entity_id", pl.col("neighbours").alias("trank"))
        .explode("trank")
        .join(title_of, on="trank", how="left", maintain_order="left")
        .group_by("community", "entity_id", maintain_order=True)
        .agg(pl.col("title").drop_nulls().alias("neighbours"))
    )
    top_members = (
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
    top_rels = (
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
    stats = edges.group_by("community").agg(
        pl.len().alias("n_rels"), pl.col("weight").sum().alias("total_weight")
    )
    head = (
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
    return head, top_members, top_rels, cand


# Community members scored against all mentions at once, at most (whole communities).
CANDIDATE_BATCH_MEMBERS = 50_000


def _candidates(mentions: pl.DataFrame, scored: pl.DataFrame, pool: pl.DataFrame) -> pl.DataFrame:
    """The best `_CANDIDATES_PER_COMMUNITY` sentences of each community in `scored`
    (community, e, rank, mw): those naming the most member weight, long ones discounted."""
    return (
        mentions.join(scored, on="e", how="inner")
        .sort("community", "sid", "rank")
        .group_by(["community", "sid"])
        .agg(
            pl.col("mw").sum().alias("n_mentioned"),
            pl.col("rank").first().alias("best_rank"),
            pl.col("rank").alias("ranks"),
            pl.col("mw").alias("weights"),
        )
        .join(pool.select("sid", "length"), on="sid")
        .with_columns(
            # a sentence longer than the clip limit loses part of its evidence: discount it
            (
                _MAX_SENTENCE_CHARS
                / pl.max_horizontal(pl.col("length"), pl.lit(_MAX_SENTENCE_CHARS))
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
        .join(pool.select("sid", "sentence"), on="sid", how="left", maintain_order="left")
        .select("community", "sentence", "ranks", "weights", "factor")
    )


def _by_community(frame: pl.DataFrame) -> dict[int, list[dict[str, Any]]]:
    """Rows of a flat frame (already in the wanted order) grouped by community.

    Flat columns convert to Python several times faster than nested lists of structs.
    """
    cols = {c: frame[c].to_list() for c in frame.columns}
    names = [c for c in frame.columns if c != "community"]
    out: dict[int, list[dict[str, Any]]] = {}
    for i, comm in enumerate(cols["community"]):
        out.setdefault(comm, []).append({n: cols[n][i] for n in names})
    return out


def _mentions(
    members: pl.DataFrame,
    edges: pl.DataFrame,
    rels: pl.DataFrame,
    text_units: pl.DataFrame,
    ents: pl.DataFrame,
    communities: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(mentions: sid, e; pool: sid, sentence, length; codes: e, entity_id): which
    entities each evidence sentence names (as integer codes `e`), and the sentences.

    Candidate entities per sentence come from its origin (a text unit's entity_ids, a
    relationship's endpoints, an entity and its neighbours), and a candidate counts when its
    title or an alias occurs in the sentence as whole words (case-insensitive). Candidates
    stay with their origin (one list per text unit, not per sentence) and are paired with
    the sentences as integers, a slice of sentences at a time: at 40k documents the pairs
    are tens of millions, and each pair once held its sentence's text and candidate list.
    """
    used_units = communities.select(pl.col("text_unit_ids").alias("unit_id")).explode("unit_id")
    units = text_units.select(
        pl.col("id").alias("unit_id"), _hrid(text_units).alias("ref"), "text", "entity_ids"
    ).join(used_units.unique(), on="unit_id", how="semi")
    unit_src = units.select(
        pl.lit("Sources").alias("kind"), "ref", "text", pl.col("entity_ids").alias("cands")
    )
    member_ids = members.select("entity_id").unique()
    used_rels = rels.join(edges.select("rel_id").unique(), on="rel_id", how="semi")
    rel_src = used_rels.select(
        pl.lit("Relationships").alias("kind"),
        pl.col("r_hrid").alias("ref"),
        pl.col("r_desc").alias("text"),
        pl.concat_list("source_id", "target_id").alias("cands"),
    )
    nbrs = pl.concat(
        [
            used_rels.select(
                pl.col("source_id").alias("entity_id"), pl.col("target_id").alias("n")
            ),
            used_rels.select(
                pl.col("target_id").alias("entity_id"), pl.col("source_id").alias("n")
            ),
        ]
    )
    ent_src = (
        ents.join(member_ids, on="entity_id", how="semi")
        .select("entity_id", "e_hrid", "description")
        .join(
            nbrs.group_by("entity_id").agg(pl.col("n").unique().sort()), on="entity_id", how="left"
        )
        .select(
            pl.lit("Entities").alias("kind"),
            pl.col("e_hrid").alias("ref"),
            pl.col("description").alias("text"),
            pl.concat_list(pl.col("entity_id"), pl.col("n").fill_null([])).alias("cands"),
        )
    )
    sources = pl.concat([ent_src, rel_src, unit_src]).with_row_index("src")
    # split a slice of the sources at a time: each step of the split copies every text
    texts = sources.select("src", "kind", "ref", "text").iter_slices(_SOURCES_PER_SLICE)
    pool = (
        pl.concat([_sentences(part, "text") for part in texts])
        .sort("kind", "ref", "sentence")  # sid must not depend on the input row order
        .with_columns(pl.col("sentence").str.len_chars().alias("length"))
        .with_row_index("sid")
        .select("sid", "src", "sentence", "length")
    )
    forms = ents.select("entity_id", pl.concat_list("title", "aliases").alias("form"))
    surface = (
        forms.explode("form")
        .drop_nulls("form")
        .with_columns(_norm(pl.col("form")).alias("nform"))
        .filter(pl.col("nform").str.len_chars() >= 4)  # " x " and blanks match everything
        .select("entity_id", "nform")
        .unique()
        .with_columns(pl.col("entity_id").rank("dense").alias("e"))
    )
    ids = surface.select("e", "entity_id").unique()
    cands = (
        sources.select("src", pl.col("cands").alias("entity_id"))
        .explode("entity_id")
        .join(ids, on="entity_id", how="inner")
        .select("src", "e")
    )
    nforms = surface.select("e", "nform")
    hits = []
    for at in range(0, pool.height, _SENTENCES_PER_SLICE):
        part = pool.slice(at, _SENTENCES_PER_SLICE)
        hits.append(
            part.select("sid", "src", _norm(pl.col("sentence")).alias("norm"))
            .join(cands, on="src")
            .join(nforms, on="e")
            .filter(pl.col("norm").str.contains(pl.col("nform"), literal=True))
            .select("sid", "e")
            .unique()
        )
    found = pl.concat(hits) if hits else pl.DataFrame(schema={"sid": pl.UInt32, "e": pl.UInt32})
    return found, pool.select("sid", "sentence", "length"), ids


_SENTENCES_PER_SLICE = 20_000
_SOURCES_PER_SLICE = 50_000


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


def _summary(row: dict[str, Any]) -> str:
    """2-3 pool sentences covering the most members; falls back to a member listing."""
    pool = [
        (dict(zip(s["ranks"], s["weights"], strict=True)), s["factor"], s["sentence"])
        for s in row["sentences"] or []
    ]
    chosen: list[str] = []
    covered: set[int] = set()
    seen: set[str] = set()

    def gain(i: int) -> float:
        mentioned, factor, _ = pool[i]
        return factor * sum(w for r, w in mentioned.items() if r not in covered)

    while pool and len(chosen) < _SUMMARY_SENTENCES:
        # most newly covered member weight (discounted for overlong sentences); candidates
        # arrive best-first, so max() keeps the earliest among equals
        best = max(range(len(pool)), key=gain)
        mentioned, _, sentence = pool.pop(best)
        ranks = set(mentioned)
        key = " ".join(sentence.casefold().split())
        if key in seen:
            continue
        if not ranks - covered and len(chosen) >= 2:
            break
        seen.add(key)
        covered |= ranks
        chosen.append(_clip(sentence, _MAX_SENTENCE_CHARS))
    if chosen:
        return " ".join(chosen)
    members = row["members"] or []
    listing = _join_titles(
        [f"{m['title']} ({m['type']})" if m["type"] else m["title"] for m in members]
    )
    return f"A community of {row['size']} entities, most central {listing}."


def _findings(row: dict[str, Any], max_findings: int) -> list[dict[str, str]]:
    members = row["members"] or []
    rels = row["rels"] or []
    # key members first; keep one slot for the strongest relationship when there is room
    n_members = min(len(members), max_findings - (1 if rels and max_findings > 1 else 0))
    out: list[dict[str, str]] = []
    for m in members[:n_members]:
        head = f"{m['title']} — {m['type']}" if m["type"] else m["title"]
        if m["neighbours"]:
            head += ", linked to " + ", ".join(m["neighbours"])
        text = _evidence([m["description"], m["m_rel_desc"] or ""], _MAX_EVIDENCE_CHARS)
        refs = _data_refs([m["e_hrid"], *(m["n_hrids"] or [])], m["m_rel_hrids"] or [], [])
        out.append({"summary": head, "explanation": f"{text} {refs}".strip()})
    # strongest relationships not already quoted as a member's evidence
    quoted = {m["m_rel_hrids"][0] for m in members[:n_members] if m["m_rel_hrids"]}
    for r in [r for r in rels if r["r_hrid"] not in quoted][: max_findings - len(out)]:
        head = f"{r['s_title']} — {r['t_title']}" + (f" ({r['r_type']})" if r["r_type"] else "")
        desc = _evidence([r["r_desc"]], _MAX_EVIDENCE_CHARS) or (
            f"{r['s_title']} is related to {r['t_title']}."
        )
        refs = _data_refs([r["s_hrid"], r["t_hrid"]], [r["r_hrid"]], [])
        out.append({"summary": head, "explanation": f"{desc} {refs}"})
    return out


def _markdown(title: str, summary: str, findings: list[dict[str, str]]) -> str:
    parts = [f"# {title}", summary]
    for f in findings:
        parts += [f"## {f['summary']}", f["explanation"]]
    return "\n\n".join(parts) + "\n"


def build_reports(
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: ReportSettings,
) -> pl.DataFrame:
    """community_reports frame with exactly schemas.COMMUNITY_REPORTS columns; one per community."""
    if communities.is_empty():
        return empty("community_reports")
    head, top_members, top_rels, cand = _gather(
        communities, entities, relationships, text_units, settings
    )
    # reports are assembled as Python strings ASSEMBLE_BATCH communities at a time, each
    # batch converted to Arrow at once: all of them as Python objects took +1 GB at 40k
    tables = []
    n = head.height
    starts = range(0, n, ASSEMBLE_BATCH)
    for at in progress.iterate("reports", starts, n, lambda at: min(ASSEMBLE_BATCH, n - at)):
        part = head.slice(at, ASSEMBLE_BATCH)
        ids = part.select("community")
        frames = [f.join(ids, on="community", how="semi") for f in (top_members, top_rels, cand)]
        tables.append(_report_table(part, *frames, settings))
    return pl.from_arrow(pa.concat_tables(tables))  # type: ignore[return-value]


ASSEMBLE_BATCH = 2_000


def _report_table(
    head: pl.DataFrame,
    top_members: pl.DataFrame,
    top_rels: pl.DataFrame,
    cand: pl.DataFrame,
    settings: ReportSettings,
) -> pa.Table:
    """The reports of the communities in `head`, as Arrow in the table's schema."""
    members_of = _by_community(top_members)
    rels_of = _by_community(top_rels)
    sentences_of = _by_community(cand)
    rows: list[dict[str, Any]] = []
    for row in head.iter_rows(named=True):
        comm = row["community"]
        row["members"] = members = members_of.get(comm, [])
        row["rels"] = rels_of.get(comm, [])
        row["sentences"] = sentences_of.get(comm, [])
        title = _join_titles([m["title"] for m in members[:3]]) or f"Community {row['community']}"
        summary = _summary(row)
        rating = float(row["rating"])
        explanation = (
            f"{rating:.1f}: {row['size']} entities, {row['n_rels']} relations "
            f"(total weight {row['total_weight']:g}) over {row['n_units']} text units; "
            f"top {row['weight_top_pct']}% by weight"
        )
        findings = _findings(row, settings.max_findings)
        content = _markdown(title, summary, findings)
        if len(content) > settings.max_report_tokens:  # a token spans >= 1 character
            content = truncate_tokens(content, settings.max_report_tokens)
        doc = {
            "title": title,
            "summary": summary,
            "rating": rating,
            "rating_explanation": explanation,
            "findings": findings,
        }
        rows.append(
            {
                "id": stable_id("report", row["id"]),
                "human_readable_id": row["community"],
                "community": row["community"],
                "level": row["level"],
                "parent": row["parent"],
                "children": row["children"],
                "title": title,
                "summary": summary,
                "rating": rating,
                "rank": rating,  # GraphRAG's name
                "rating_explanation": explanation,
                "findings": findings,
                "full_content": content,
                "full_content_json": json.dumps(doc, sort_keys=True, ensure_ascii=False),
                "size": row["size"],
                "period": row["period"],
            }
        )
    schema = TABLES["community_reports"]
    table = pl.DataFrame(
        rows,
        schema_overrides={
            "findings": pl.List(pl.Struct({"summary": pl.Utf8, "explanation": pl.Utf8}))
        },
    ).to_arrow()
    return table.select(schema.names).cast(schema)

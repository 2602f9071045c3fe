"""Extractive community reports in GraphRAG's community-report shape (offline mode).

Every report is built from evidence that already exists in the index, so it needs no model:

- title: the two or three most central members (weighted degree inside the community).
- summary: 2-3 sentences, chosen greedily from a pool of sentences (text units, relationship
  and entity descriptions) by how many community members they mention, so that together they
  cover as many members as possible.
- rating: 0-10, a deterministic importance score from size, total internal relationship weight
  and number of text units, normalised over all communities (see `gather_frames`).
- findings: one per key member (its type, strongest neighbours, its evidence sentence), then the
  strongest relationships, each with GraphRAG-style references to human_readable_ids:
  "[Data: Entities (12, 7); Relationships (40); Sources (3)]".

Gathering (membership, internal edges, rankings: `gather_frames`; sentence mentions and
candidates: `find_evidence`) is vectorised in polars; only the final per-community assembly
of strings (`compose_text`, rows here) is a Python loop, linear in the number of communities.
Parent communities are summarised from their members exactly like leaves; a bottom-up summary
of child reports is for LLM mode. On a re-run the text of a report whose inputs did not change
is kept (`reuse_unchanged`), and only the others are gathered and assembled.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import polars as pl
import pyarrow as pa

from pipeline import progress
from pipeline.communities.reports.carry_digests import digests_of
from pipeline.communities.reports.compose_text import (
    findings_of,
    join_titles,
    report_markdown,
    summary_of,
)
from pipeline.communities.reports.evidence_cache import carried
from pipeline.communities.reports.gather_frames import community_head, gather
from pipeline.communities.reports.reuse_unchanged import CONTENT_COLUMNS, kept_reports
from pipeline.config import ReportSettings
from pipeline.ids import stable_id_expr
from pipeline.schemas import TABLES, conform, empty
from pipeline.tokens import truncate_tokens

# The columns of each input table the extractive and the LLM reports read (communities: all):
# the asset loads only these (resources.parquet_io); tests/test_stage_inputs.py checks it.
INPUT_COLUMNS = {
    "entities": ["id", "human_readable_id", "title", "type", "description", "aliases", "degree"],
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


def build_reports(
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: ReportSettings,
) -> pl.DataFrame:
    """community_reports frame with exactly schemas.COMMUNITY_REPORTS columns; one per community."""
    return report_table(communities, entities, relationships, text_units, settings).reports


class ReportTable(NamedTuple):
    reports: pl.DataFrame
    digests: pl.DataFrame | None  # id, digest: what the sidecar records
    kept: int  # reports kept from the last run
    evidence: pl.DataFrame | None = None  # the evidence cache to write (evidence_cache)
    rows: pl.DataFrame | None = None  # the input rows' hashes to write (carry_digests)
    digests_carried: int = 0  # digests carried over from the last run (carry_digests)
    sources_split: int = 0  # evidence sources split and matched (the others: evidence_cache)
    sources_kept: int = 0  # evidence sources whose mentions came from the last run


# The head's columns only the rating and its explanation show.
RATING_COLUMNS = ["rating", "raw", "weight_top_pct", "n_rels", "total_weight", "n_units"]


def report_table(
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: ReportSettings,
    previous: pl.DataFrame | None = None,
    sidecar: pl.DataFrame | None = None,
    evidence: pl.DataFrame | None = None,
    last_rows: pl.DataFrame | None = None,
    listed: dict[str, pl.Series] | None = None,
) -> ReportTable:
    """`build_reports` with the digests of the reports' inputs, keeping the last run's text
    of every report whose inputs did not change (`previous`, the last table, and `sidecar`,
    its digests: pipeline.communities.reports.reuse_unchanged); ratings and numbers are today's.
    `evidence`: the last run's sentence mentions per source (evidence_cache), used for the
    sources whose text and candidates did not change. `last_rows`: the last run's input rows'
    hashes (carry_digests), to carry the digests of communities none of whose rows changed;
    `listed`: the rows that may differ from those (pipeline.storage.changed_rows)."""
    if communities.is_empty():
        return ReportTable(empty("community_reports"), None, 0)
    head = community_head(communities, entities, relationships)
    head = head.with_columns(stable_id_expr(pl.lit("report"), "id").alias("report_id"))
    used = [_used(f, n) for f, n in ((entities, "entities"), (relationships, "relationships"))]
    digests, input_rows, carried_digests = digests_of(
        communities, *used, _used(text_units, "text_units"), settings, sidecar, last_rows, listed
    )
    kept = kept_reports(previous, sidecar, digests)
    todo = head if kept is None else head.join(kept, left_on="report_id", right_on="id", how="anti")
    found, split = None, 0
    if todo.height:  # only the communities whose reports are assembled are gathered
        some = communities.join(todo.select("community"), on="community", how="semi")
        everyone = None if kept is None else communities
        gathered, found, split = gather(
            some, entities, relationships, text_units, settings, everyone, evidence
        )
    # reports are assembled as Python strings ASSEMBLE_BATCH communities at a time, each
    # batch converted to Arrow at once: all of them as Python objects took +1 GB at 40k
    texts = [] if kept is None else [kept]
    n = todo.height
    starts = range(0, n, ASSEMBLE_BATCH)
    for at in progress.iterate("reports", starts, n, lambda at: min(ASSEMBLE_BATCH, n - at)):
        part = todo.slice(at, ASSEMBLE_BATCH)
        ids = part.select("community")
        frames = [f.join(ids, on="community", how="semi") for f in gathered]
        texts.append(_report_texts(part, *frames, settings))
    # in the order a full build writes (the communities'), kept rows or not
    rated = head.select(
        pl.col("report_id").alias("id"), "community", "level", "parent", "children", *RATING_COLUMNS
    ).join(pl.concat(texts), on="id", maintain_order="left")
    batches = range(0, rated.height, ASSEMBLE_BATCH)
    json_of = _kept_json(previous, kept)
    reports = pl.concat([_rated(rated.slice(at, ASSEMBLE_BATCH), json_of) for at in batches])
    cache = carried(evidence, found, _source_keys(entities, relationships, text_units))
    n_kept = 0 if kept is None else kept.height
    kept_sources = 0 if found is None else found.height - split
    return ReportTable(
        reports, digests, n_kept, cache, input_rows, carried_digests, split, kept_sources
    )


ASSEMBLE_BATCH = 2_000


def _source_keys(*frames: pl.DataFrame) -> pl.DataFrame:
    """(kind, key): every source the evidence cache may hold a row of."""
    kinds = ("Entities", "Relationships", "Sources")
    return pl.concat(
        [
            f.select(pl.lit(k).alias("kind"), pl.col("id").alias("key"))
            for k, f in zip(kinds, frames, strict=True)
        ]
    )


def _used(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    """The columns of `frame` that reports read (a unit's reference number is its
    human_readable_id, else its row): what their digests cover."""
    names = [*INPUT_COLUMNS[name], "human_readable_id"]
    return frame.select([c for c in dict.fromkeys(names) if c in frame.columns])


def _report_texts(
    head: pl.DataFrame,
    top_members: pl.DataFrame,
    top_rels: pl.DataFrame,
    cand: pl.DataFrame,
    settings: ReportSettings,
) -> pl.DataFrame:
    """The content columns (reuse_unchanged.CONTENT_COLUMNS) of the communities in `head`."""
    members_of = _by_community(top_members)
    rels_of = _by_community(top_rels)
    sentences_of = _by_community(cand)
    rows: list[dict[str, Any]] = []
    for row in head.iter_rows(named=True):
        comm = row["community"]
        row["members"] = members = members_of.get(comm, [])
        row["rels"] = rels_of.get(comm, [])
        row["sentences"] = sentences_of.get(comm, [])
        title = join_titles([m["title"] for m in members[:3]]) or f"Community {row['community']}"
        summary = summary_of(row)
        findings = findings_of(row, settings.max_findings)
        content = report_markdown(title, summary, findings)
        if len(content) > settings.max_report_tokens:  # a token spans >= 1 character
            content = truncate_tokens(content, settings.max_report_tokens)
        rows.append(
            {
                "id": row["report_id"],
                "title": title,
                "summary": summary,
                "findings": findings,
                "full_content": content,
                "size": row["size"],
                "period": row["period"],
            }
        )
    schema = TABLES["community_reports"]
    return pl.from_arrow(  # type: ignore[return-value]
        pl.DataFrame(rows, schema_overrides={"findings": _FINDINGS})
        .to_arrow()
        .select(CONTENT_COLUMNS)
        .cast(pa.schema([schema.field(c) for c in CONTENT_COLUMNS]))
    )


_FINDINGS = pl.List(pl.Struct({"summary": pl.Utf8, "explanation": pl.Utf8}))


def _kept_json(previous: pl.DataFrame | None, kept: pl.DataFrame | None) -> pl.DataFrame | None:
    """(id, rating, rating_explanation, full_content_json) of the last run's reports whose
    texts are kept: their JSON holds again where the rating and its explanation do."""
    if previous is None or kept is None or "full_content_json" not in previous.columns:
        return None
    return previous.join(kept.select("id"), on="id", how="semi").select(
        "id", pl.col("rating").cast(pl.Float64), "rating_explanation", "full_content_json"
    )


def _rated(frame: pl.DataFrame, json_of: pl.DataFrame | None = None) -> pl.DataFrame:
    """Reports in the table's schema: their texts with today's rating, its explanation and
    the JSON of the whole (`json_of`'s where a kept report's rating and explanation are the
    same: dumping every report's JSON took ~0.4 s of an edit at 40k documents)."""
    explanations = [
        f"{rating:.1f}: {size} entities, {n_rels} relations (total weight {weight:g}) over "
        f"{n_units} text units; top {top}% by weight"
        for rating, size, n_rels, weight, n_units, top in frame.select(
            "rating", "size", "n_rels", "total_weight", "n_units", "weight_top_pct"
        ).iter_rows()
    ]
    out = frame.with_columns(
        pl.col("community").alias("human_readable_id"),
        pl.col("rating").cast(pl.Float64),
        pl.col("rating").cast(pl.Float64).alias("rank"),  # GraphRAG's name
        pl.Series("rating_explanation", explanations, dtype=pl.Utf8),
    )
    out = out.with_columns(_json_docs(out, json_of))
    return pl.from_arrow(conform(out, "community_reports"))  # type: ignore[return-value]


def _json_docs(frame: pl.DataFrame, json_of: pl.DataFrame | None) -> pl.Series:
    """`full_content_json` of rated reports: `json_of`'s where it matches, else dumped."""
    match = ["id", "rating", "rating_explanation"]
    docs = pl.Series("full_content_json", [None] * frame.height, dtype=pl.Utf8)
    if json_of is not None:
        found = frame.select(match).join(json_of, on=match, how="left", maintain_order="left")
        docs = found["full_content_json"]
    todo = docs.is_null()
    fresh = [
        json.dumps(
            {
                "title": title,
                "summary": summary,
                "rating": rating,
                "rating_explanation": explanation,
                "findings": findings,
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        for title, summary, rating, findings, explanation in frame.filter(todo)
        .select("title", "summary", "rating", "findings", "rating_explanation")
        .iter_rows()
    ]
    return docs.scatter(todo.arg_true(), pl.Series(fresh, dtype=pl.Utf8)) if fresh else docs


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

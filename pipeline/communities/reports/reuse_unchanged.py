"""Extractive reports kept from the last run when nothing they are assembled from changed.

Why: after a small edit the Leiden hierarchy is carried over, so almost every community has
the same members, relationships and text units as before, yet gathering every community's
evidence (sentence mentions, rankings) and assembling its report's strings were most of the
stage's time on an edit at 10k documents. A report's text is a pure function of its
community's rows in the inputs (its entities, relationships with their ends, text units in
their order) and of the report settings, so a digest of those rows (keyed by the report id,
which the community's content decides, not its number) says when the last run's text can be
kept, and only the other communities are gathered; the rating and the community's number,
level, parent and children are always today's.

The digests live in a sidecar beside the table (`DIGESTS`), with a hash of each report row
they were written with: a row is kept only when the table still holds exactly that row
(an LLM run's reports, or a table the run never wrote after writing the sidecar, do not
match) and its digest is today's. Hashes are polars' (stable within one polars version,
which the sidecar records).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.communities.reports.find_evidence import hrid, unit_views
from pipeline.config import ReportSettings
from pipeline.ids import stable_id_expr
from pipeline.storage.files import atomic_write_with

DIGESTS = "community_reports_digests.parquet"
_SEED = 20_231
# A report's columns that its inputs decide; the others are today's: the rating and what
# shows it (a new community anywhere moves every percentile) and the community's number,
# level, parent and children (a carried-over hierarchy may number communities anew).
CONTENT_COLUMNS = ["id", "title", "summary", "findings", "full_content", "size", "period"]


# The version of the report assembly a digest stands for: a change to what a report is
# assembled from bumps it, so that no report of the older code is kept as today's.
# 2: a community's candidate sentences are only those of its own rows (gather_frames).
ASSEMBLY = 2


def settings_salt(settings: ReportSettings) -> int:
    return hash_text(f"{ASSEMBLY}|{settings.max_findings}|{settings.max_report_tokens}")


def input_rows(
    entities: pl.DataFrame, relationships: pl.DataFrame, text_units: pl.DataFrame
) -> pl.DataFrame:
    """(kind, k, h, order): a hash of each input row a report reads (kind 0: entity, 1: a
    relationship with its two ends' rows, 2: a text unit's view; `order`: a unit's reference
    number). `entities` must hold those the units list."""
    ents = entities.select(pl.col("id").alias("k"), pl.struct(pl.all()).hash(_SEED + 1).alias("h"))
    rels = (
        relationships.select(
            pl.col("id").alias("k"),
            pl.struct(pl.all()).hash(_SEED + 2).alias("h"),
            "source_id",
            "target_id",
        )
        .join(ents.rename({"k": "source_id", "h": "hs"}), on="source_id", how="left")
        .join(ents.rename({"k": "target_id", "h": "ht"}), on="target_id", how="left")
        # a struct, not a list: hashing 490k three-item lists took 0.27 s at 40k, this 0.02
        .select("k", pl.struct("h", pl.col("hs").fill_null(0), pl.col("ht").fill_null(0)))
        .select("k", pl.col("h").hash(_SEED))
    )
    # a unit's reference number never shows in a report, only the order of the numbers
    # (it breaks ties between equal sentences): its units are hashed in that order, so an
    # edit that adds a unit before them (renumbering them all) keeps their reports; a
    # unit's hash is its view (what a report can read of it: its entities and its sentences
    # naming one), so an edit to its other sentences keeps them too (carry_digests)
    units = text_units.select(pl.col("id").alias("k"), hrid(text_units).alias("order")).join(
        unit_views(text_units, entities).select(k="id", h="view"), on="k", maintain_order="left"
    )
    return pl.concat(
        [
            f.select(pl.lit(kind, pl.UInt8).alias("kind"), "k", "h", pl.col("order").cast(pl.Int64))
            for kind, f in enumerate(
                (
                    ents.with_columns(pl.lit(None).alias("order")),
                    rels.with_columns(pl.lit(None).alias("order")),
                    units,
                )
            )
        ]
    )


def community_digests(
    communities: pl.DataFrame, rows: pl.DataFrame, settings: ReportSettings
) -> pl.DataFrame:
    """(community, id, digest, untitled) per report of `communities`, read off the stage's
    inputs (`rows`: `input_rows`) without gathering anything: a hash of its community (report
    id, size, period; its number too when no member is an entity, as the title then says
    "Community N"), of the row of each member entity and of each relationship with its two
    ends' rows (in the community's order), of each text unit (in the order of their reference
    numbers), and of the report settings. The rows hold only the columns the reports read
    (reports.INPUT_COLUMNS)."""
    salt = settings_salt(settings)
    out = communities.select(
        "community", stable_id_expr(pl.lit("report"), "id").alias("id"), "size", "period"
    )
    for k, column in enumerate(("entity_ids", "relationship_ids", "text_unit_ids")):
        kind = rows.filter(pl.col("kind") == k).select("k", "h", pl.col("order").fill_null(0))
        part = (
            communities.select("community", pl.col(column).alias("k"))
            .explode("k")
            .join(kind, on="k", how="left", maintain_order="left")
            .sort("community", "order", maintain_order=True)  # units: by number; others: as listed
            .group_by("community", maintain_order=True)
            .agg(pl.col("h").fill_null(0).alias(f"d{k}"), pl.col("h").count().alias("found"))
            .with_columns(pl.col(f"d{k}").hash(_SEED))  # the list, in its order
        )
        if k == 0:  # no member is an entity: the title is the community's number
            part = part.with_columns((pl.col("found") == 0).alias("untitled"))
        out = out.join(part.drop("found"), on="community", how="left")
    base = pl.struct(
        "id", "size", "period", pl.when(pl.col("untitled")).then(pl.col("community"))
    ).hash(_SEED)
    digest = pl.concat_list(base, "d0", "d1", "d2", pl.lit(salt, pl.UInt64))
    return out.select("community", "id", digest.hash(_SEED).alias("digest"), "untitled")


def hash_text(text: str) -> int:
    return int(pl.Series([text]).hash(_SEED)[0])


def row_hashes(reports: pl.DataFrame) -> pl.Series:
    """A hash of each report's content columns."""
    return reports.select(pl.struct(CONTENT_COLUMNS).hash(_SEED).alias("row_hash")).to_series()


def kept_reports(
    previous: pl.DataFrame | None, sidecar: pl.DataFrame | None, digests: pl.DataFrame
) -> pl.DataFrame | None:
    """The content columns of the last run's reports whose digest is today's and that are
    the rows the sidecar describes; None when there are none."""
    if previous is None or sidecar is None or previous.is_empty() or sidecar.is_empty():
        return None
    if not {"id", "digest", "row_hash", "polars"} <= set(sidecar.columns):
        return None  # not a sidecar this code wrote
    if sidecar["polars"][0] != pl.__version__:
        return None
    kept = (
        previous.with_columns(row_hashes(previous))
        .join(sidecar.select("id", "digest", "row_hash"), on=["id", "row_hash"])
        .join(digests, on=["id", "digest"], how="semi")
        .select(CONTENT_COLUMNS)
    )
    return kept if kept.height else None


def read_sidecar(folder: Path) -> pl.DataFrame | None:
    path = folder / DIGESTS
    try:
        return pl.read_parquet(path) if path.exists() else None
    except Exception:  # noqa: BLE001 - a damaged sidecar only costs the reuse
        return None


def write_sidecar(folder: Path, reports: pl.DataFrame, digests: pl.DataFrame | None) -> None:
    """The digests of `reports` (the table about to be written), atomically; no digests
    (an LLM run): the sidecar goes, so nothing of that table is taken for extractive."""
    path = folder / DIGESTS
    if digests is None:
        path.unlink(missing_ok=True)
        return
    frame = (
        reports.select("id")
        .with_columns(row_hashes(reports))
        .join(digests, on="id", how="left")
        .with_columns(pl.lit(pl.__version__).alias("polars"))
    )
    atomic_write_with(path, frame.write_parquet)

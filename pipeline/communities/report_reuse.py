"""Extractive reports kept from the last run when nothing they are assembled from changed.

Why: after a small edit the Leiden hierarchy is carried over, so almost every community has
the same members, relationships and candidate sentences as before, yet assembling every
report's strings is a Python loop over every community (most of the stage's time on an
edit at 10k documents). A report's text is a pure function of its community's rows in the
frames `report_frames.gather` builds and of the report settings, so a digest of those rows
(keyed by the report id, which the community's content decides, not its number) says when
the last run's text can be kept; the rating and the community's number, level, parent and
children are always today's.

The digests live in a sidecar beside the table (`DIGESTS`), with a hash of each report row
they were written with: a row is kept only when the table still holds exactly that row
(an LLM run's reports, or a table the run never wrote after writing the sidecar, do not
match) and its digest is today's. Hashes are polars' (stable within one polars version,
which the sidecar records).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.config import ReportSettings
from pipeline.storage.files import atomic_write_with

DIGESTS = "community_reports_digests.parquet"
_SEED = 20_231
# A report's columns that its inputs decide; the others are today's: the rating and what
# shows it (a new community anywhere moves every percentile) and the community's number,
# level, parent and children (a carried-over hierarchy may number communities anew).
CONTENT_COLUMNS = ["id", "title", "summary", "findings", "full_content", "size", "period"]


def input_digests(
    head: pl.DataFrame, frames: list[pl.DataFrame], settings: ReportSettings
) -> pl.DataFrame:
    """(id, digest) per report: a hash of its community's content in `head` (report id,
    size, period; the number too when no member can title it) and of its rows in each of
    `frames` (in order, numbers left out), and of the settings the text depends on."""
    salt = hash_text(f"{settings.max_findings}|{settings.max_report_tokens}")
    untitled = ~head["community"].is_in(frames[0]["community"].unique().implode())
    out = head.select(
        "community",
        "id",
        pl.struct("id", "size", "period", pl.when(untitled).then(pl.col("community")))
        .hash(_SEED)
        .alias("d"),
    )
    for k, frame in enumerate(frames):
        rows = frame.select(
            "community", pl.struct(pl.exclude("community")).hash(_SEED + k + 1).alias("h")
        )
        part = (
            rows.group_by("community", maintain_order=True)
            .agg(pl.col("h").alias(f"d{k}"))
            .with_columns(pl.col(f"d{k}").hash(_SEED))  # the list, in its order
        )
        out = out.join(part, on="community", how="left", maintain_order="left")
    digest = pl.concat_list(pl.exclude("community", "id").fill_null(0), pl.lit(salt, pl.UInt64))
    return out.select("id", digest.hash(_SEED).alias("digest"))


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

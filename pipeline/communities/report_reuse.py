"""Extractive reports kept from the last run when nothing they are assembled from changed.

Why: after a small edit the Leiden hierarchy is carried over, so almost every community has
the same members, relationships and candidate sentences as before, yet assembling every
report's strings is a Python loop over every community (most of the stage's time on an
edit at 10k documents). A report is a pure function of its community's rows in the frames
`report_frames.gather` builds and of the report settings, so a digest of those rows says
when the last run's report can be kept as it is.

The digests live in a sidecar beside the table (`DIGESTS`), with a hash of each report row
they were written with: a row is kept only when the table still holds exactly that row
(an LLM run's reports, or a table the run never wrote after writing the sidecar, do not
match) and its community's digest is today's. Hashes are polars' (stable within one polars
version, which the sidecar records).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.config import ReportSettings
from pipeline.storage.files import atomic_write_with

DIGESTS = "community_reports_digests.parquet"
_SEED = 20_231


def input_digests(frames: list[pl.DataFrame], settings: ReportSettings) -> pl.DataFrame:
    """(community, digest): one hash per community of its rows in every frame (in order)
    and of the settings the text depends on."""
    salt = hash_text(f"{settings.max_findings}|{settings.max_report_tokens}")
    parts = []
    for k, frame in enumerate(frames):
        rows = frame.select(
            "community", pl.struct(pl.exclude("community")).hash(_SEED + k).alias("h")
        )
        parts.append(
            rows.group_by("community", maintain_order=True)
            .agg(pl.col("h").alias(f"d{k}"))
            .with_columns(pl.col(f"d{k}").hash(_SEED))  # the list, in its order
        )
    out = frames[0].select("community")
    for part in parts:
        out = out.join(part, on="community", how="left", maintain_order="left")
    digest = pl.concat_list(pl.exclude("community").fill_null(0), pl.lit(salt, pl.UInt64))
    return out.select("community", digest.hash(_SEED).alias("digest"))


def hash_text(text: str) -> int:
    return int(pl.Series([text]).hash(_SEED)[0])


def row_hashes(reports: pl.DataFrame) -> pl.Series:
    return reports.select(pl.struct(pl.all()).hash(_SEED).alias("row_hash")).to_series()


def kept_reports(
    previous: pl.DataFrame | None, sidecar: pl.DataFrame | None, digests: pl.DataFrame
) -> pl.DataFrame | None:
    """The last run's report rows whose community has today's digest and that are the rows
    the sidecar describes; None when there are none."""
    if previous is None or sidecar is None or previous.is_empty() or sidecar.is_empty():
        return None
    if sidecar["polars"][0] != pl.__version__:
        return None
    kept = (
        previous.with_columns(row_hashes(previous))
        .join(sidecar.select("community", "digest", "row_hash"), on=["community", "row_hash"])
        .join(digests, on=["community", "digest"], how="semi")
        .drop("digest", "row_hash")
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
        reports.select("community")
        .with_columns(row_hashes(reports))
        .join(digests, on="community", how="left")
        .with_columns(pl.lit(pl.__version__).alias("polars"))
    )
    atomic_write_with(path, frame.write_parquet)

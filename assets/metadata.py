"""Materialization metadata shared by all assets: row counts, a Markdown preview, elapsed time."""

from __future__ import annotations

import html
import time
from typing import Any

import polars as pl
from dagster import MetadataValue


def _cell(value: Any, width: int) -> str:
    """One Markdown table cell: shortened, pipes escaped, and HTML escaped — document text is
    data, and the UI renders Markdown (raw HTML included)."""
    text = str(value).replace("\n", " ")
    text = text if len(text) <= width else text[: width - 1] + "…"
    return html.escape(text).replace("|", "\\|")


def markdown_preview(df: pl.DataFrame, n: int = 5, width: int = 60) -> str:
    """First `n` rows as a Markdown table, long cells shortened and pipes escaped."""
    cols = [c for c in df.columns if c != "vector"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.head(n).select(cols).iter_rows():
        lines.append("| " + " | ".join(_cell(v, width) for v in row) + " |")
    return "\n".join(lines)


def frame_metadata(df: pl.DataFrame, started: float, **extra: Any) -> dict[str, Any]:
    return {
        "rows": df.height,
        "preview": MetadataValue.md(markdown_preview(df)),
        "elapsed_s": round(time.perf_counter() - started, 3),
        **extra,
    }


def counts_md(counts: dict[str, int], header: tuple[str, str]) -> MetadataValue:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {_cell(k, 80)} | {v} |" for k, v in counts.items()]
    return MetadataValue.md("\n".join(lines))

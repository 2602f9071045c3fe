"""Per-document failures: a document that a stage could not process as usual is a row with
its reason and what was done instead, so one odd file never aborts a run and is never lost
silently. Reasons name files relative to the input folder, never by absolute path."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from pipeline import schemas

# An absolute POSIX or Windows path inside a message; only its last component is kept.
_ABS_PATH = re.compile(r"(?<![\w.~])(?:/[^\s/'\"():]+)+/|[A-Za-z]:\\(?:[^\s\\'\"]+\\)+")
MAX_REASON_CHARS = 500


def reason(exc: BaseException, what: str = "") -> str:
    """`what: ExcType: message`, absolute paths cut to their file name, length bounded."""
    text = _ABS_PATH.sub("", f"{type(exc).__name__}: {exc}")
    text = f"{what}: {text}" if what else text
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def failure_row(
    doc: dict[str, Any], stage: str, exc: BaseException, fallback: str, what: str = ""
) -> dict[str, Any]:
    """One row of schemas.DOCUMENT_FAILURES for document row `doc`."""
    return {
        "document_id": doc.get("id"),
        "source_path": doc.get("source_path"),
        "stage": stage,
        "reason": reason(exc, what),
        "fallback": fallback,
    }


def failures_frame(rows: list[dict[str, Any]], name: str) -> pl.DataFrame:
    """The rows as table `name` (a DOCUMENT_FAILURES table), in the given order."""
    table = schemas.pa.Table.from_pylist(rows, schema=schemas.TABLES[name])
    return pl.from_arrow(table)  # type: ignore[return-value]


def stage_failures_frame(stage: str, rows: list[tuple[str, str]]) -> pl.DataFrame:
    """(item id, reason) pairs of one corpus-wide LLM stage (summaries, reports) whose items
    kept their fallback, as a summary_failures / report_failures frame."""
    return pl.DataFrame(
        {
            "stage": [stage] * len(rows),
            "item_id": [r[0] for r in rows],
            "reason": [r[1] for r in rows],
        },
        schema={"stage": pl.Utf8, "item_id": pl.Utf8, "reason": pl.Utf8},
    )

"""The model's community report: its answer schema and the report row it becomes.

Why its own module: what the model must return (lenient on types, strict on a title and a
summary) and how an accepted answer fills a `community_reports` row are the same for a fresh
call and for a remembered report (pipeline.communities.reports.memoize_reports).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, field_validator, model_validator

from pipeline.communities.reports.compose_text import report_markdown
from pipeline.config import ReportSettings
from pipeline.tokens import count_tokens, truncate_tokens


class Finding(BaseModel):
    summary: str = ""
    explanation: str = ""

    @model_validator(mode="before")
    @classmethod
    def _text(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"summary": data, "explanation": ""}
        return data

    @field_validator("summary", "explanation", mode="before")
    @classmethod
    def _str(cls, v: Any) -> str:
        return "" if v is None else " ".join(str(v).split())


class ReportAnswer(BaseModel):
    """The model's report; lenient on types, strict on having a title and a summary."""

    title: str
    summary: str
    rating: float = 0.0
    rating_explanation: str = ""
    findings: list[Finding] = []

    @field_validator("title", "summary", "rating_explanation", mode="before")
    @classmethod
    def _str(cls, v: Any) -> str:
        return "" if v is None else " ".join(str(v).split())

    @field_validator("title", "summary")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v:
            raise ValueError("must not be empty")
        return v

    @field_validator("rating", mode="before")
    @classmethod
    def _clamp(cls, v: Any) -> float:
        try:
            x = float(str(v).split("/")[0].strip()) if not isinstance(v, int | float) else float(v)
        except ValueError:
            return 0.0
        return min(10.0, max(0.0, x)) if x == x else 0.0


def report_row(base: dict[str, Any], ans: ReportAnswer, settings: ReportSettings) -> dict[str, Any]:
    findings = [
        {"summary": f.summary, "explanation": f.explanation}
        for f in ans.findings
        if f.summary or f.explanation
    ][: settings.max_findings]
    content = report_markdown(ans.title, ans.summary, findings)
    if count_tokens(content) > settings.max_report_tokens:
        content = truncate_tokens(content, settings.max_report_tokens)
    doc = {
        "title": ans.title,
        "summary": ans.summary,
        "rating": ans.rating,
        "rating_explanation": ans.rating_explanation,
        "findings": findings,
    }
    return {
        **base,
        "title": ans.title,
        "summary": ans.summary,
        "rating": ans.rating,
        "rank": ans.rating,  # GraphRAG's name
        "rating_explanation": ans.rating_explanation,
        "findings": findings,
        "full_content": content,
        "full_content_json": json.dumps(doc, sort_keys=True, ensure_ascii=False),
    }

"""Cross-document links -> REFERS_TO edges (a placeholder that keeps every link unresolved
until the Markdown link resolver lands)."""

from __future__ import annotations

import json
from typing import Any

from pipeline.structure.model import DocStructure


def resolve_links(docs: list[DocStructure]) -> list[dict[str, Any]]:
    return [
        {
            "source_id": link["source_id"],
            "target_id": None,
            "type": "REFERS_TO",
            "weight": 1.0,
            "marker_text": link.get("text", ""),
            "metadata": json.dumps({"href": link["href"], "reason": "not resolved"}),
        }
        for d in docs
        for link in d.links
    ]

"""The entity graph of an output folder, read once for every export format.

Only the columns an export shows are read. Community ids are per level: an entity that
sits in no community at a level (its parent community was not re-partitioned) gets -1
there, so a level's partition is exactly what `communities` holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline.storage import store


@dataclass
class EntityGraph:
    """Entities (rows of `nodes`) and relationships (rows of `edges`, by entity id)."""

    nodes: pl.DataFrame  # id, human_readable_id, title, type, description, degree, text_unit_ids
    edges: pl.DataFrame  # id, source_id, target_id, type, description, weight
    levels: list[int]
    # entity id -> community number per level (index = position in `levels`), -1 for none
    membership: dict[str, list[int]] = field(default_factory=dict)
    total_nodes: int = 0  # entities in the index, before any cap

    def community_at(self, entity_id: str, level_pos: int) -> int:
        """The entity's community at `levels[level_pos]`, or the deepest one above it."""
        ids = self.membership.get(entity_id, [])
        for pos in range(min(level_pos, len(ids) - 1), -1, -1):
            if ids[pos] >= 0:
                return ids[pos]
        return -1


def load(output_dir: str | Path, max_nodes: int | None = None) -> EntityGraph:
    """The entity graph of `output_dir`; with `max_nodes`, only the `max_nodes` entities of
    highest degree (ties: lowest human_readable_id) and the relationships between them."""
    if not store.is_index(output_dir):
        raise FileNotFoundError(f"{output_dir} holds no docgraph index")
    nodes = store.read_table(
        output_dir,
        "entities",
        ["id", "human_readable_id", "title", "type", "description", "degree", "text_unit_ids"],
    )
    total = nodes.height
    nodes = nodes.sort(["degree", "human_readable_id"], descending=[True, False])
    if max_nodes is not None and nodes.height > max_nodes:
        nodes = nodes.head(max_nodes)
    kept = nodes["id"]
    edges = store.read_table(
        output_dir,
        "relationships",
        ["id", "source_id", "target_id", "type", "description", "weight"],
    ).filter(pl.col("source_id").is_in(kept.implode()) & pl.col("target_id").is_in(kept.implode()))
    communities = store.read_table(output_dir, "communities", ["community", "level", "entity_ids"])
    levels = sorted(set(communities["level"].to_list()))
    pos = {level: i for i, level in enumerate(levels)}
    membership: dict[str, list[int]] = {}
    for community, level, entity_ids in communities.iter_rows():
        for entity_id in entity_ids or []:
            membership.setdefault(entity_id, [-1] * len(levels))[pos[level]] = community
    return EntityGraph(nodes, edges, levels, membership, total)


def reports(output_dir: str | Path, communities: set[int]) -> dict[int, dict[str, object]]:
    """community number -> level, title and summary of its report, for `communities`."""
    frame = store.read_table(
        output_dir, "community_reports", ["community", "level", "title", "summary"]
    ).filter(pl.col("community").is_in(sorted(communities)))
    return {
        c: {"level": level, "title": title or "", "summary": summary or ""}
        for c, level, title, summary in frame.iter_rows()
    }


def sources(output_dir: str | Path, unit_ids: set[str]) -> dict[str, tuple[str, str]]:
    """text unit id -> (its document's title, its text), for `unit_ids`."""
    units = store.read_table(output_dir, "text_units", ["id", "text", "document_id"]).filter(
        pl.col("id").is_in(sorted(unit_ids))
    )
    docs = store.read_table(output_dir, "documents", ["id", "title", "source_path"])
    titles = {d: (t or p or d) for d, t, p in docs.select("id", "title", "source_path").iter_rows()}
    return {u: (titles.get(d, d or ""), text or "") for u, text, d in units.iter_rows()}


def snippet(text: str, needle: str, width: int = 240) -> str:
    """About `width` characters of `text` around the first mention of `needle` (case-
    insensitive), else its start; one line, with '…' where it was cut."""
    flat = " ".join(text.split())
    at = flat.lower().find(needle.lower()) if needle else -1
    start = max(0, at - width // 3) if at >= 0 else 0
    piece = flat[start : start + width]
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(flat) else "")

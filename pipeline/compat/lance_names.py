"""Our Lance tables under GraphRAG's names (graphrag/config/embeddings.py), so that
GraphRAG's LanceDBVectorStore opens them with its default settings.

LanceDB 0.40 has no views or table aliases, so an alias is a second Lance dataset whose
files are hard links to the source table's (a copy where links are impossible). Lance never
rewrites a file in place: a later write of either table makes new files, so the two never
change each other, and the alias costs no disk until its source is rewritten (then it is
made again). Measured on MuSiQue (1.9k passages; the three tables 48.7 MB of a 106 MB lancedb
folder): 16-27 ms a table and no new byte, where copies would add 48.7 MB to every kept
version. The other way, GraphRAG's settings could name our tables (vector_store.index_schema
.<name>.index_name); the aliases make its defaults work with no settings.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# our Lance table -> GraphRAG's index name (its columns id and vector are ours too)
GRAPHRAG_NAMES = {
    "entities": "entity_description",
    "community_reports": "community_full_content",
    "text_units": "text_unit_text",
}


def _link_copy(src: Path, dst: Path) -> int:
    """Hard-link every file of `src` into `dst`; returns the bytes that had to be copied."""
    copied = 0
    for dirpath, _, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            try:
                os.link(Path(dirpath) / name, dst / rel / name)
            except OSError:
                shutil.copy2(Path(dirpath) / name, dst / rel / name)
                copied += (dst / rel / name).stat().st_size
    return copied


def write_alias(lance_dir: str | Path, table: str) -> str | None:
    """Make (or remake) the GraphRAG-named alias of Lance table `table` in `lance_dir`;
    returns the alias name, None when `table` has none or does not exist."""
    alias = GRAPHRAG_NAMES.get(table)
    src = Path(lance_dir) / f"{table}.lance"
    if alias is None or not src.is_dir():
        return None
    dst = Path(lance_dir) / f"{alias}.lance"
    tmp = Path(lance_dir) / f".{alias}.lance.tmp"  # not a table name: never listed
    shutil.rmtree(tmp, ignore_errors=True)
    _link_copy(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)
    return alias

"""Flow's lexical matcher: entities and relationships in an in-memory DuckDB.

Name/description LIKE matches and pg_trgm-style trigram similarity (DuckDB has none), with
parameterised SQL over the Parquet rows; built once per index and kept on it (`flow_store`).
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.query.word_keys import fold
from pipeline.storage import store

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


_TRIGRAM_WORD = re.compile(r"[^\W_]+")
# A term as a LIKE pattern matching it literally anywhere: '%' + escaped + '%'.
_PATTERNS = r"""
    SELECT '%' || replace(replace(replace(strip_accents(lower(x)), '\', '\\'), '%', '\%'),
                          '_', '\_') || '%' AS pat
    FROM unnest($1) u(x)"""


def trigram_set(text: str) -> set[str]:
    """pg_trgm-style trigrams: per folded word, padded with two spaces before and one after."""
    out: set[str] = set()
    for w in _TRIGRAM_WORD.findall(fold(text or "")):
        padded = f"  {w} "
        out.update(padded[i : i + 3] for i in range(len(w) + 1))
    return out


class FlowStore:
    """What flow retrieval queries, built once per index (~0.5 s at 18k entities / 32k
    relationships): an in-memory DuckDB over entities.parquet and relationships.parquet with
    folded (lower-case, accent-free) names and descriptions, and a sparse name x trigram
    matrix of the titles and aliases (each entity's title first, then its distinct aliases;
    `name_start` is where an entity's names begin). `row` is the Parquet row number = the row
    of `index.entities` / `index.relationships`. DuckDB has no pg_trgm; the Jaccard of trigram
    sets is one sparse mat-vec per term here (~1 ms), where the same join in SQL took ~40 ms.
    """

    def __init__(
        self, root, titles: list[str | None], aliases: list[list[str] | None] | None = None
    ) -> None:
        import duckdb
        import scipy.sparse as sp

        self.con = duckdb.connect()
        self.lock = threading.Lock()  # one connection: queries from threads take turns
        con = self.con
        ents, rels = store.table_path(root, "entities"), store.table_path(root, "relationships")
        if ents.exists():
            con.execute(
                "CREATE TABLE ents AS SELECT file_row_number AS row, "
                "strip_accents(lower(concat_ws(' ; ', title, array_to_string(aliases, ' ; ')))) "
                "AS k_name, strip_accents(lower(coalesce(description, ''))) AS k_desc, "
                "coalesce(degree, 0) AS degree FROM read_parquet($1, file_row_number = true)",
                [str(ents)],
            )
        else:
            con.execute(
                "CREATE TABLE ents (row BIGINT, k_name VARCHAR, k_desc VARCHAR, degree INT)"
            )
        if rels.exists():
            con.execute(
                "CREATE TABLE rels AS SELECT file_row_number AS row, "
                "strip_accents(lower(coalesce(description, ''))) AS k_desc "
                "FROM read_parquet($1, file_row_number = true)",
                [str(rels)],
            )
        else:
            con.execute("CREATE TABLE rels (row BIGINT, k_desc VARCHAR)")
        self.gram_id: dict[str, int] = {}
        rows, cols, starts, n_names = [], [], [], 0
        for row, title in enumerate(titles):
            starts.append(n_names)
            extra = (aliases[row] or []) if aliases is not None else []
            for name in dict.fromkeys([title or "", *(a for a in extra if a)]):
                for gram in trigram_set(name):
                    rows.append(n_names)
                    cols.append(self.gram_id.setdefault(gram, len(self.gram_id)))
                n_names += 1
        self.n_entities = len(titles)
        self.name_start = np.asarray(starts, dtype=np.int64)
        self.grams = sp.csr_matrix(
            (np.ones(len(rows), dtype=np.float32), (rows, cols)),
            shape=(n_names, max(1, len(self.gram_id))),
        )
        self.gram_count = np.asarray(self.grams.sum(axis=1)).ravel()

    def query(self, sql: str, params: list[Any]) -> list[tuple]:
        with self.lock:
            return self.con.execute(sql, params).fetchall()

    def like_nodes(self, terms: list[str], limit: int) -> list[tuple[int, float, int]]:
        """(entity row, score, terms in the name): +3 per term in the name or aliases, +2 per
        term in the description (`LIKE '%term%'`, the term escaped so that its own % and _
        match literally)."""
        if not terms or limit <= 0:
            return []
        sql = rf"""
            WITH t AS ({_PATTERNS}),
            h AS (SELECT e.row, e.degree,
                         3 * (e.k_name LIKE t.pat ESCAPE '\')::INT
                         + 2 * (e.k_desc LIKE t.pat ESCAPE '\')::INT AS s
                  FROM ents e, t)
            SELECT row, sum(s) AS score, count(*) FILTER (WHERE s >= 3) AS names
            FROM h WHERE s > 0 GROUP BY row, degree
            ORDER BY score DESC, degree DESC, row LIMIT $2"""
        return [(int(r), float(s), int(n)) for r, s, n in self.query(sql, [terms, limit])]

    def trigram_sims(self, terms: list[str]) -> np.ndarray:
        """Per entity: the best Jaccard of any of its names' (title, aliases) and any term's
        trigram sets."""
        best = np.zeros(self.grams.shape[0], dtype=np.float32)
        for term in terms:
            grams = trigram_set(term)
            cols = [self.gram_id[g] for g in grams if g in self.gram_id]
            if not grams or not cols:
                continue
            q = np.zeros(self.grams.shape[1], dtype=np.float32)
            q[cols] = 1.0
            inter = self.grams @ q
            union = self.gram_count + len(grams) - inter
            np.maximum(
                best, np.divide(inter, union, out=np.zeros_like(inter), where=union > 0), out=best
            )
        if self.n_entities == 0:
            return np.zeros(0, dtype=np.float32)
        # Every entity has its title row, so the starts increase strictly: one segmented max.
        return np.maximum.reduceat(best, self.name_start)

    def fact_matches(self, rows: list[int], terms: list[str]) -> dict[int, int]:
        """Relationship row -> how many terms its description holds (rows given only)."""
        if not rows or not terms:
            return {}
        sql = rf"""
            WITH t AS ({_PATTERNS}),
            r AS (SELECT row, k_desc FROM rels WHERE row IN (SELECT unnest($2)))
            SELECT r.row, count(*) FROM r, t WHERE r.k_desc LIKE t.pat ESCAPE '\'
            GROUP BY r.row"""
        return {int(r): int(n) for r, n in self.query(sql, [terms, rows])}


_STORES_LOCK = threading.Lock()


def flow_store(index: IndexTables) -> FlowStore:
    """The index's FlowStore, built on first use and kept on the index object."""
    cached = getattr(index, "_flow_store", None)
    if cached is None:
        with _STORES_LOCK:
            cached = getattr(index, "_flow_store", None)
            if cached is None:
                ents = index.entities
                aliases = ents["aliases"].to_list() if "aliases" in ents.columns else None
                cached = FlowStore(index.root, ents["title"].to_list(), aliases)
                index._flow_store = cached
    return cached

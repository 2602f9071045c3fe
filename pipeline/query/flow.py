"""Knowledge flow search: query analysis -> scored subgraph -> definitions, facts, Mermaid.

Normal mode
1. Query analysis: the LLM (`query_analysis` prompt -> {entities, intent}) in LLM mode, else
   (offline, or when its JSON is unusable) a lexical analysis: quoted strings, capitalised
   spans and entity names found in the query, content words when there is nothing else;
   the intent from cue words.
2. Retrieval over the Parquet tables with DuckDB (in-memory, parameterised, built once per
   index): name/description LIKE matches fill 60% of the node target (+3 per term in the
   name, +2 per term in the description); trigram similarity (Jaccard of padded 3-gram
   sets, as pg_trgm, which DuckDB lacks; a node's best over its title and aliases) >= 0.1
   fills 40% and catches misspellings; the entity vectors fill in when fewer than half the
   target were found.
3. Edges touching the nodes: +2 per term in the fact (description), +3 when both endpoints
   are nodes, +1 when one is. Missing endpoints of kept edges are fetched and compete for
   the node cap with the edge's score, so the cap holds and every edge has both ends.
4. Context: Definitions, Facts, a Mermaid `graph LR` diagram, supporting text units: those
   the kept nodes and edges cite (scored by the sum of their scores) and the nearest few by
   cosine, ranked by relevance to the question (rerank.py: citation score fused with the
   question–unit cosine; a unit many kept entities cite is connected, not necessarily an
   answer).

Quick mode: entity and relationship vectors (60/40 of the targets), then graph growth up to
3 levels with scores halving per level; no LLM analysis.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel

from pipeline.llm.prompts import load_prompt, neutralise
from pipeline.query.records import entity_record, graph_record, unit_record
from pipeline.query.rerank import rank_units
from pipeline.query.result import SearchResult, texts_table
from pipeline.query.scoring import top_indices
from pipeline.query.text import STOPWORDS, extractive_answer, fold, raw_words
from pipeline.storage import store
from pipeline.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables

Intent = Literal["factual", "relationship", "summary", "exploration"]

LIKE_SHARE = 0.6  # of the node target, filled by LIKE matches (the rest by trigrams)
MIN_TRIGRAM_SIM = 0.1
MIN_TERM_CHARS = 3  # shorter terms would LIKE-match half the graph
MAX_TERMS = 12
NAME_SCORE, DESC_SCORE = 3.0, 2.0
FACT_SCORE, BOTH_ENDS, ONE_END = 2.0, 3.0, 1.0
QUICK_LEVELS, QUICK_LEVEL_NODES, QUICK_LEVEL_EDGES, QUICK_DECAY = 3, 20, 30, 0.5
DESC_TOKENS, FACT_TOKENS = 80, 60
ANSWER_UNITS, ANSWER_SENTENCES = 3, 3
ANSWER_TEMPERATURE = 0.3
RESPONSE_TYPE = "a few concise paragraphs"
LABEL_CHARS = 48
# Supporting text units: the cited ones plus the nearest few, ranked by relevance (rerank.py);
# chosen on the first 50 MuSiQue questions (benchmarks/retrieval.py).
UNIT_GRAPH_WEIGHT, UNIT_GRAPH_POWER, UNIT_DENSE_CANDIDATES = 0.3, 0.5, 10
UNIT_BRIDGE_SEEDS, UNIT_BRIDGE_WEIGHT = 2, 0.3  # rerank.title_bridges: the second hop

# Words of a question that say what it asks, not what it is about.
CUE_WORDS = frozenset(
    re.findall(
        r"\w+",
        "related relate relation relationship relationships connected connect connection "
        "linked link associated association between summarize summarise summary overview "
        "main themes theme tell explain describe",
    )
)
_RELATION_CUES = re.compile(
    r"\b(relat(e|es|ed|ion|ions|ionship|ionships)|connect(s|ed|ion|ions)?|link(s|ed)?"
    r"|associat\w*|interact\w*|between|связ\w*)\b"
)
_SUMMARY_CUES = re.compile(
    r"\b(summar\w*|overview|main (themes?|topics?|ideas?)|key (themes?|topics?)|themes"
    r"|overall|in general|обзор\w*|кратко|резюм\w*)\b"
)
_FACTUAL_CUES = re.compile(
    r"^\W*(what|who|whom|whose|when|where|which|how (many|much|old|long)|in what|"
    r"что|кто|когда|где|какой|какая|какое|сколько)\b"
)
_QUOTED = re.compile(r'"([^"\n]{2,80})"|“([^”\n]{2,80})”|«([^»\n]{2,80})»')


class QueryAnalysis(BaseModel):
    """The `query_analysis` prompt's answer."""

    entities: list[str] = []
    intent: Intent = "exploration"


# ---------------------------------------------------------------------------- analysis


def lexical_intent(query: str) -> Intent:
    """Intent from cue words: relation words first (a 'what links X and Y' question asks for
    a relationship), then summary words, then wh-words, else exploration."""
    q = fold(query)
    if _RELATION_CUES.search(q):
        return "relationship"
    if _SUMMARY_CUES.search(q):
        return "summary"
    if _FACTUAL_CUES.search(q):
        return "factual"
    return "exploration"


def lexical_entities(query: str, index: IndexTables | None = None) -> list[str]:
    """Candidate names: quoted strings, capitalised spans, entity names of the index found in
    the query; its content words when none of those exist. Order kept, duplicates dropped."""
    out: list[str] = []
    for m in _QUOTED.finditer(query):
        out.append(next(g for g in m.groups() if g))
    span: list[str] = []
    for w in [*raw_words(query), ""]:
        if w[:1].isupper() or (w[:1].isdigit() and span):
            span.append(w)
            continue
        while span and fold(span[0]) in STOPWORDS:
            span.pop(0)
        if span:
            out.append(" ".join(span))
        span = []
    if index is not None and index.entities.height:
        # Names written like names; a lower-case word equal to a title ('state') only
        # when nothing else names the query's subject.
        titles = index.entities["title"]
        matches = index.match_entities(query)
        out.extend(titles[m.row] for m in matches if m.proper or " " in m.key)
        if not out:
            out.extend(titles[m.row] for m in matches)
    if not out:
        out = [
            w
            for w in raw_words(query)
            if len(w) >= MIN_TERM_CHARS and fold(w) not in STOPWORDS and fold(w) not in CUE_WORDS
        ]
    seen: set[str] = set()
    names = []
    for name in out:
        key = fold(name.strip())
        if key and key not in seen:
            seen.add(key)
            names.append(name.strip())
    return names[:MAX_TERMS]


def analyse(index: IndexTables, query: str, trace: list[str]) -> dict[str, Any]:
    """{entities, intent, source}: by the LLM in LLM mode, lexical otherwise or on failure
    (always, as it only steers retrieval; the warning says so and the answer call decides)."""
    if index.llm is not None:
        from pipeline.llm.errors import LlmError
        from pipeline.query.answer import LlmFallbackWarning

        messages = load_prompt("query_analysis").render(question=neutralise(query, "question"))
        try:
            (got,) = index.llm.run_many(
                [index.llm.chat_json(messages, QueryAnalysis, stage="query_analysis")]
            )
        except Exception as exc:  # noqa: BLE001 - the lexical analysis stands in
            got = LlmError(str(exc))
        if isinstance(got, QueryAnalysis):
            ents = [e.strip() for e in got.entities if e and e.strip()][:MAX_TERMS]
            if not ents:
                ents = lexical_entities(query, index)
            trace.append(f"analysis: llm, intent={got.intent}, entities={ents}")
            return {"entities": ents, "intent": got.intent, "source": "llm"}
        note = f"analysis: LLM failed ({got}); lexical fallback"
        warnings.warn(note, LlmFallbackWarning, stacklevel=2)
        trace.append(note)
    ents = lexical_entities(query, index)
    intent = lexical_intent(query)
    trace.append(f"analysis: lexical, intent={intent}, entities={ents}")
    return {"entities": ents, "intent": intent, "source": "lexical"}


# ---------------------------------------------------------------------------- DuckDB store

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


def relationship_vectors(index: IndexTables) -> np.ndarray:
    """Relationship vectors aligned with `index.relationships` rows (cached on the index)."""
    cached = getattr(index, "_flow_rel_vectors", None)
    if cached is None:
        cached = index._aligned_vectors("relationships", index.relationships)
        index._flow_rel_vectors = cached
    return cached


# ---------------------------------------------------------------------------- retrieval


@dataclass
class Subgraph:
    nodes: dict[int, dict[str, Any]]  # entity row -> {score, via}
    edges: dict[int, dict[str, Any]]  # relationship row -> {score, via}


def _edge_candidates(
    index: IndexTables, fs: FlowStore, nodes: dict[int, Any], terms: list[str]
) -> list[tuple[int, float, int]]:
    """(relationship row, score, endpoints among the nodes) of every edge touching the nodes,
    best first: +2 per term in its description, +3 both endpoints / +1 one, then weight."""
    rels = index.relationships
    if not nodes or rels.height == 0:
        return []
    sel = np.zeros(index.entities.height)
    sel[list(nodes)] = 1.0
    ends = index.entity_relationships.T @ sel
    rows = np.flatnonzero(ends > 0)
    facts = fs.fact_matches(rows.tolist(), terms)
    fact = np.array([facts.get(int(r), 0) for r in rows], dtype=np.float64)
    score = FACT_SCORE * fact + np.where(ends[rows] >= 2, BOTH_ENDS, ONE_END)
    weight = rels["weight"].fill_null(0).to_numpy()[rows]
    order = np.lexsort((rows, -weight, -score))
    return [(int(rows[k]), float(score[k]), int(min(ends[rows[k]], 2))) for k in order]


def retrieve(index: IndexTables, query: str, terms: list[str], trace: list[str]) -> Subgraph:
    qs = index.settings.query
    target, max_edges = max(1, qs.flow_max_nodes), max(0, qs.flow_max_edges)
    fs = flow_store(index)
    terms = [t for t in terms if len(fold(t).strip()) >= MIN_TERM_CHARS]
    nodes: dict[int, dict[str, Any]] = {}

    like_target = max(1, round(target * LIKE_SHARE))
    for row, score, names in fs.like_nodes(terms, like_target):
        nodes[row] = {"score": score, "via": "like", "name_match": names > 0}
    trace.append(f"like: {len(nodes)} nodes")

    sims = fs.trigram_sims(terms)
    if nodes:
        sims[list(nodes)] = 0.0
    degree = index.entities["degree"].fill_null(0).to_numpy()
    cand_rows = np.flatnonzero(sims >= MIN_TRIGRAM_SIM)
    order = cand_rows[np.lexsort((cand_rows, -degree[cand_rows], -sims[cand_rows]))]
    tri = order[: max(0, target - len(nodes))].tolist()
    for row in tri:
        sim = float(sims[row])
        nodes[row] = {"score": NAME_SCORE * sim, "via": "trigram", "similarity": sim}
    trace.append(f"trigram: {len(tri)} nodes (similarity >= {MIN_TRIGRAM_SIM})")

    if len(nodes) < target / 2 and index.entities.height:
        vs = index.similarities(index.entity_vectors, index.embed_query(query))
        added = 0
        for row in top_indices(vs, target + len(nodes)).tolist():
            if len(nodes) >= target:
                break
            if row not in nodes and vs[row] > 0:
                nodes[row] = {"score": float(vs[row]), "via": "vector"}
                added += 1
        trace.append(f"vector fallback: {added} nodes (under half of {target} found)")

    cand = _edge_candidates(index, fs, nodes, terms)
    kept = cand[:max_edges]
    src, tgt = edge_ends(index)
    # An endpoint is worth its edge's score, but never more than the node that brought it.
    missing: dict[int, float] = {}
    for row, score, _ in kept:
        ends = [int(src[row]), int(tgt[row])]
        parent = max((nodes[e]["score"] for e in ends if e in nodes), default=score)
        for erow in ends:
            if erow >= 0 and erow not in nodes:
                missing[erow] = max(missing.get(erow, 0.0), min(score, parent))
    pool = [(-v["score"], 0, r) for r, v in nodes.items()]
    pool += [(-s, 1, r) for r, s in missing.items()]
    keep = {r for _, _, r in sorted(pool)[:target]}
    fetched = sorted(r for r in missing if r in keep)
    for r in fetched:
        nodes[r] = {"score": missing[r], "via": "endpoint"}
    nodes = {r: v for r, v in nodes.items() if r in keep}
    # Edges between the final nodes, best first (one that lost an endpoint makes room).
    edges: dict[int, dict[str, Any]] = {}
    for row, score, ends in cand:
        if len(edges) >= max_edges:
            break
        if int(src[row]) in nodes and int(tgt[row]) in nodes:
            edges[row] = {"score": score, "via": "both ends" if ends == 2 else "one end"}
    trace.append(f"edges: {len(edges)} kept of {len(cand)}")
    trace.append(f"fetched {len(fetched)} missing endpoints")
    return Subgraph(nodes, edges)


def edge_ends(index: IndexTables) -> tuple[np.ndarray, np.ndarray]:
    """Entity rows of each relationship's source and target (-1: unknown), cached."""
    cached = getattr(index, "_flow_edge_ends", None)
    if cached is None:
        ids = index.entities.select(pl.col("id").alias("eid")).with_row_index("erow")
        ends = []
        for col in ("source_id", "target_id"):
            joined = index.relationships.select(pl.col(col).alias("eid")).join(
                ids, on="eid", how="left", maintain_order="left"
            )
            ends.append(joined["erow"].fill_null(-1).cast(pl.Int64).to_numpy())
        cached = (ends[0], ends[1])
        index._flow_edge_ends = cached
    return cached


def retrieve_quick(index: IndexTables, query: str, trace: list[str]) -> Subgraph:
    """Semantic seeds (entity and relationship vectors, 60/40 of the targets), then graph
    growth: each level adds the best edges (<= 30) and new nodes (<= 20) next to the last
    level's nodes, scored by their parent's score halved per level."""
    qs = index.settings.query
    n_target = max(1, round(qs.flow_max_nodes * LIKE_SHARE))
    e_target = max(0, round(qs.flow_max_edges * (1 - LIKE_SHARE)))
    qvec = index.embed_query(query)
    nodes: dict[int, dict[str, Any]] = {}
    edges: dict[int, dict[str, Any]] = {}
    if index.entities.height:
        sims = index.similarities(index.entity_vectors, qvec)
        for row in top_indices(sims, n_target).tolist():
            nodes[row] = {"score": float(sims[row]), "via": "vector", "level": 0}
    rels = index.relationships
    src, tgt = edge_ends(index)
    if rels.height and e_target:
        rsims = index.similarities(relationship_vectors(index), qvec)
        rsims = np.where((src >= 0) & (tgt >= 0), rsims, -np.inf)
        for row in top_indices(rsims, e_target).tolist():
            if not np.isfinite(rsims[row]):
                continue
            edges[row] = {"score": float(rsims[row]), "via": "vector", "level": 0}
            for end in (int(src[row]), int(tgt[row])):
                if end not in nodes:
                    nodes[end] = {"score": float(rsims[row]), "via": "endpoint", "level": 0}
    trace.append(f"semantic: {len(nodes)} nodes, {len(edges)} edges")

    inc = index.entity_relationships.tocsr()  # entities x relationships
    weight = rels["weight"].fill_null(0).to_numpy().astype(np.float64)
    frontier = sorted(nodes)
    for level in range(1, QUICK_LEVELS + 1):
        if not frontier or not rels.height:
            break
        sub = inc[frontier].tocoo()  # (frontier position, relationship) pairs
        base = np.array([nodes[n]["score"] for n in frontier]) * QUICK_DECAY**level
        rel, score = sub.col, base[sub.row]
        ok = (src[rel] >= 0) & (tgt[rel] >= 0) & ~np.isin(rel, list(edges))
        rel, score = rel[ok], score[ok]
        order = np.lexsort((rel, -weight[rel], -score))  # best first; a rel's best parent first
        rel, score = rel[order], score[order]
        _, first = np.unique(rel, return_index=True)
        keep = np.sort(first)
        added_nodes: list[int] = []
        added_edges = 0
        for r, s in zip(rel[keep].tolist(), score[keep].tolist(), strict=True):
            if added_edges >= QUICK_LEVEL_EDGES:
                break
            new = [e for e in (int(src[r]), int(tgt[r])) if e not in nodes]
            if new and len(added_nodes) + len(new) > QUICK_LEVEL_NODES:
                continue
            for e in new:
                nodes[e] = {"score": s, "via": f"growth {level}", "level": level}
                added_nodes.append(e)
            edges[r] = {"score": s, "via": f"growth {level}", "level": level}
            added_edges += 1
        trace.append(f"level {level}: +{len(added_nodes)} nodes, +{added_edges} edges")
        frontier = sorted(added_nodes)
    return Subgraph(nodes, edges)


# ---------------------------------------------------------------------------- context


_MERMAID_ESCAPES = {
    "#": "#35;",
    '"': "#quot;",
    "[": "#91;",
    "]": "#93;",
    "(": "#40;",
    ")": "#41;",
    "{": "#123;",
    "}": "#125;",
    "<": "#lt;",
    ">": "#gt;",
    "|": "#124;",
    ";": "#59;",
    "`": "#96;",
}


def mermaid_label(text: Any, limit: int = LABEL_CHARS) -> str:
    """`text` safe inside a quoted Mermaid label: one line, entity codes for the characters
    that could end the label or the statement ('#' too, so no code can be smuggled in)."""
    s = " ".join(str(text or "").split())
    if len(s) > limit:
        s = s[: limit - 1].rstrip() + "…"
    return "".join(_MERMAID_ESCAPES.get(c, c) for c in s)  # one pass: codes stay codes


def mermaid(nodes: list[tuple[str, str]], edges: list[tuple[str, str, str]]) -> str:
    """`graph LR` of (key, label) nodes and (source key, target key, label) edges; node ids
    are generated (n0, n1, ...), never taken from the data."""
    ids = {key: f"n{i}" for i, (key, _) in enumerate(nodes)}
    lines = ["graph LR"]
    lines += [f'    {ids[k]}["{mermaid_label(label)}"]' for k, label in nodes]
    for a, b, label in edges:
        if a in ids and b in ids:
            lines.append(f'    {ids[a]} -->|"{mermaid_label(label, 32)}"| {ids[b]}')
    return "\n".join(lines)


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _unit_ranking(
    index: IndexTables, items: list[tuple[float, list[str]]]
) -> tuple[list[str], dict[str, float]]:
    """Text unit ids cited by the kept nodes/edges, ranked by the sum of their scores."""
    if not items:
        return [], {}
    frame = pl.DataFrame(
        {
            "score": [float(s) for s, _ in items],
            "order": list(range(len(items))),
            "id": [[] if u is None else list(u) for _, u in items],
        },
        schema={"score": pl.Float64, "order": pl.Int64, "id": pl.List(pl.String)},
    )
    ranked = (
        frame.explode("id")
        .drop_nulls("id")
        .filter(pl.col("id").is_in(index.text_units["id"].implode()))
        .group_by("id")
        .agg(pl.col("score").sum(), pl.col("order").min())
        .sort(["score", "order", "id"], descending=[True, False, False])
    )
    return ranked["id"].to_list(), dict(zip(ranked["id"], ranked["score"], strict=True))


def build_result(
    index: IndexTables, query: str, mode: str, analysis: dict, g: Subgraph, trace: list[str]
) -> SearchResult:
    qs = index.settings.query
    ents, rels = index.entities, index.relationships
    node_rows = sorted(g.nodes, key=lambda r: (-g.nodes[r]["score"], r))
    edge_rows = sorted(g.edges, key=lambda r: (-g.edges[r]["score"], r))
    node_recs, edge_recs = [], []
    for r in node_rows:
        e = ents.row(r, named=True)
        text = _one_line(truncate_tokens(e["description"] or "", DESC_TOKENS))
        node_recs.append(entity_record(index, e, text, **g.nodes[r]))
    for r in edge_rows:
        rel = rels.row(r, named=True)
        edge_recs.append(
            graph_record(
                index,
                "relationship",
                rel,
                rel["text_unit_ids"],
                title=f"{rel['source']} -> {rel['target']}",
                source=rel["source"],
                target=rel["target"],
                source_id=rel["source_id"],
                target_id=rel["target_id"],
                type=rel["type"] or "RELATED_TO",
                text=_one_line(truncate_tokens(rel["description"] or "", FACT_TOKENS)),
                **g.edges[r],
            )
        )
    # The graph gets what text units do not (quick mode's grown subgraph can be large):
    # definitions first (half), then facts between shown entities, best first.
    graph_budget = int(qs.max_context_tokens * (1 - qs.text_unit_prop))
    definitions, shown, used = [], set(), 0
    for n in node_recs:
        line = f"- [{n['human_readable_id']}] {_one_line(n['title'])}: {n['text']}"
        cost = count_tokens(line)
        if definitions and used + cost > graph_budget // 2:
            break
        used += cost
        definitions.append(line)
        shown.add(n["id"])
        n["in_context"] = True
    facts, shown_edges = [], []
    for x in edge_recs:
        if x["source_id"] not in shown or x["target_id"] not in shown:
            continue
        line = (
            f"- [{x['human_readable_id']}] {_one_line(x['source'])} -{_one_line(x['type'])}-> "
            f"{_one_line(x['target'])}: {x['text']}"
        )
        cost = count_tokens(line)
        if used + cost > graph_budget:
            break
        used += cost
        facts.append(line)
        shown_edges.append(x)
        x["in_context"] = True
    diagram = mermaid(
        [(n["id"], n["title"]) for n in node_recs if n["id"] in shown],
        [(x["source_id"], x["target_id"], x["type"]) for x in shown_edges],
    )
    cited, cite_scores = _unit_ranking(
        index,
        [(g.nodes[r]["score"], ents["text_unit_ids"][r]) for r in node_rows]
        + [(g.edges[r]["score"], rels["text_unit_ids"][r]) for r in edge_rows],
    )
    unit_ids, unit_info, bridged = rank_units(
        index,
        index.embed_query(query),
        cited,
        cite_scores,
        graph_weight=UNIT_GRAPH_WEIGHT,
        power=UNIT_GRAPH_POWER,
        dense_candidates=UNIT_DENSE_CANDIDATES,
        bridge_seeds=UNIT_BRIDGE_SEEDS,
        bridge_weight=UNIT_BRIDGE_WEIGHT,
    )
    trace.append(
        f"text units: {len(cited)} cited by the kept nodes and edges + the nearest "
        f"{UNIT_DENSE_CANDIDATES}, ranked by {UNIT_GRAPH_WEIGHT:g} x citation score "
        f"(max-normalised) ** {UNIT_GRAPH_POWER:g} + {1 - UNIT_GRAPH_WEIGHT:g} x cosine"
        + (f"; second hop to documents titled {', '.join(bridged[:10])}" if bridged else "")
    )
    sections = [
        "-----Definitions-----\n" + "\n".join(definitions),
        "-----Facts-----\n" + "\n".join(facts),
        "-----Diagram-----\n```mermaid\n" + diagram + "\n```",
    ]
    budget = max(0, qs.max_context_tokens - count_tokens("\n\n".join(sections)))
    texts, unit_recs = texts_table(
        (
            unit_record(
                index,
                index.unit_row[uid],
                unit_info[uid]["score"],
                rank=rank + 1,
                graph=unit_info[uid]["graph"],
                dense=unit_info[uid]["dense"],
            )
            for rank, uid in enumerate(unit_ids[: qs.top_k_units])
        ),
        budget,
    )
    sections.append(texts)
    context = "\n\n".join(sections)
    trace.append(
        f"context: {len(definitions)} of {len(node_recs)} definitions, {len(facts)} of "
        f"{len(edge_recs)} facts, {len(unit_recs)} of {len(unit_ids)} supporting text units"
    )

    named = [n["title"] for n in node_recs if n.get("name_match")]
    answer = extractive_answer(
        query,
        [u["text"] for u in unit_recs[:ANSWER_UNITS]],
        max_sentences=ANSWER_SENTENCES,
        must_mention=named,
    )
    if answer:
        trace.append("answer: extractive, from the top supporting units")
    elif facts:
        answer = facts[0].split("] ", 1)[-1]
        trace.append("answer: the top fact (no sentence of the units matches)")
    else:
        answer = "Nothing in the index matches the query."
        trace.append("answer: nothing found")
    return SearchResult(
        query=query,
        mode=mode,
        answer=answer,
        context_text=context,
        records=[*node_recs, *edge_recs, *unit_recs],
        text_unit_ids=unit_ids,
        trace=trace,
        context_tokens=count_tokens(context),
        data={
            "analysis": analysis,
            "nodes": node_recs,
            "edges": edge_recs,
            "mermaid": diagram,
            "definitions": definitions,
            "facts": facts,
        },
    )


# ---------------------------------------------------------------------------- entry points


def flow_search(
    index: IndexTables, query: str, *, quick: bool = False, llm_answer: bool = True
) -> SearchResult:
    """Knowledge flow search (see the module docstring); `quick`: semantic + growth."""
    query = (query or "").strip()
    if not query:
        raise ValueError("empty query")
    mode = "flow"
    if index.is_empty:
        return index.empty_result(query, "flow")
    trace: list[str] = []
    if quick:
        analysis = {"entities": [], "intent": lexical_intent(query), "source": "none (quick)"}
        trace.append(f"analysis: skipped (quick), intent={analysis['intent']}")
        g = retrieve_quick(index, query, trace)
    else:
        analysis = analyse(index, query, trace)
        g = retrieve(index, query, analysis["entities"], trace)
    result = build_result(index, query, mode, analysis, g, trace)
    if analysis["source"] == "lexical" and index.llm is not None:
        result.fallback = next(t for t in trace if t.startswith("analysis: LLM failed"))
    if index.llm is not None and llm_answer:
        return answer_flow(index, result)
    return result


def flow_messages(result: SearchResult) -> list[dict[str, str]]:
    intent = (result.data.get("analysis") or {}).get("intent", "exploration")
    return load_prompt("flow_answer").render(
        context=neutralise(result.context_text, "context"),
        question=result.query,
        intent=intent,
        response_type=RESPONSE_TYPE,
    )


def answer_flow(index: IndexTables, result: SearchResult) -> SearchResult:
    """`result` answered by the LLM over its context (temperature 0.3); a failure is
    LlmAnswerError, or with `index.llm_fallback` the extractive answer (see answer.fall_back)."""
    from pipeline.llm.errors import LlmError
    from pipeline.query.answer import fall_back

    llm = index.llm
    try:
        (answer,) = llm.run_many(
            [llm.chat(flow_messages(result), stage="flow_answer", temperature=ANSWER_TEMPERATURE)]
        )
    except Exception as exc:  # noqa: BLE001 - reported as the answer's failure below
        answer = LlmError(str(exc))
    if isinstance(answer, LlmError):
        return fall_back(result, "LLM answer", answer.reason, index.llm_fallback)
    return replace(result, answer=answer, trace=[*result.trace, "answer: LLM over the flow"])


def stream_flow_answer(index: IndexTables, result: SearchResult) -> Iterator[str]:
    """The LLM answer to a flow result (`flow_search(..., llm_answer=False)`), piece by piece."""
    from pipeline.query.answer import stream_messages

    if index.llm is None:
        raise ValueError("streaming needs LLM mode (settings llm.enabled)")
    return stream_messages(
        index.llm, flow_messages(result), stage="flow_answer", temperature=ANSWER_TEMPERATURE
    )

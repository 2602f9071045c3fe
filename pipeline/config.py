"""Settings: every default declared once, here.

Precedence (lowest first): these defaults, a YAML file (`DOCGRAPH_CONFIG` or an
explicit path), environment variables `DOCGRAPH_<SECTION>__<FIELD>` (or
`DOCGRAPH_<FIELD>` for top-level fields), then explicit overrides from code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, SecretStr

PACKAGED_MODEL = "packaged:all-MiniLM-L6-v2"


class ChunkingSettings(BaseModel):
    chunk_size: int = Field(300, description="target max tokens (o200k) per text unit")
    overlap: int = Field(30, description="tokens of trailing sentences repeated at the next unit")
    min_size: int = Field(
        100,
        description="content-defined cuts are at least this many tokens apart (the anchor "
        "window); only forced splits of an over-long span or the last unit may be shorter",
    )
    cut_divisor: int = Field(
        3,
        description="a sentence end inside a paragraph is a cut candidate when its hash % "
        "divisor == 0 (paragraph, page and heading boundaries always are)",
    )
    method: Literal["smart", "simple", "semantic"] = Field(
        "smart",
        description="smart: chunks inside sections with a section-path prefix, tables whole, "
        "tiny sections merged; simple: the document text alone; semantic: smart's structure, "
        "cut where adjacent sentences' embeddings diverge (embeds every sentence: slow on CPU)",
    )
    heading_prefix: bool = Field(
        True,
        description="smart/semantic: start each unit with '# section path' (counted in chunk_size)",
    )
    semantic_percentile: float = Field(
        10.0,
        description="semantic: a boundary is a topic cut when its adjacent-sentence cosine is "
        "at or below this percentile of the section's boundaries",
    )
    semantic_window: int = Field(
        2, description="semantic: sentences averaged on each side of a boundary"
    )


class ExtractionSettings(BaseModel):
    extractor: str = "nlp"
    max_entities_per_unit: int = 40
    keyphrases_per_unit: int = 5
    keyphrase_method: str = Field(
        "rake", description="CONCEPT keyphrases: 'rake' (fast, default) or 'yake' (~50x slower)"
    )
    max_relation_distance: int = Field(
        1, description="relate entities in the same sentence or up to N sentences apart"
    )
    llm_pack_tokens: int = Field(
        2400, description="llm: short units of one document are packed into one call up to this"
    )
    llm_pack_max_units: int = Field(16, description="llm: at most this many units per call")
    gleanings: int = Field(0, description="llm: extra 'what was missed?' rounds per call")
    prompt_path: str | None = Field(
        None,
        description="llm: a file replacing extract_graph.txt, or a folder of <name>.txt prompt "
        "overrides",
    )


class GraphSettings(BaseModel):
    description_max_tokens: int = 150
    max_cluster_size: int = 10
    seed: int = 42
    max_levels: int = 4
    llm_summary_min_descriptions: int = Field(
        4, description="llm: items with more distinct raw descriptions than this get an LLM summary"
    )
    incremental_max_change: float = Field(
        0.1,
        description="re-runs: when at most this fraction of the previously clustered entities is "
        "new or gone, kept entities keep their communities (new ones join their most strongly "
        "linked neighbour's); above it, or without a previous table, Leiden runs from scratch. "
        "Also applies to the change accumulated since the last full recompute (counted in "
        "<output>/communities_state.json), and a change of seed, max_cluster_size or "
        "max_levels recomputes; 0: always recompute",
    )


class ReportSettings(BaseModel):
    max_findings: int = 5
    max_report_tokens: int = 600
    llm_min_size: int = Field(
        10,
        description="llm: smaller communities keep their extractive report (no call); 10 keeps "
        "a whole index within ~1.5 calls per 1k corpus tokens",
    )
    llm_context_tokens: int = Field(1500, description="llm: context budget of one report prompt")
    llm_reuse_max_change: float = Field(
        0.2,
        description="llm re-runs: a community whose report context differs from the one its last "
        "LLM report was written from by at most this fraction (added + removed lines over "
        "all lines) keeps that report, with no call; 0: re-report on any change",
    )


class EmbeddingSettings(BaseModel):
    model: str = Field(
        PACKAGED_MODEL, description="sentence-transformers name or path, or the packaged model"
    )
    batch_size: int = 64
    device: str = "cpu"
    entity_vectors: Literal["name+context", "text"] = Field(
        "name+context",
        description="name+context: the embedded title plus the mean of its text units' vectors;"
        " text: embed 'title (TYPE): description' (several times slower on CPU)",
    )
    relationship_vectors: Literal["context", "text"] = Field(
        "context",
        description="context: source + target entity vectors + mean of its text units' vectors"
        " (no model call); text: embed 'source -> target: description'",
    )
    node_vectors: Literal["derived", "text"] = Field(
        "derived",
        description="derived: PARAGRAPH/LIST_ITEM nodes take the mean vector of the text units "
        "holding them (no model call), other node types are embedded; text: embed every node",
    )
    report_vectors: Literal["context", "text"] = Field(
        "context",
        description="context: mean of the member entities' vectors (no model call);"
        " text: embed the report's full content",
    )


class SameTopicSettings(BaseModel):
    enabled: bool = True
    min_similarity: float = Field(0.6, description="cosine of two sections' vectors to link")
    max_connections: int = Field(5, description="SAME_TOPIC edges per section at most")
    cross_doc_only: bool = Field(True, description="link sections of different documents only")
    vectors: Literal["units", "text"] = Field(
        "units",
        description="units: a section's vector is the mean of its text units' vectors (no model"
        " call); text: embed its path and first `text_tokens` tokens",
    )
    text_tokens: int = Field(
        128, description="text: a section's vector embeds its path and its first N tokens"
    )


class QuerySettings(BaseModel):
    top_k_units: int = 10
    top_k_entities: int = 10
    max_context_tokens: int = 8000
    text_unit_prop: float = 0.5
    community_prop: float = 0.2
    global_top_reports: int = 20
    global_dynamic_threshold: float = Field(
        1.0, description="global, level=None: descend into communities rated at least this"
    )
    local_dense_seeds: int = Field(3, description="top dense units that seed local PageRank")
    local_damping: float = Field(0.85, description="local PageRank continuation probability")
    local_graph_weight: float = Field(
        0.7, description="local ranking = w * PageRank (max-normalised) + (1 - w) * cosine"
    )
    expand_max_hops: int = Field(2, description="expand: graph hops from the vector seeds")
    expand_max_nodes: int = Field(60, description="expand: nodes kept after expansion")
    focus_budget_tokens: int = Field(2000, description="focus: token budget of the context")
    flow_max_nodes: int = Field(15, description="flow: entities in the context at most")
    flow_max_edges: int = Field(20, description="flow: relationships in the context at most")


class StructureSettings(BaseModel):
    pdf_tables: bool = Field(
        False,
        description="detect tables with pymupdf find_tables (~0.15 s/page; the time spent is "
        "kept in the document section's metadata)",
    )
    header_footer_margin: float = Field(
        0.12, description="top/bottom page fraction where running headers/footers are looked for"
    )
    header_footer_min_repeat: float = Field(
        0.3,
        description="a margin line repeating (digits ignored) on this share of pages is a "
        "running header/footer",
    )
    heading_max_words: int = Field(20, description="longer lines are never headings")
    footnote_zone: float = Field(
        0.4, description="footnotes are looked for in this bottom fraction of the page"
    )


class StorageSettings(BaseModel):
    keep_versions: int = Field(
        2,
        ge=1,
        description="published index versions kept in <output>/versions (the current one and "
        "the newest before it); older ones, and the text of deleted documents in them, are "
        "deleted after each publish",
    )
    lock_wait_s: float = Field(
        0.0,
        ge=0,
        description="a run that finds another run writing the same output folder waits this "
        "long for it, then stops with an error naming that run",
    )


def _env_secret(name: str) -> SecretStr | None:
    value = os.environ.get(name)
    return SecretStr(value) if value else None


class LlmSettings(BaseModel):
    """LLM mode: any OpenAI-compatible endpoint. The key is a SecretStr so it never shows in a
    repr, a log line or Dagster metadata; it is read from env/config, never written anywhere."""

    enabled: bool = Field(False, description="offline default; true: the LLM extracts/reports")
    base_url: str | None = Field(
        default_factory=lambda: os.environ.get("OPENAI_BASE_URL") or None,
        description="OpenAI-compatible base URL (default: $OPENAI_BASE_URL, else api.openai.com)",
    )
    api_key: SecretStr | None = Field(
        default_factory=lambda: _env_secret("OPENAI_API_KEY"),
        description="default: $OPENAI_API_KEY; local servers accept any value",
    )
    chat_model: str = "gpt-4o-mini"
    temperature: float = 0.0
    max_tokens: int = 2000
    timeout_s: float = Field(60.0, description="per HTTP request")
    max_retries: int = Field(5, description="on timeouts, connection errors, 429 and 5xx")
    concurrency: int = Field(8, description="requests in flight at most, per client")
    cache: bool = Field(True, description="disk cache of every call (needs a cache folder)")
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="model -> (USD per 1M prompt tokens, USD per 1M completion tokens)",
    )


class Settings(BaseModel):
    input_dir: str = "data/input"
    output_dir: str = "data/output"
    chunking: ChunkingSettings = ChunkingSettings()
    extraction: ExtractionSettings = ExtractionSettings()
    graph: GraphSettings = GraphSettings()
    reports: ReportSettings = ReportSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    query: QuerySettings = QuerySettings()
    same_topic: SameTopicSettings = SameTopicSettings()
    structure: StructureSettings = StructureSettings()
    storage: StorageSettings = StorageSettings()
    llm: LlmSettings = Field(default_factory=LlmSettings)


def _deep_update(base: dict[str, Any], upd: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_update(out[k], v)
        else:
            out[k] = v
    return out


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sections = {name for name, f in Settings.model_fields.items() if f.annotation is not str}
    for key, value in environ.items():
        if not key.startswith("DOCGRAPH_") or key == "DOCGRAPH_CONFIG":
            continue
        parts = key[len("DOCGRAPH_") :].lower().split("__")
        if len(parts) == 2 and parts[0] in sections:
            out.setdefault(parts[0], {})[parts[1]] = value
        elif len(parts) == 1 and parts[0] in Settings.model_fields and parts[0] not in sections:
            out[parts[0]] = value
    return out


def load_settings(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    environ = dict(os.environ) if environ is None else environ
    data: dict[str, Any] = {}
    path = path or environ.get("DOCGRAPH_CONFIG")
    if path:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"config file {path} must hold a mapping")
        data = _deep_update(data, loaded)
    data = _deep_update(data, _env_overrides(environ))
    data = _deep_update(data, overrides or {})
    return Settings.model_validate(data)

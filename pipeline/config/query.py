"""Settings of the query modes: result counts, context budgets, ranking weights."""

from __future__ import annotations

from pydantic import Field

from pipeline.config.section import Section


class QuerySettings(Section):
    top_k_units: int = 10
    top_k_entities: int = 10
    max_context_tokens: int = 8000
    text_unit_prop: float = 0.5
    community_prop: float = 0.2
    global_top_reports: int = 20
    global_dynamic_threshold: float = Field(
        1.0, description="global, level=None: descend into communities rated at least this"
    )
    lexical_weight: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="every mode's unit relevance = (1 - w) * cosine + w * top cosine * "
        "BM25 / top BM25 (pipeline/lexical/fusion.py); 0 ranks by the dense model alone",
    )
    answer_units: int = Field(
        10, ge=1, description="offline answers read the sentences of this many top text units"
    )
    answer_sentences: int = Field(3, ge=1, description="offline answers: sentences at most")
    answer_words: int = Field(80, ge=4, description="offline answers: words at most")
    local_dense_seeds: int = Field(3, description="top dense units that seed local PageRank")
    local_damping: float = Field(0.85, description="local PageRank continuation probability")
    local_graph_weight: float = Field(
        0.7,
        description="local ranking = w * (PageRank / max) ** 0.25 + (1 - w) * cosine",
    )
    local_context_tokens: int = Field(
        2500,
        ge=1,
        description="local: context budget in tokens; the ranked text units are paid for "
        "first (MuSiQue R@5 by budget: benchmarks/retrieval.py)",
    )
    expand_max_hops: int = Field(2, description="expand: graph hops from the vector seeds")
    expand_max_nodes: int = Field(60, description="expand: nodes kept after expansion")
    focus_budget_tokens: int = Field(2000, description="focus: token budget of the context")
    flow_max_nodes: int = Field(15, description="flow: entities in the context at most")
    flow_max_edges: int = Field(20, description="flow: relationships in the context at most")

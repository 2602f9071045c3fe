"""Settings of the graph stages: merged entity/relationship descriptions, Leiden communities
and their reports.
"""

from __future__ import annotations

from pydantic import Field

from pipeline.config.section import Section


class GraphSettings(Section):
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
        "communities_state.json of the index version), and a change of seed, max_cluster_size or "
        "max_levels recomputes; 0: always recompute",
    )
    # Measured on benchmarks/scale.py's corpus at 2,099 documents, 1 to 300 random documents
    # added or deleted, 3 samples each (pipeline.graph.merge_carry against the whole merge,
    # the best of 2 runs each, a shared 2-core machine): the touched rows' merge took
    # 0.23-0.44x the whole merge's time up to 22 % of the text units read, 0.5-1.05x
    # (median 0.8x) at 58-63 %, 0.9-1.15x at 74-78 % and 1.4-2.0x at 95-96 %. A hub
    # entity ("United States": 16 % of the units) is read whole whenever an edit names it,
    # so the share read, not the count of documents changed, is what the cost follows.
    incremental_merge_max_share: float = Field(
        0.6,
        description="re-runs: the entity merge recomputes only the entities and relationships "
        "an edit touched while the text units it reads for them are at most this fraction of "
        "the corpus's, and merges everything above it; 0: always merge everything",
    )


class ReportSettings(Section):
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

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
    # The share of the corpus' mentions (counted as text units per entity and relationship)
    # the touched rows are merged from. Measured on benchmarks/scale.py's corpus, 100
    # documents added, the touched rows merged from 29-33 % (hubs), their units ~all of the
    # corpus': the graph step took 1.9-2.1 s against the whole merge's 1.7 s at 2,099
    # documents, 3.9-4.0 against 5.4-5.5 s at 10k, 11.9 against 19.2 s at 40k; where the two
    # cost the same, fitted as a fixed part plus the merged share of the whole merge's, is
    # ~0.6 at 10k and ~0.7 at 40k (at 2k the whole merge is cheaper from ~0.3, by < 1 s).
    incremental_merge_max_share: float = Field(
        0.6,
        description="re-runs: the entity merge recomputes only the entities and relationships "
        "an edit touched while the mentions they are merged from (counted as their text units) "
        "are at most this fraction of the corpus's, and merges everything above it; 0: always "
        "merge everything",
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

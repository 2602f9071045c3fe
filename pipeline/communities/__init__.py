"""Communities: the entity graph in, hierarchical Leiden communities and their reports out.

`leiden` is the stage's entry: it decides whether a re-run carries the previous communities
over (`plan_communities`, `next_state`) and builds the `communities` table with `hierarchy`
(Leiden level by level, from scratch), `carry_over` (the previous hierarchy fitted to the
current graph) and `table` (hierarchy to rows with ids). `reports/` writes each community's
report: `reports.offline` extractively, `reports.with_llm` with an LLM, both into the
`community_reports` table (that package's docstring names its steps)."""

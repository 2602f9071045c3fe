"""Communities: the entity graph in, hierarchical Leiden communities and their reports out.

`leiden` is the stage's entry: it decides whether a re-run carries the previous communities
over (`plan_communities`, `next_state`) and builds the `communities` table with `hierarchy`
(Leiden level by level, from scratch), `carry_over` (the previous hierarchy fitted to the
current graph) and `table` (hierarchy to rows with ids). `reports` writes each community's
report extractively (offline: frames in `report_frames`, evidence sentences in
`report_mentions`, strings in `report_text`) and `reports_llm` with an LLM (prompt context in
`report_context`, answer schema and row in `report_answer`, reuse of remembered reports in
`report_memo`), both into the `community_reports` table."""

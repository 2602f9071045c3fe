"""Communities: the entity graph in, hierarchical Leiden communities and their reports out.

`leiden` clusters the graph level by level (and carries unchanged communities over from the
previous run); `reports` writes each community's report extractively (offline) and
`reports_llm` with an LLM, both into the `community_reports` table."""

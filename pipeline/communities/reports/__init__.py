"""Community reports: the communities, entities, relationships and text units in, one report
per community out (the `community_reports` table, GraphRAG's shape).

`offline` writes each report extractively, with no model: `gather_frames` gathers each
community's members, edges and rating, `find_evidence` finds the sentences naming its members,
`compose_text` composes the summary, findings and markdown, and `reuse_unchanged` keeps the
last run's text where nothing it was assembled from changed. `with_llm` writes them with an
LLM, bottom-up: `prompt_context` builds each prompt's context, `model_answer` holds the answer
schema and the row it becomes, and `memoize_reports` decides when a remembered report is kept
with no call."""

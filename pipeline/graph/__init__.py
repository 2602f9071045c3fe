"""The entity graph: per-unit triplets in, merged entities and relationships out.

`merge` folds the extractor's rows into one entity per (title, type) and one relationship per
pair, with weights, degrees and the text units they come from; `summarize_llm` (LLM mode)
condenses an entity's or relationship's many descriptions into one."""

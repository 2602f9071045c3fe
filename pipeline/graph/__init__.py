"""The entity graph: per-unit triplets in, merged entities and relationships out.

`mention_tables` reads the extracted tables; `merge` folds their rows into one entity per key and
one relationship per (source, target, type), with weights, degrees and the text units they
come from, using `titles` (display form and merge key of a title), `encode_strings` (strings
as integer codes, decoded a slice at a time) and `descriptions` (extractive descriptions from
evidence sentences); `summarize_llm` (LLM mode) condenses an entity's or relationship's many
descriptions into one."""

"""GraphRAG compatibility: the output contract of GraphRAG's readers, kept as data
(graphrag_schema.json), its check, and the columns and Lance names that meet it.

`contract` imports only the standard library and pyarrow, so that the compat benchmark can
use it from GraphRAG's own virtual environment (whose pins differ from ours)."""

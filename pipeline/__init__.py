"""docgraph's domain library (no Dagster import): raw documents in, a graph-RAG index out.

The packages follow the data, in DAG order: `ingest` (files to documents), `structure`
(documents to sections, content nodes, structure edges), `chunking` (to text units),
`extract` (to entity/relation rows), `graph` (merged entities and relationships),
`communities` (hierarchical Leiden communities and their reports), `vectors` (LanceDB
tables); `storage` writes, publishes and mirrors the output folder, and `query` reads it
(the command line and the HTTP API in front of it live above, in `app`); `pdf` reads PDFs
for `ingest` and `structure`. Shared by all: `config` (settings), `schemas` (every table's
columns), `ids`, `tokens`, `sentences`, `failures`, `progress`, `memory`; `llm` holds the
plumbing of LLM mode, `export` and `compat` the views for other tools.
"""

from pipeline import memory

memory.configure()  # before any module of this package imports polars (see pipeline.memory)

"""Every table's columns, declared once.

Parquet tables are pyarrow schemas; `conform` turns a polars frame into exactly that
schema (column order, types) and fails loudly on a missing column. Column names of the
semantic layer follow GraphRAG's outputs so its tools can read ours.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

_str = pa.string()
_i64 = pa.int64()
_f64 = pa.float64()
_strs = pa.list_(pa.string())

FINDING = pa.struct([("summary", _str), ("explanation", _str)])

DOCUMENTS = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("title", _str),
        ("source_path", _str),
        ("mime_type", _str),
        ("sha256", _str),
        ("byte_size", _i64),
        ("n_pages", _i64),
        ("language", _str),
        ("metadata", _str),  # JSON object
        ("text", _str),  # PDF pages are separated by "\f"
        ("creation_date", _str),  # ISO 8601, file mtime (UTC)
        ("warnings", _strs),
        # from the publications manifest (pipeline.ingest.publications); null when unmapped
        ("publication_id", _str),
        ("document_type", _str),  # MAIN | SUPPLEMENTAL | OTHER
        ("document_description", _str),
        ("document_language", _str),  # as declared; `language` is the detected one
        ("document_version", _str),
        # GraphRAG's documents columns (pipeline.compat): the document's text units, filled
        # by the chunks step; raw_data = the input's own fields (our metadata JSON)
        ("text_unit_ids", _strs),
        ("raw_data", _str),
    ]
)

# A publication of the manifest (publications.json / .jsonl beside the documents).
PUBLICATIONS = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("title", _str),
        ("abstract", _str),
        ("citation", _str),
        ("authors", _strs),
        ("date", _str),  # as written in the manifest (ISO 8601 or a year)
        ("source", _str),
        ("source_url", _str),
        ("uri", _str),
        ("document_ids", _strs),  # the indexed documents its file entries matched
    ]
)

# ---- structure layer ----------------------------------------------------------------------

POSITION = pa.struct(
    [
        ("page", _i64),  # 1-based PDF page (1 for text formats)
        ("page_label", _str),  # the logical page label ("iv", "12"), "" when unknown
        ("x0", _f64),
        ("y0", _f64),
        ("x1", _f64),
        ("y1", _f64),
    ]
)

SECTIONS = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("document_id", _str),
        ("parent_id", _str),  # null for the DOCUMENT root
        ("component_type", _str),  # DOCUMENT, CHAPTER, SECTION, ..., NOTE (a notebook note)
        ("title", _str),
        ("level", _i64),  # 0 = the document root
        ("seq", _i64),  # order among siblings
        ("path", _strs),  # titles from the root down to this section
        ("uri", _str),  # "<source_path>#<slug>" (a note's own uri for notebooks)
        ("page_start", _i64),
        ("page_end", _i64),
        ("metadata", _str),  # JSON object
    ]
)

CONTENT_NODES = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("document_id", _str),
        ("section_id", _str),
        ("node_type", _str),  # PARAGRAPH, HEADING, LIST_ITEM, TABLE, CODE, NOTE, ...
        ("text", _str),
        ("description", _str),
        ("seq_major", _i64),  # reading order in the document
        ("seq_minor", _i64),  # order of parts inside one logical unit
        ("positions", pa.list_(POSITION)),
        ("metadata", _str),  # JSON object
    ]
)

STRUCTURE_EDGES = pa.schema(
    [
        ("source_id", _str),
        ("target_id", _str),  # null for an unresolved link (reason in metadata)
        ("type", _str),  # CONTINUES, REFERENCES_NOTE, REFERS_TO, SAME_TOPIC, REIFIES, ...
        ("weight", _f64),
        ("marker_text", _str),
        ("metadata", _str),  # JSON object
    ]
)

# A link as its parser found it, before resolution across every shard's documents.
DOCUMENT_LINKS = pa.schema(
    [
        ("document_id", _str),
        ("source_id", _str),  # the content node (or section) holding the link
        ("href", _str),
        ("text", _str),
        ("kind", _str),  # inline, reference, wikilink, object, autoref, image
        ("type", _str),  # edge type when not REFERS_TO (REIFIES)
        ("line", _i64),
    ]
)

REJECTED_DOCUMENTS = pa.schema(
    [
        ("source_path", _str),
        ("sha256", _str),
        ("byte_size", _i64),
        ("stage", _str),  # load | chunk | extract ...
        ("reason", _str),
    ]
)

# A document a stage could not process as usual (pipeline.failures): why, and what was done.
DOCUMENT_FAILURES = pa.schema(
    [
        ("document_id", _str),
        ("source_path", _str),  # relative to the input folder
        ("stage", _str),  # structure | chunking
        ("reason", _str),  # never an absolute path
        ("fallback", _str),  # what the document got instead ("none": it has no rows)
    ]
)

TEXT_UNITS = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("text", _str),
        ("n_tokens", _i64),
        ("document_id", _str),
        ("section_id", _str),
        ("content_node_ids", _strs),
        ("pages", pa.list_(_i64)),
        ("seq", _i64),  # position of the unit inside its document
        ("entity_ids", _strs),
        ("relationship_ids", _strs),
        ("covariate_ids", _strs),  # GraphRAG's column; no claims are extracted: always []
    ]
)

EXTRACTED_ENTITIES = pa.schema(
    [
        ("text_unit_id", _str),
        ("title", _str),  # surface form as written
        ("type", _str),
        ("description", _str),  # evidence sentence
        ("extractor", _str),
        ("model", _str),
        ("prompt_hash", _str),
    ]
)

EXTRACTED_RELATIONSHIPS = pa.schema(
    [
        ("text_unit_id", _str),
        ("source", _str),  # surface forms
        ("target", _str),
        ("type", _str),
        ("description", _str),
        ("weight", _f64),
        ("extractor", _str),
        ("model", _str),
        ("prompt_hash", _str),
    ]
)

EXTRACTION_FAILURES = pa.schema(
    [
        ("text_unit_id", _str),
        ("document_id", _str),
        ("extractor", _str),
        ("reason", _str),
    ]
)

LLM_FAILURES = pa.schema(
    [
        ("stage", _str),  # summarize | report
        ("item_id", _str),  # entity/relationship id, or community number
        ("reason", _str),
    ]
)

ENTITIES = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("title", _str),  # normalised title: the merge key
        ("type", _str),
        ("description", _str),
        ("aliases", _strs),
        ("text_unit_ids", _strs),
        ("frequency", _i64),
        ("degree", _i64),
    ]
)

RELATIONSHIPS = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("source", _str),  # entity titles, as GraphRAG
        ("target", _str),
        ("source_id", _str),
        ("target_id", _str),
        ("type", _str),
        ("description", _str),
        ("weight", _f64),
        ("combined_degree", _i64),
        ("text_unit_ids", _strs),
    ]
)

COMMUNITIES = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("community", _i64),
        ("level", _i64),
        ("parent", _i64),  # -1 at the top level
        ("children", pa.list_(_i64)),
        ("title", _str),
        ("entity_ids", _strs),
        ("relationship_ids", _strs),
        ("text_unit_ids", _strs),
        ("size", _i64),
        ("period", _str),
    ]
)

COMMUNITY_REPORTS = pa.schema(
    [
        ("id", _str),
        ("human_readable_id", _i64),
        ("community", _i64),
        ("level", _i64),
        ("parent", _i64),
        ("children", pa.list_(_i64)),
        ("title", _str),
        ("summary", _str),
        ("rating", _f64),
        ("rank", _f64),  # = rating, under GraphRAG's name (its readers need `rank`)
        ("rating_explanation", _str),
        ("findings", pa.list_(FINDING)),
        ("full_content", _str),
        ("full_content_json", _str),
        ("size", _i64),
        ("period", _str),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "documents": DOCUMENTS,
    "rejected_documents": REJECTED_DOCUMENTS,
    "publications": PUBLICATIONS,
    "publication_failures": DOCUMENT_FAILURES,  # manifest rows skipped, and why
    "sections": SECTIONS,
    "content_nodes": CONTENT_NODES,
    "document_edges": STRUCTURE_EDGES,  # per shard: edges within documents
    "document_links": DOCUMENT_LINKS,  # per shard: links to resolve across the corpus
    "structure_edges": STRUCTURE_EDGES,  # document_edges + every resolved link
    "structure_failures": DOCUMENT_FAILURES,  # documents whose parser fell back
    "same_topic_edges": STRUCTURE_EDGES,  # SAME_TOPIC edges, computed from embeddings later
    "chunks": TEXT_UNITS,  # text units before extraction fills entity/relationship ids
    "chunk_failures": DOCUMENT_FAILURES,  # documents chunked by a fallback, or not at all
    "text_units": TEXT_UNITS,
    "extracted_entities": EXTRACTED_ENTITIES,
    "extracted_relationships": EXTRACTED_RELATIONSHIPS,
    "extraction_failures": EXTRACTION_FAILURES,
    "summary_failures": LLM_FAILURES,  # LLM mode: summaries that kept the extractive text
    "report_failures": LLM_FAILURES,  # LLM mode: reports that stayed extractive
    "entities": ENTITIES,
    "relationships": RELATIONSHIPS,
    "communities": COMMUNITIES,
    "community_reports": COMMUNITY_REPORTS,
}

# Tables of DESIGN §3's semantic layer that a run over a non-empty corpus must fill.
SEMANTIC_TABLES = (
    "documents",
    "text_units",
    "extracted_entities",
    "extracted_relationships",
    "entities",
    "relationships",
    "communities",
    "community_reports",
)


def vector_schema(dim: int, extra: list[tuple[str, pa.DataType]] | None = None) -> pa.Schema:
    """Arrow schema of a LanceDB table: id, text (full-text indexed), vector, extras."""
    fields = [("id", _str), ("text", _str), ("vector", pa.list_(pa.float32(), dim))]
    return pa.schema(fields + list(extra or []))


# Extra columns per Lance table, kept next to the Parquet schemas they mirror.
VECTOR_TABLES: dict[str, list[tuple[str, pa.DataType]]] = {
    "text_units": [("document_id", _str)],
    "entities": [("title", _str), ("type", _str)],
    "relationships": [("source", _str), ("target", _str)],
    "community_reports": [("community", _i64), ("level", _i64)],
    # node_type etc. let node search pre-filter ("only TABLE nodes")
    "content_nodes": [("node_type", _str), ("document_id", _str), ("section_id", _str)],
}
# Last columns of every Lance table an index run writes: which model made the vectors, when.
VECTOR_PROVENANCE: list[tuple[str, pa.DataType]] = [
    ("embedding_model", _str),
    ("created_at", pa.timestamp("us", tz="UTC")),
]


# Columns added after a table's first release, filled with nulls (lists: []) when a frame
# lacks them (frames built by older code and tests); any other missing column is an error.
OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "documents": (
        "publication_id",
        "document_type",
        "document_description",
        "document_language",
        "document_version",
        "text_unit_ids",
        "raw_data",
    ),
    "chunks": ("covariate_ids",),
    "text_units": ("covariate_ids",),
}
# Columns that copy another one when a frame lacks them (GraphRAG's name for ours).
ALIAS_COLUMNS: dict[str, dict[str, str]] = {"community_reports": {"rank": "rating"}}


def _fill(typ: pa.DataType) -> pl.Expr:
    """An absent optional column's value: [] for a list column, else null."""
    if pa.types.is_list(typ):
        return pl.lit([], dtype=pl.List(pl.Utf8))
    return pl.lit(None, dtype=pl.Utf8)


def conform(df: pl.DataFrame, name: str) -> pa.Table:
    """The frame as an Arrow table with exactly table `name`'s schema."""
    schema = TABLES[name]
    absent = [c for c in OPTIONAL_COLUMNS.get(name, ()) if c not in df.columns]
    df = df.with_columns(_fill(schema.field(c).type).alias(c) for c in absent)
    aliases = ALIAS_COLUMNS.get(name, {})
    df = df.with_columns(pl.col(s).alias(c) for c, s in aliases.items() if c not in df.columns)
    missing = [f.name for f in schema if f.name not in df.columns]
    if missing:
        raise ValueError(f"table {name!r} is missing columns {missing}")
    return df.select(schema.names).to_arrow().cast(schema)


def empty(name: str) -> pl.DataFrame:
    return pl.from_arrow(TABLES[name].empty_table())  # type: ignore[return-value]

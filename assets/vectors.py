"""LanceDB vector tables (explicit Arrow schemas, full-text index) for search.

Text units are embedded first, a shard at a time (chunk_embeddings, into the embedding
cache); content node, entity, relationship and report vectors are derived from them by
default (see pipeline.vectors.lance), hence the chain of dependencies. The Lance tables are
two steps (pipeline.vectors.build_tables), each table an asset of its own: the text units'
and content nodes' (unit_vector_tables), then the graph's (vector_tables).
"""

import time
from collections.abc import Iterator

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    AssetSpec,
    MaterializeResult,
    Output,
    asset,
    multi_asset,
)

from assets.metadata import LANCE_KINDS, PARQUET_KINDS, frame_metadata, lance_metadata
from assets.shards import FULL_TAG, SHARD_POLICY, shard_partitions, tail_changes
from pipeline import schemas
from pipeline.compat.lance_names import write_alias
from pipeline.storage import changed_rows, shard_files, store
from pipeline.storage.run_changes import base_version
from pipeline.vectors.build_tables import NO_BASE, VECTOR_TABLES, build_vector_tables_at_once
from pipeline.vectors.lance import read_vectors
from pipeline.vectors.static_titles import static_titles
from pipeline.vectors.texts import embedding_text
from pipeline.vectors.topic_carry import same_topic_run, write_state
from resources import DocgraphConfig, EmbedderResource, output_root_metadata
from resources.output import run_dir
from resources.side_lane import SIDE_TAG


def _table_result(
    context: AssetExecutionContext,
    docgraph: DocgraphConfig,
    emb,
    source: str,
    rows: int,
    started: float,
    outcome: dict | None = None,
) -> MaterializeResult:
    """The materialization of Lance table `source` (`rows` written; `outcome`: rows carried
    over and recomputed, pipeline.vectors.build_tables.carry_outcome), with its
    GraphRAG-named alias made (hard links: no copy, for GraphRAG's LanceDB store)."""
    settings = docgraph.settings()
    folder = run_dir(docgraph, context)
    alias = write_alias(store.resolve(folder) / store.LANCE_DIR, source)
    titles = {}
    if source == "entities" and settings.embedding.entity_vectors == "name+context":
        static = static_titles(emb, settings.embedding) is not None
        titles = {"title_vectors": "static" if static else "model"}
    return MaterializeResult(
        asset_key=f"{source}_vectors",
        metadata={
            "rows": rows,
            **(outcome or {}),
            **titles,
            **({"graphrag_name": alias} if alias else {}),
            "model": emb.model_id,
            "embedding_cache_hits": emb.hits,
            "embedding_cache_misses": emb.misses,
            "elapsed_s": round(time.perf_counter() - started, 3),
            **output_root_metadata(docgraph),
            **lance_metadata(folder, source),
        },
    )


# Texts per embedding call: one call per shard paid a cache scan and a short last batch
# each; whole shards go together up to this many texts (~10 MB of text, 12 MB of vectors).
EMBED_TEXTS = 8192


def chunk_embeddings_asset(n_shards: int) -> AssetsDefinition:
    @asset(
        name="chunk_embeddings",
        deps=["chunks"],
        # the chunks step queued these texts on the worker (EmbedderResource.prefetch), which
        # embeds them while the steps that do not need them run: this step waits for them on
        # the side lane (resources.side_lane), or, on an executor without one, after every
        # step that does not need it (its priority)
        op_tags={"dagster/priority": "-1", SIDE_TAG: "true"},
        partitions_def=shard_partitions(n_shards),
        backfill_policy=SHARD_POLICY,
        group_name="vectors",
        description="Each shard's chunks embedded into the embedding cache (cache/embeddings), "
        "from which the text_units vector table and the derived vectors are built.",
        kinds=set(PARQUET_KINDS),  # the cache: polars frames of vectors in Parquet files
    )
    def chunk_embeddings(
        context: AssetExecutionContext, docgraph: DocgraphConfig, embedder: EmbedderResource
    ) -> MaterializeResult:
        started = time.perf_counter()
        folder = run_dir(docgraph, context)
        emb = embedder.get()
        # the vector steps after this one write Lance tables and derive the entities' title
        # vectors from token states: import and load those while the worker embeds these
        # texts, not in the run's tail (lancedb only where tables are likely made whole)
        full = context.run.tags.get(FULL_TAG) == "1"
        store.import_lance(writers=full or base_version(docgraph.settings().output_dir) is None)
        static_titles(emb, docgraph.settings().embedding)
        texts: list[str] = []
        for key in context.partition_keys:  # shards' texts together, EMBED_TEXTS at a time
            texts += embedding_text("text_units", shard_files.read_shard(folder, "chunks", key))
            if len(texts) >= EMBED_TEXTS:
                emb.embed(texts)
                texts = []
        emb.embed(texts)
        elapsed = time.perf_counter() - started
        return MaterializeResult(
            metadata={
                "model": emb.model_id,
                "embedded": emb.misses,
                "cache_hits": emb.hits,
                "shards": len(context.partition_keys),
                "elapsed_s": round(elapsed, 3),
                "texts_per_s": round((emb.hits + emb.misses) / max(elapsed, 1e-9), 1),
                **output_root_metadata(docgraph),
            }
        )

    return chunk_embeddings


# The tables each Lance table is made from (besides the ones it reads, its vectors come
# from the embedding cache, filled by chunk_embeddings, or from the earlier vector tables).
_VECTOR_DEPS = {
    "text_units": ["text_units", "chunk_embeddings"],
    "content_nodes": ["content_nodes", "text_units", "text_units_vectors"],
    "entities": ["entities", "text_units_vectors"],
    "community_reports": ["community_reports", "communities", "entities_vectors"],
    "relationships": ["relationships", "text_units_vectors", "entities_vectors"],
}
_DESCRIPTIONS = {
    "content_nodes": "LanceDB table `content_nodes` (node_type, section): node search, "
    "pre-filtered."
}


# The Lance tables in two steps: those made from the text units alone, which nothing on the
# graph's path waits for until the graph's own vector tables (they run on the side lane,
# beside the communities and reports: resources.side_lane), and the graph's.
UNIT_VECTOR_TABLES = ("text_units", "content_nodes")
GRAPH_VECTOR_TABLES = tuple(t for t in VECTOR_TABLES if t not in UNIT_VECTOR_TABLES)


def vector_tables_step(name: str, sources: tuple[str, ...], op_tags: dict | None = None):
    """The step making the Lance tables `sources` (of VECTOR_TABLES), each an asset."""

    @multi_asset(
        name=name,
        specs=[
            AssetSpec(
                f"{source}_vectors",
                # the step reads each table itself (INPUT_COLUMNS), just when it makes its own
                deps=_VECTOR_DEPS[source],
                group_name="vectors",
                description=_DESCRIPTIONS.get(
                    source, f"LanceDB table `{source}`: vectors + full-text index."
                ),
                kinds=set(LANCE_KINDS),
                skippable=True,
            )
            for source in sources
        ],
        can_subset=True,
        op_tags=op_tags,
    )
    def _step(
        context: AssetExecutionContext, docgraph: DocgraphConfig, embedder: EmbedderResource
    ) -> Iterator[MaterializeResult]:
        """Its Lance tables, written side by side while they are small
        (pipeline.vectors.build_tables)."""
        started = time.perf_counter()
        emb = embedder.get()
        folder = run_dir(docgraph, context)
        keys = context.selected_asset_keys
        names = [key.to_user_string().removesuffix("_vectors") for key in keys]
        settings = docgraph.settings().embedding
        # rows carried over from the version the run started from (its tables are the
        # staging folder's until rewritten); the row digests say which rows changed
        base = base_version(docgraph.settings().output_dir)
        whole = "a full run (--full)" if context.run.tags.get(FULL_TAG) == "1" else None
        whole = NO_BASE if base is None else whole
        outcomes: dict[str, dict] = {}
        # the rows the graph step merged again (pipeline.storage.changed_rows)
        listed = None if whole else changed_rows.read(folder, context.run.run_id, base)
        built = build_vector_tables_at_once(
            folder, names, emb, settings, whole=whole, outcomes=outcomes, base=base, listed=listed
        )
        for source, rows in built:
            yield _table_result(context, docgraph, emb, source, rows, started, outcomes[source])

    return _step


unit_vector_tables = vector_tables_step(
    "unit_vector_tables", UNIT_VECTOR_TABLES, {SIDE_TAG: "true"}
)
vector_tables = vector_tables_step("vector_tables", GRAPH_VECTOR_TABLES)


@asset(
    deps=["text_units_vectors", "sections", "content_nodes", "text_units"],
    group_name="structure",
    description="SAME_TOPIC edges between sections of different documents, by embedding.",
    kinds=set(PARQUET_KINDS),
    # only published_index waits for it: on the side lane after the vector tables
    op_tags={SIDE_TAG: "true", "dagster/priority": "-1"},
)
def same_topic_edges(
    context: AssetExecutionContext, docgraph: DocgraphConfig, embedder: EmbedderResource
) -> Output[pl.DataFrame]:
    started = time.perf_counter()
    settings = docgraph.settings()
    folder = run_dir(docgraph, context)
    by_units = settings.same_topic.vectors == "units"
    # only what it reads: the text of every node and unit is most of their bytes
    sections = store.read_table(folder, "sections", ["id", "document_id"] if by_units else None)
    nodes = (
        schemas.empty("content_nodes") if by_units else store.read_table(folder, "content_nodes")
    )
    # the sections an edit touched are searched again, the other lists carried over from
    # the version the run started from (pipeline.vectors.topic_carry)
    changes = tail_changes(context, settings, folder)
    run = same_topic_run(
        sections,
        nodes,
        embedder.get(),
        settings.same_topic,
        changes,
        store.read_table(folder, "text_units", ["id", "section_id"]),
        lambda: read_vectors(folder, "text_units"),
    )
    # before the table is written: a run that fails after is never published
    write_state(store.resolve(folder), run.state)
    return Output(
        run.edges,
        metadata=frame_metadata(
            run.edges,
            started,
            "same_topic_edges",
            min_similarity=settings.same_topic.min_similarity,
            max_connections=settings.same_topic.max_connections,
            cross_doc_only=settings.same_topic.cross_doc_only,
            **run.meta,
        ),
    )


vector_assets = [
    unit_vector_tables,
    vector_tables,
    same_topic_edges,
]

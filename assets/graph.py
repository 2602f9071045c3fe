"""The entity graph over the whole corpus: every shard's mentions merged into entities,
relationships and text units (pipeline.graph), their descriptions summarised in LLM mode."""

import time

import polars as pl
from dagster import AssetExecutionContext, AssetOut, Output, multi_asset

from assets.metadata import (
    PARQUET_KINDS,
    counts_table,
    degree_summary,
    frame_metadata,
    llm_delta,
)
from pipeline.failures import stage_failures_frame
from pipeline.graph.mention_tables import read_mentions
from pipeline.graph.merge import merge_graph
from pipeline.graph.summarize_llm import summarize_descriptions
from pipeline.graph.titles import unit_titles
from pipeline.ids import carry_short_ids
from pipeline.storage import store
from pipeline.vectors.lance import entity_model_texts
from resources import DocgraphConfig, EmbedderResource, LlmResource
from resources.llm import llm_mode
from resources.output import run_dir


@multi_asset(
    deps=["chunks", "extracted_entities", "extracted_relationships"],
    outs={
        "entities": AssetOut(
            description="Merged entities: normalised titles, aliases, summaries.",
            kinds=set(PARQUET_KINDS),
        ),
        "relationships": AssetOut(
            description="Merged relationships between entities.", kinds=set(PARQUET_KINDS)
        ),
        "text_units": AssetOut(
            description="Chunks with the entity and relationship ids they hold.",
            kinds=set(PARQUET_KINDS),
        ),
        "summary_failures": AssetOut(
            description="LLM mode: summaries that failed, and why.", kinds=set(PARQUET_KINDS)
        ),
    },
    group_name="semantic",
)
def graph(
    context: AssetExecutionContext,
    docgraph: DocgraphConfig,
    llm: LlmResource,
    embedder: EmbedderResource,
):
    started = time.perf_counter()
    settings = docgraph.settings()
    folder = run_dir(docgraph, context)
    # in path order, as one shard would hold them: what follows (numbering, ties broken by
    # row order) does not depend on the shard count
    paths = store.read_table(folder, "documents", ["id", "source_path"])
    chunks = (
        store.read_table(folder, "chunks")
        .join(paths, left_on="document_id", right_on="id", how="left", maintain_order="left")
        .sort("source_path", maintain_order=True)
        .drop("source_path")
    )
    extracted_entities, extracted_relationships = read_mentions(folder)
    homes = unit_titles(
        chunks.select("id", "document_id", "section_id", "seq"),
        store.read_table(folder, "documents", ["id", "title"]),
        store.read_table(folder, "sections", ["id", "path"]),
    )
    ents, rels, units = merge_graph(
        extracted_entities, extracted_relationships, chunks, settings.graph, homes
    )
    del chunks, homes  # held while the tables are written, else (one 151 MB file: 100 MB)
    # entities and relationships keep their short ids across runs (what reports cite)
    short = ["id", "human_readable_id"]
    ents = carry_short_ids(ents, store.read_table(folder, "entities", short))
    rels = carry_short_ids(rels, store.read_table(folder, "relationships", short))
    # chunks are numbered within their shard; a text unit's short id (cited in query
    # contexts as [n]) is numbered over the corpus, in path then chunk order
    units = units.with_columns(human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64))
    failures, llm_meta = [], {}
    if llm_mode(settings):
        client = llm.get()
        before = client.metadata()
        ents, rels, failures = summarize_descriptions(
            ents, rels, extracted_entities, extracted_relationships, client, settings.graph
        )
        llm_meta = llm_delta(before, client.metadata())
    del extracted_entities, extracted_relationships  # 4.3M + 5.4M rows of one 151 MB file
    # entities_vectors comes after the chunk embeddings: the worker embeds these next
    titles = entity_model_texts(ents, embedder.get(), settings.embedding)
    prefetched = embedder.prefetch(context, titles, "entities_vectors")
    by_type = dict(ents.group_by("type").len().sort("len", descending=True).iter_rows())
    degrees = degree_summary(ents, rels)
    by_type_table = counts_table(by_type, ("type", "entities"))
    yield Output(
        ents,
        output_name="entities",
        metadata=frame_metadata(
            ents, started, "entities", by_type=by_type_table, prefetched=prefetched, **degrees
        ),
    )
    # each table let go once written: the text units' copy into Arrow as they are written is
    # the step's peak (one 151 MB file: +0.6 GB), and these were 0.3 GB more beside it
    del ents
    yield Output(
        rels,
        output_name="relationships",
        metadata=frame_metadata(rels, started, "relationships", **degrees, **llm_meta),
    )
    del rels
    # in one piece: its id lists come a slice at a time, and Arrow took +0.15 GB more to
    # convert them so (one 151 MB file) than to convert them whole
    units = units.rechunk()
    yield Output(
        units, output_name="text_units", metadata=frame_metadata(units, started, "text_units")
    )
    fails = stage_failures_frame("summarize", [(f["id"], f["reason"]) for f in failures])
    yield Output(
        fails,
        output_name="summary_failures",
        metadata=frame_metadata(fails, started, "summary_failures"),
    )

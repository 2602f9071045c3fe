"""The entity graph over the whole corpus: every shard's mentions merged into entities,
relationships and text units (pipeline.graph), their descriptions summarised in LLM mode.
A re-run merges again only the rows its changed shards touched and keeps the others from
the version it started from (pipeline.graph.merge_carry), unless too much changed; the
metadata says which (`incremental`, `rows_recomputed`, `rows_carried`)."""

import dataclasses
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
from assets.shards import tail_changes
from pipeline.config import Settings
from pipeline.failures import stage_failures_frame
from pipeline.graph.merge_carry import Recomputed, merge_whole, path_ordered_chunks, recompute
from pipeline.graph.merge_splice import LISTS, splice
from pipeline.graph.summarize_llm import summarize_descriptions
from pipeline.ids import carry_short_ids
from pipeline.storage import changed_rows, store
from pipeline.storage.run_changes import RunChanges
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
    chunks = path_ordered_chunks(folder)
    changes = tail_changes(context, settings, folder)
    part = _carried_rows(changes, chunks, settings)
    if isinstance(part, str):
        ents, rels, units, failures, llm_meta = _whole(folder, chunks, settings, llm)
        recomputed, counts = ents, {"incremental": "whole", "incremental_reason": part}
        counts = {
            n: {**counts, "rows_recomputed": f.height, "rows_carried": 0}
            for n, f in (("entities", ents), ("relationships", rels), ("text_units", units))
        }
        keys = None
    else:
        added = list(changes.of("documents").added)
        ents, rels, units, failures, llm_meta, counts, keys = _carried(
            part, chunks, added, settings, llm
        )
        recomputed = ents.filter(pl.col("id").is_in(part.entities.get_column("id").to_list()))
    del part  # the base version's tables, held by the plan: not beside the writes
    # the rows later steps may find changed (the others are the base version's), before the
    # tables it describes are written
    changed_rows.write(folder, context.run.run_id, changes.base, keys)
    del chunks  # held while the tables are written, else (one 151 MB file: 100 MB)
    # chunks are numbered within their shard; a text unit's short id (cited in query
    # contexts as [n]) is numbered over the corpus, in path then chunk order
    units = units.with_columns(human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64))
    # entities_vectors comes after the chunk embeddings: the worker embeds these next (the
    # rows merged again: the others' are in the embedding cache since the base version)
    titles = entity_model_texts(recomputed, embedder.get(), settings.embedding)
    del recomputed
    prefetched = embedder.prefetch(context, titles, "entities_vectors")
    by_type = dict(ents.group_by("type").len().sort("len", descending=True).iter_rows())
    degrees = degree_summary(ents)
    metadata = {
        "entities": frame_metadata(
            ents,
            started,
            "entities",
            by_type=counts_table(by_type, ("type", "entities")),
            prefetched=prefetched,
            **degrees,
            **counts["entities"],
        ),
        "relationships": frame_metadata(
            rels, started, "relationships", **degrees, **llm_meta, **counts["relationships"]
        ),
        "text_units": frame_metadata(units, started, "text_units", **counts["text_units"]),
    }
    # the largest first, beside the other two (store.write_tables); the text units in one
    # piece: their id lists come a slice at a time, and Arrow took +0.15 GB more to convert
    # them so (one 151 MB file) than to convert them whole
    tables = {"relationships": rels, "entities": ents, "text_units": units.rechunk()}
    del ents, rels, units
    for name, path in store.write_tables(folder, tables).items():
        yield Output(path, output_name=name, metadata=metadata[name])
    fails = stage_failures_frame("summarize", [(f["id"], f["reason"]) for f in failures])
    yield Output(
        fails,
        output_name="summary_failures",
        metadata=frame_metadata(fails, started, "summary_failures"),
    )


def _carried_rows(
    changes: RunChanges, chunks: pl.DataFrame, settings: Settings
) -> Recomputed | str:
    """The rows the run touched, merged again (pipeline.graph.merge_carry); or why the whole
    merge runs."""
    if changes.whole is not None:
        return changes.whole
    if settings.graph.incremental_merge_max_share <= 0:
        return "graph.incremental_merge_max_share is 0"
    assert changes.base is not None
    if llm_mode(settings) and store.table_rows(changes.base, "summary_failures"):
        return "the base version holds summary failures to retry"
    return recompute(changes, chunks, settings.graph, settings.graph.incremental_merge_max_share)


def _whole(folder, chunks: pl.DataFrame, settings: Settings, llm: LlmResource):
    """Every mention merged: (entities, relationships, text_units, failures, llm metadata)."""
    ents, rels, units, mentions = merge_whole(folder, chunks, settings.graph)
    # entities and relationships keep their short ids across runs (what reports cite)
    short = ["id", "human_readable_id"]
    ents = carry_short_ids(ents, store.read_table(folder, "entities", short))
    rels = carry_short_ids(rels, store.read_table(folder, "relationships", short))
    failures, llm_meta = [], {}
    if llm_mode(settings):
        client = llm.get()
        before = client.metadata()
        ents, rels, failures = summarize_descriptions(ents, rels, *mentions, client, settings.graph)
        llm_meta = llm_delta(before, client.metadata())
    return ents, rels, units, failures, llm_meta


def _carried(
    part: Recomputed, chunks: pl.DataFrame, added: list[str], settings: Settings, llm: LlmResource
):
    """The touched rows (their summaries in LLM mode) over the base version's:
    (entities, relationships, text_units, failures, llm metadata, metadata per table, and
    per table the keys of the rows that may differ from the base's: pipeline.storage.
    changed_rows)."""
    failures, llm_meta = [], {}
    if llm_mode(settings):
        client = llm.get()
        before = client.metadata()
        ents, rels, failures = summarize_descriptions(
            part.entities, part.relationships, *part.mentions, client, settings.graph
        )
        part = dataclasses.replace(part, entities=ents, relationships=rels)
        llm_meta = llm_delta(before, client.metadata())
    assert part.base is not None
    base_lists = store.read_table(part.base, "text_units", ["id", *LISTS])
    ents, rels, units, counts, units_redone = splice(part, chunks, base_lists, added)
    short = ["id", "human_readable_id"]
    ents = carry_short_ids(ents, part.base_entities.select(short))
    rels = carry_short_ids(rels, part.base_relationships.select(short))
    reason = f"{part.units_read:,} text units' mentions read"
    meta = {
        n: {"incremental": "carried", "incremental_reason": reason, **c} for n, c in counts.items()
    }
    keys = {"entities": part.ids, "relationships": part.rids, "text_units": units_redone}
    return ents, rels, units, failures, llm_meta, meta, keys

"""The structure layer: sections, content nodes and edges of every document, shard by
shard; links between documents are resolved once every shard is parsed (structure_edges)."""

import time

import polars as pl
from dagster import AssetExecutionContext, MetadataValue, Output, asset, multi_asset

from assets.metadata import (
    PARQUET_KINDS,
    counts_table,
    failures_md,
    frame_metadata,
    link_resolution,
)
from assets.shards import (
    SHARD_POLICY,
    run_shards,
    shard_carry,
    shard_partitions,
    specs,
    tail_changes,
)
from pipeline import schemas
from pipeline.failures import failures_frame
from pipeline.storage import shard_files, store
from pipeline.structure import build_structure
from pipeline.structure.build import carry_structure
from pipeline.structure.link_carry import link_edges, write_sidecar
from resources import DocgraphConfig
from resources.output import run_dir

TABLES = {
    "sections": "Section tree of every document (DOCUMENT root).",
    "content_nodes": "Paragraphs, headings, tables, notes… in order.",
    "document_edges": "Edges within each document: notes, captions, continuations, "
    "cross-references.",
    "document_links": "Links as their parser found them, resolved by structure_edges.",
    "structure_failures": "Documents whose parser failed: reason, and the fallback they got.",
}


def structure_asset(n_shards: int):
    @multi_asset(
        name="document_structure",
        specs=specs("structure", TABLES, ["documents"]),
        partitions_def=shard_partitions(n_shards),
        backfill_policy=SHARD_POLICY,
    )
    def document_structure(context: AssetExecutionContext, docgraph: DocgraphConfig):
        from pipeline.pdf.once import taken

        settings = docgraph.settings()
        folder = run_dir(docgraph, context)
        stats: dict[str, float] = {}
        notes: list[str] = []
        node_types: dict[str, int] = {}
        failed: list[pl.DataFrame] = []

        carry = shard_carry(context, settings)  # unchanged documents: the base's rows

        def build(key: str, documents: pl.DataFrame) -> dict[str, pl.DataFrame]:
            built = build_structure(
                documents,
                settings.input_dir,
                settings.structure,
                resolve_links=False,
                parsed=taken(folder, key, settings.structure),  # the documents step's PDFs
            )
            for name, value in built.stats.items():
                stats[name] = stats.get(name, 0.0) + value
            for path, found in built.warnings.items():
                for note in found:
                    context.log.warning(f"{path}: {note}")
                notes.append(f"- {path}: {'; '.join(found)}")
            return {
                "sections": built.sections,
                "content_nodes": built.content_nodes,
                "document_edges": built.structure_edges,
                "document_links": pl.from_arrow(
                    schemas.pa.Table.from_pylist(built.links, schema=schemas.DOCUMENT_LINKS)
                ),
                "structure_failures": failures_frame(built.failures, "structure_failures"),
            }

        def parse(key: str) -> dict[str, pl.DataFrame]:
            documents = shard_files.read_shard(folder, "documents", key)
            frames = carry_structure(carry, key, documents, lambda docs: build(key, docs))
            for kind, count in frames["content_nodes"].group_by("node_type").len().iter_rows():
                node_types[kind] = node_types.get(kind, 0) + count
            failed.append(frames["structure_failures"])
            return frames

        yield from run_shards(
            context,
            folder,
            TABLES,
            parse,
            lambda: {
                "warnings": MetadataValue.md("\n".join(notes[:200]) or "none"),
                "by_type": counts_table(
                    dict(sorted(node_types.items(), key=lambda kv: -kv[1])), ("type", "nodes")
                ),
                "pdf_tables": settings.structure.pdf_tables,
                "failures": failures_md(
                    pl.concat(failed) if failed else failures_frame([], "structure_failures")
                ),
                **{k: round(v, 3) for k, v in stats.items()},
            },
            carry,
        )

    return document_structure


@asset(
    deps=["documents", "sections", "document_edges", "document_links"],
    group_name="structure",
    description="Every structure edge: within documents, and links resolved across all shards.",
    kinds=set(PARQUET_KINDS),
)
def structure_edges(
    context: AssetExecutionContext, docgraph: DocgraphConfig
) -> Output[pl.DataFrame]:
    started = time.perf_counter()
    folder = run_dir(docgraph, context)
    settings = docgraph.settings()
    # links of changed documents, and those a changed document may resolve differently, are
    # resolved again; the others carried over from the run's base version
    changes = tail_changes(context, settings, folder)
    run = link_edges(folder, changes)
    write_sidecar(store.resolve(folder), run.sidecar)  # before the table: see same_topic
    edges = pl.concat([store.read_table(folder, "document_edges"), run.edges])
    edge_types = dict(edges.group_by("type").len().sort("len", descending=True).iter_rows())
    return Output(
        edges,
        metadata=frame_metadata(
            edges,
            started,
            "structure_edges",
            by_type=counts_table(edge_types, ("type", "edges")),
            **link_resolution(edges),
            **run.meta,
        ),
    )

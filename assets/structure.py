"""The structure layer: sections, content nodes and structure edges of every document."""

import time

import polars as pl
from dagster import AssetExecutionContext, AssetOut, MetadataValue, Output, multi_asset

from assets.metadata import counts_md, frame_metadata, markdown_preview
from pipeline.failures import failures_frame
from pipeline.structure import build_structure
from resources import DocgraphConfig


def link_resolution(edges: pl.DataFrame) -> dict[str, float | int]:
    links = edges.filter(pl.col("type") == "REFERS_TO")
    resolved = links.filter(pl.col("target_id").is_not_null()).height
    rate = resolved / links.height if links.height else 1.0
    return {"links": links.height, "links_resolved": resolved, "link_resolution_rate": rate}


@multi_asset(
    outs={
        "sections": AssetOut(description="Section tree of every document (DOCUMENT root)."),
        "content_nodes": AssetOut(description="Paragraphs, headings, tables, notes… in order."),
        "structure_edges": AssetOut(description="Links, notes, captions, continuations."),
        "structure_failures": AssetOut(
            description="Documents whose parser failed: reason, and the fallback they got."
        ),
    },
    deps=["documents"],
    group_name="structure",
)
def document_structure(
    context: AssetExecutionContext, docgraph: DocgraphConfig, documents: pl.DataFrame
):
    started = time.perf_counter()
    settings = docgraph.settings()
    stats: dict[str, float] = {}
    rows: list[dict] = []
    sections, nodes, edges, warnings = build_structure(
        documents, settings.input_dir, settings.structure, stats, rows
    )
    failures = failures_frame(rows, "structure_failures")
    for path, notes in warnings.items():
        for note in notes:
            context.log.warning(f"{path}: {note}")
    node_types = dict(nodes.group_by("node_type").len().sort("len", descending=True).iter_rows())
    edge_types = dict(edges.group_by("type").len().sort("len", descending=True).iter_rows())
    yield Output(
        sections,
        output_name="sections",
        metadata=frame_metadata(
            sections,
            started,
            warnings=MetadataValue.md(
                "\n".join(f"- {p}: {'; '.join(w)}" for p, w in warnings.items()) or "none"
            ),
        ),
    )
    yield Output(
        nodes,
        output_name="content_nodes",
        metadata=frame_metadata(
            nodes,
            started,
            by_type=counts_md(node_types, ("type", "nodes")),
            pdf_tables=settings.structure.pdf_tables,
            **{k: round(v, 3) for k, v in stats.items()},
        ),
    )
    yield Output(
        edges,
        output_name="structure_edges",
        metadata=frame_metadata(
            edges,
            started,
            by_type=counts_md(edge_types, ("type", "edges")),
            **link_resolution(edges),
        ),
    )
    yield Output(
        failures,
        output_name="structure_failures",
        metadata=frame_metadata(failures, started, failures=failures_md(failures)),
    )


def failures_md(failures: pl.DataFrame) -> MetadataValue:
    """Every failed document (up to 100) with its stage, reason and fallback."""
    cols = failures.select("source_path", "stage", "reason", "fallback")
    return MetadataValue.md(markdown_preview(cols, n=100, width=200) if cols.height else "none")

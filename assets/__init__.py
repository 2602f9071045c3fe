"""Thin Dagster assets: read upstream tables, call pipeline/, write, attach metadata."""

from assets.checks import integrity_checks
from assets.ingest import documents
from assets.publish import published_index_asset
from assets.semantic import chunks, communities, community_reports, extracted_graph, graph
from assets.structure import document_structure
from assets.vectors import vector_assets

index_assets = [
    documents,
    document_structure,
    chunks,
    extracted_graph,
    graph,
    communities,
    community_reports,
    *vector_assets,
]
index_assets.append(published_index_asset([key for a in index_assets for key in a.keys]))
index_checks = integrity_checks

__all__ = ["index_assets", "index_checks"]

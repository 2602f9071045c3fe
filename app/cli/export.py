"""`docgraph export`: the entity graph as GraphML or as one offline HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.cli.args import folder_overrides
from pipeline.config import load_settings


def cmd_export(args: argparse.Namespace) -> int:
    """Write the entity graph as GraphML or as one offline HTML page (pipeline.export)."""
    from pipeline import export

    settings = load_settings(args.config, folder_overrides(args))
    target = Path(args.to or f"entity_graph.{args.format}")
    if args.format == "graphml":
        nodes, edges = export.export_graphml(settings.output_dir, target)
        print(f"{target}: {nodes} entities, {edges} relationships")
    else:
        limit = args.max_nodes or export.DEFAULT_MAX_NODES
        shown, total = export.export_html(settings.output_dir, target, limit)
        print(f"{target}: {shown} of {total} entities (the highest degree first)")
    return 0

"""Documents from the input folder; unreadable files land in rejected_documents with a reason."""

import time

from dagster import AssetExecutionContext, AssetOut, Output, multi_asset

from assets.metadata import counts_md, frame_metadata
from pipeline.ingest import load_folder, own_folders
from resources import DocgraphConfig


@multi_asset(
    outs={
        "documents": AssetOut(description="One row per loaded document (id = sha256 of bytes)."),
        "rejected_documents": AssetOut(description="Files that could not be loaded, and why."),
    },
    group_name="ingest",
)
def documents(context: AssetExecutionContext, docgraph: DocgraphConfig):
    started = time.perf_counter()
    settings = docgraph.settings()
    docs, rejected = load_folder(settings.input_dir, own_folders(settings.output_dir))
    for row in rejected.iter_rows(named=True):
        context.log.warning(f"rejected {row['source_path']}: {row['reason']}")
    yield Output(
        docs,
        output_name="documents",
        metadata=frame_metadata(
            docs,
            started,
            input_dir=settings.input_dir,
            by_type=counts_md(
                dict(docs.group_by("mime_type").len().sort("mime_type").iter_rows()),
                ("mime type", "documents"),
            ),
        ),
    )
    yield Output(
        rejected,
        output_name="rejected_documents",
        metadata=frame_metadata(
            rejected,
            started,
            reasons=counts_md(
                dict(rejected.select("source_path", "reason").iter_rows()), ("file", "reason")
            ),
        ),
    )

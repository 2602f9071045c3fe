"""Documents from the input folder, shard by shard; unreadable files land in
rejected_documents with a reason. The publications manifest fills the documents'
publication columns and, corpus-wide, the publications table."""

import time
from collections.abc import Iterator
from pathlib import Path

from dagster import AssetExecutionContext, AssetOut, MetadataValue, Output, multi_asset

from assets.metadata import PARQUET_KINDS, failures_md, frame_metadata
from assets.shards import SHARD_POLICY, run_shards, shard_carry, shard_partitions, specs
from pipeline.ingest import check_input_folder, own_folders, shards, walk_input
from pipeline.ingest.loader import load_entries
from pipeline.ingest.publications import failures_frame, publications_frame, read_manifest
from pipeline.ingest.walk import Entry, read_listing
from pipeline.pdf.once import ReadAhead, hand_over
from pipeline.pdf.read.ocr_engine import ocr_setting
from pipeline.storage import store
from pipeline.storage.carry import KeptDocuments
from resources import DocgraphConfig
from resources.output import run_dir

# A run tag naming the file where the process that launched the run saved the input
# folder's walk (app/run.py): the steps read it instead of walking the folder again.
LISTING_TAG = "docgraph/input_listing"

TABLES = {
    "documents": "One row per loaded document (id = hash of relative path and bytes).",
    "rejected_documents": "Files that could not be loaded, and why.",
}


def run_entries(context: AssetExecutionContext, root: Path, own: tuple[str, ...]) -> list[Entry]:
    """The input folder's walk this run started from (LISTING_TAG), or a walk now (a run
    launched without it: from the UI, a schedule or a sensor)."""
    listing = context.run.tags.get(LISTING_TAG)
    if listing and Path(listing).is_file():
        return read_listing(listing)
    return walk_input(root, own)


def _entries_when_read(
    context: AssetExecutionContext, root: Path, own: tuple[str, ...]
) -> Iterator[Entry]:
    """`run_entries`, read when first iterated."""
    yield from run_entries(context, root, own)


def documents_asset(n_shards: int):
    @multi_asset(
        name="documents",
        specs=specs("ingest", TABLES, []),
        partitions_def=shard_partitions(n_shards),
        backfill_policy=SHARD_POLICY,
    )
    def documents(context: AssetExecutionContext, docgraph: DocgraphConfig):
        settings = docgraph.settings()
        own = own_folders(settings.output_dir)
        # a missing or empty folder stops the run before anything is written
        root = check_input_folder(settings.input_dir, own)
        folder = run_dir(docgraph, context)
        entries = run_entries(context, root, own)
        mapping = read_manifest(root, entries).files  # its failures: the publications asset
        n = n_shards
        groups = shards.by_shard(entries, n)
        # fingerprinted before reading: a file edited meanwhile is seen as changed next time
        prints = shards.fingerprints(
            root, own, n, shards.stage_settings_digest(settings), entries=entries, mapping=mapping
        )
        reasons: dict[str, str] = {}
        # a file whose path and bytes the base version holds: its row, not loaded again
        carry = shard_carry(context, settings)

        def load_shard(key: str, opened):
            keep = KeptDocuments(carry, key)
            with ocr_setting(settings.structure.ocr):  # scanned PDF pages: OCR or not
                frames = load_entries(root, groups[key], mapping, opened, keep)
            keep.done(frames[0].height)
            return frames

        # each PDF's structure parsed in its loader's open, the layout model's pages of the
        # next shards read ahead by worker processes; handed to the structure step as data
        ahead = ReadAhead(
            context.partition_keys, load_shard, settings.structure, settings.structure.pdf_workers
        )

        def load(key: str):
            shard = ahead.shard(key)
            hand_over(folder, key, shard, settings.structure)
            docs, rejected = shard.frames
            for row in rejected.iter_rows(named=True):
                context.log.warning(f"rejected {row['source_path']}: {row['reason']}")
                reasons[row["source_path"]] = row["reason"]
            return {"documents": docs, "rejected_documents": rejected}

        results = run_shards(
            context,
            folder,
            TABLES,
            load,
            lambda: {
                "input_dir": settings.input_dir,
                "rejected": MetadataValue.json(reasons),
            },
            carry,
        )
        done = {k: prints[k] for k in context.partition_keys}
        shards.write_state(folder, n, done, shards.carry_digest(settings))
        yield from results

    return documents


@multi_asset(
    outs={
        "publications": AssetOut(
            description="Publications of the manifest (publications.json / .jsonl in the "
            "input folder) with the documents mapped to each.",
            kinds=set(PARQUET_KINDS),
        ),
        "publication_failures": AssetOut(
            description="Manifest rows skipped (bad JSON, missing or repeated id, unknown "
            "type, a path matching no file, a file claimed twice), and why.",
            kinds=set(PARQUET_KINDS),
        ),
    },
    deps=["documents"],
    # nothing before the tail reads it: after the steps that feed the embedding worker
    op_tags={"dagster/priority": "-1"},
    group_name="ingest",
)
def publications(context: AssetExecutionContext, docgraph: DocgraphConfig):
    started = time.perf_counter()
    settings = docgraph.settings()
    own = own_folders(settings.output_dir)
    root = Path(settings.input_dir)
    # the walk is read only when a manifest is there to match it (40k files: 0.4 s)
    manifest = read_manifest(root, _entries_when_read(context, root, own) if root.is_dir() else [])
    docs = store.read_table(run_dir(docgraph, context), "documents", ["id", "publication_id"])
    pubs, failed = publications_frame(manifest, docs), failures_frame(manifest)
    for row in failed.iter_rows(named=True):
        context.log.warning(f"publications manifest: {row['source_path']}: {row['reason']}")
    mapped = docs.filter(docs["publication_id"].is_not_null()).height
    yield Output(
        pubs,
        output_name="publications",
        metadata=frame_metadata(pubs, started, "publications", documents_mapped=mapped),
    )
    yield Output(
        failed,
        output_name="publication_failures",
        metadata=frame_metadata(
            failed, started, "publication_failures", failures=failures_md(failed)
        ),
    )

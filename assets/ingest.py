"""Documents from the input folder, shard by shard; unreadable files land in
rejected_documents with a reason."""

from dagster import AssetExecutionContext, MetadataValue, multi_asset

from assets.shards import SHARD_POLICY, run_shards, shard_partitions, specs
from pipeline import shards
from pipeline.ingest import check_input_folder, own_folders, walk_input
from pipeline.ingest.loader import load_entries
from resources import DocgraphConfig
from resources.output import run_dir

TABLES = {
    "documents": "One row per loaded document (id = hash of relative path and bytes).",
    "rejected_documents": "Files that could not be loaded, and why.",
}


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
        entries = walk_input(root, own)
        n = n_shards
        groups = shards.by_shard(entries, n)
        # fingerprinted before reading: a file edited meanwhile is seen as changed next time
        prints = shards.fingerprints(
            root, own, n, shards.stage_settings_digest(settings), entries=entries
        )
        reasons: dict[str, str] = {}

        def load(key: str):
            docs, rejected = load_entries(root, groups[key])
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
        )
        shards.write_state(folder, n, {k: prints[k] for k in context.partition_keys})
        yield from results

    return documents

"""IO manager: each asset is one Parquet table named after its key, written atomically into
the run's staging version (resources.output), read from there by downstream steps.

An input declared `AssetIn(metadata={"columns": [...]})` reads only those columns: the
corpus-wide steps read a few of a large table's columns (a relationship's description is
half its bytes), and Parquet reads a column without the others.

Outside a run (`Definitions.load_asset_value`, `get_asset_value_loader`: a notebook) it reads
the output folder's published version, read-only: no writer lock, no staging folder; a
partition key reads that shard of a sharded table."""

# No `from __future__ import annotations`: Dagster reads the `config` annotation as a class to
# accept the launch-configured `docgraph` resource there (see resources.config).
from pathlib import Path

import polars as pl
from dagster import (
    ConfigurableIOManager,
    DagsterInvariantViolationError,
    InputContext,
    OutputContext,
)
from dagster._config.pythonic_config.io_manager import (
    ConfigurableIOManagerFactoryResourceDefinition,
)
from dagster._utils.cached_method import cached_method

from pipeline import memory
from pipeline.storage import remote, shard_files, store
from resources.config import DocgraphConfig, output_root_metadata
from resources.output import run_dir

_last_collected: list[tuple[str, str] | None] = [None]  # (run id, step key) of the last collect


class ParquetIOManager(ConfigurableIOManager):
    config: DocgraphConfig  # the run's `docgraph` resource (build_resources)

    def handle_output(self, context: OutputContext, obj: pl.DataFrame | Path | None) -> None:
        """Write the frame a step returned; a Path is a table the step wrote itself
        (store.write_tables: several at once)."""
        metadata = output_root_metadata(self.config)
        if obj is not None:
            name = context.asset_key.path[-1]
            if isinstance(obj, Path):
                path = obj
            else:
                path = store.write_table(run_dir(self.config, context), name, obj)
            metadata["path"] = str(path.relative_to(path.parent.parent))
        context.add_output_metadata(metadata)

    def load_input(self, context: InputContext) -> pl.DataFrame:
        name = context.asset_key.path[-1]
        columns = (context.definition_metadata or {}).get("columns")
        try:
            step = (context.step_context.run_id, context.step_context.step.key)
        except DagsterInvariantViolationError:  # read outside a run (load_asset_value)
            return _published(self.config, context, name, columns)
        # a step loading its first input: what the steps before it freed goes back to the OS
        # first (one process runs every step by default; at 40k documents the reports step
        # started ~100 MB lower and peaked ~200 MB lower); once a step, as a collection walks
        # every object the run made (~50 ms each late in a MuSiQue run)
        if step != _last_collected[0]:
            _last_collected[0] = step
            memory.collect()
        return store.read_table(run_dir(self.config, context), name, columns)

    @cached_method
    def get_resource_definition(self) -> ConfigurableIOManagerFactoryResourceDefinition:
        # Dagster's asset value loader builds only the keys in `required_resource_keys`, which
        # leaves out a dependency given as a partial resource (`docgraph`, configured at
        # launch): it then fails an invariant. Naming the key makes it build `docgraph` too.
        definition = super().get_resource_definition()
        definition._required_resource_keys = {*definition.required_resource_keys, "docgraph"}  # noqa: SLF001
        return definition


# assets that are no table of their own, and what to load instead
_NOT_TABLES = {
    "chunk_embeddings": "the text units' embedding cache: load text_units_vectors",
    "published_index": "the published version itself: open it with GraphIndex.open(output_dir)",
}


def _published(
    config: DocgraphConfig, context: InputContext, name: str, columns: list[str] | None
) -> pl.DataFrame:
    """Table `name` (one shard with a partition key) of the output folder's current version;
    a `<table>_vectors` asset is its Lance table."""
    if name in _NOT_TABLES:
        raise ValueError(f"{name} is no table: {_NOT_TABLES[name]}")
    output = remote.refresh(config.settings().output_dir, force=True)
    if not store.is_index(output):
        raise FileNotFoundError(f"{output} holds no docgraph index: run `docgraph index` first")
    root = store.resolve(output)
    if name.endswith("_vectors"):  # opened where it is: lance_db() would make the folder
        import lancedb

        db = lancedb.connect(str(root / store.LANCE_DIR))
        frame = pl.from_arrow(db.open_table(name.removesuffix("_vectors")).to_arrow())
    elif context.has_asset_partitions:
        keys = context.asset_partition_keys
        frame = pl.concat(
            [shard_files.read_shard(root, name, key) for key in keys], how="vertical_relaxed"
        )
    else:
        return store.read_table(root, name, columns)
    return frame.select(columns) if columns else frame  # type: ignore[union-attr]

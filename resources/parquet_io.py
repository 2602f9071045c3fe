"""IO manager: each asset is one Parquet table named after its key, written atomically into
the run's staging version (resources.output), read from there by downstream steps.

An input declared `AssetIn(metadata={"columns": [...]})` reads only those columns: the
corpus-wide steps read a few of a large table's columns (a relationship's description is
half its bytes), and Parquet reads a column without the others."""

# No `from __future__ import annotations`: Dagster reads the `config` annotation as a class to
# accept the launch-configured `docgraph` resource there (see resources.config).
import polars as pl
from dagster import (
    ConfigurableIOManager,
    DagsterInvariantViolationError,
    InputContext,
    OutputContext,
)

from pipeline import memory
from pipeline.storage import store
from resources.config import DocgraphConfig, output_root_metadata
from resources.output import run_dir

_last_collected: list[tuple[str, str] | None] = [None]  # (run id, step key) of the last collect


class ParquetIOManager(ConfigurableIOManager):
    config: DocgraphConfig  # the run's `docgraph` resource (build_resources)

    def handle_output(self, context: OutputContext, obj: pl.DataFrame | None) -> None:
        metadata = output_root_metadata(self.config)
        if obj is not None:
            name = context.asset_key.path[-1]
            path = store.write_table(run_dir(self.config, context), name, obj)
            metadata["path"] = str(path.relative_to(path.parent.parent))
        context.add_output_metadata(metadata)

    def load_input(self, context: InputContext) -> pl.DataFrame:
        # a step loading its first input: what the steps before it freed goes back to the OS
        # first (one process runs every step by default; at 40k documents the reports step
        # started ~100 MB lower and peaked ~200 MB lower); once a step, as a collection walks
        # every object the run made (~50 ms each late in a MuSiQue run)
        try:
            step = (context.step_context.run_id, context.step_context.step.key)
        except DagsterInvariantViolationError:  # read outside a run (load_asset_value)
            step = None
        if step is None or step != _last_collected[0]:
            _last_collected[0] = step
            memory.collect()
        columns = (context.definition_metadata or {}).get("columns")
        return store.read_table(run_dir(self.config, context), context.asset_key.path[-1], columns)

"""IO manager: each asset is one Parquet table named after its key, written atomically into
the run's staging version (resources.output), read from there by downstream steps."""

from __future__ import annotations

import polars as pl
from dagster import ConfigurableIOManager, InputContext, OutputContext

from pipeline import store
from resources.config import DocgraphConfig
from resources.output import run_dir


class ParquetIOManager(ConfigurableIOManager):
    config: DocgraphConfig

    def handle_output(self, context: OutputContext, obj: pl.DataFrame | None) -> None:
        if obj is None:
            return
        name = context.asset_key.path[-1]
        path = store.write_table(run_dir(self.config, context), name, obj)
        context.add_output_metadata({"path": str(path.relative_to(path.parent.parent))})

    def load_input(self, context: InputContext) -> pl.DataFrame:
        return store.read_table(run_dir(self.config, context), context.asset_key.path[-1])

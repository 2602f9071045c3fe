"""IO manager: each asset is one Parquet table named after its key, written atomically."""

from __future__ import annotations

import polars as pl
from dagster import ConfigurableIOManager, InputContext, OutputContext

from pipeline import store
from resources.config import DocgraphConfig


class ParquetIOManager(ConfigurableIOManager):
    config: DocgraphConfig

    def handle_output(self, context: OutputContext, obj: pl.DataFrame | None) -> None:
        if obj is None:
            return
        name = context.asset_key.path[-1]
        path = store.write_table(self.config.settings().output_dir, name, obj)
        context.add_output_metadata({"path": str(path)})

    def load_input(self, context: InputContext) -> pl.DataFrame:
        return store.read_table(self.config.settings().output_dir, context.asset_key.path[-1])

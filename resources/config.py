"""The run's settings as a resource: overrides only; defaults live in pipeline.config."""

from __future__ import annotations

from dagster import ConfigurableResource

from pipeline.config import Settings, load_settings


class DocgraphConfig(ConfigurableResource):
    """Which settings file and folders a run uses (None: pipeline.config defaults / env)."""

    config_path: str | None = None
    input_dir: str | None = None
    output_dir: str | None = None

    def settings(self) -> Settings:
        overrides = {
            k: v for k, v in (("input_dir", self.input_dir), ("output_dir", self.output_dir)) if v
        }
        return load_settings(self.config_path, overrides)

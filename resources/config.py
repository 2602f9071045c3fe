"""The run's settings as a resource: overrides only; defaults live in pipeline.config.

One `docgraph` resource per run holds the folders. The IO manager, the embedder and the LLM
resource do not carry copies of it: they depend on the top-level `docgraph` resource by key
(`DocgraphConfig.at_launch`, Dagster's `configure_at_launch`), so a launch-time override of
`resources.docgraph.config.output_dir` (Launchpad, GraphQL, schedule run config) reaches
every writer of the run and the index is never split between two folders.
"""

from pathlib import Path

from dagster import ConfigurableResource, MetadataValue
from dagster._config.pythonic_config.resource import PartialResource  # configure_at_launch's

from pipeline.config import Settings, load_settings

OUTPUT_ROOT = "output_root"  # the metadata entry naming a run's output folder


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

    def output_root(self) -> Path:
        """The output folder, resolved (what every table, Lance table and index.json of the
        run lives under)."""
        return Path(self.settings().output_dir).resolve()

    @classmethod
    def at_launch(
        cls,
        config_path: str | None = None,
        input_dir: str | None = None,
        output_dir: str | None = None,
    ) -> "DocgraphAtLaunch":
        """The top-level `docgraph` resource of a Definitions: these values are its defaults,
        run config may override any of them, and resources built with it as their `config`
        receive the run's (overridden) instance."""
        values = {"config_path": config_path, "input_dir": input_dir, "output_dir": output_dir}
        return DocgraphAtLaunch(cls, data={k: v for k, v in values.items() if v is not None})


class DocgraphAtLaunch(PartialResource):  # dagster exports no public name for the class
    """`DocgraphConfig.configure_at_launch(...)` that also answers `settings()` with the
    defaults (what a run gets without run config), for code that needs them at load time,
    such as the job's tags."""

    def defaults(self) -> DocgraphConfig:
        return DocgraphConfig(**self.data)

    def settings(self) -> Settings:
        return self.defaults().settings()

    def output_root(self) -> Path:
        return self.defaults().output_root()


def output_root_metadata(docgraph: DocgraphConfig | DocgraphAtLaunch) -> dict[str, MetadataValue]:
    """`{"output_root": <resolved output folder>}` for an asset's metadata: the IO manager adds
    it to every output it writes; assets that write elsewhere (Lance tables, index.json) add
    it to their MaterializeResult so every materialization names the folder it went to."""
    return output_root_entry(docgraph.output_root())


def output_root_entry(root: Path) -> dict[str, MetadataValue]:
    """`{"output_root": ...}` for the output folder `root`: its object-store URL when it is
    the local mirror of one (pipeline.storage.mirror), else the folder."""
    from pipeline.storage import mirror

    return {OUTPUT_ROOT: MetadataValue.path(mirror.url_of(root) or str(root))}

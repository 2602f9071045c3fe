"""Tier 5: the index job launched from the webserver, as the Launchpad does it.

`dagster dev` (webserver + daemon) serves the code location of pyproject.toml's [tool.dg]
block (the one place it is named; `dg dev` reads the same) with DOCGRAPH_INPUT_DIR and
DOCGRAPH_OUTPUT_DIR pointing at temp folders; `index_job` is submitted through the GraphQL
API with run config overriding `resources.docgraph.config.output_dir`. Every output of the
run (Parquet tables, Lance tables, index.json, caches) must land in the overridden folder and
nothing in the default one: the folders come from one place, the `docgraph` resource.

The first test checks the same wiring in-process (fast): the IO manager, the embedder and
the LLM resource receive the run's overridden `docgraph` resource, and run config that tries
to set their folders separately is refused.

`dagster dev` rather than `dagster-webserver` alone: the instance is the repo's dagster.yaml,
whose QueuedRunCoordinator (run and tag concurrency limits) needs the daemon to dequeue the
run; this is the path a Launchpad launch takes.
"""

# No `from __future__ import annotations`: Dagster reads the probe asset's resource
# annotations as classes.
import sys
from pathlib import Path

import pytest
from dagster import DagsterInvalidConfigError, asset, materialize

from pipeline import schemas
from pipeline.storage import lock
from resources import OUTPUT_ROOT, DocgraphConfig, EmbedderResource, LlmResource, build_resources

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.ui_launch import (  # noqa: E402
    DagsterServer,
    docgraph_env,
    instance_home,
    override,
    run_events,
)


def test_docgraph_override_reaches_every_resource_in_process(tmp_path):
    default, moved = tmp_path / "default", tmp_path / "moved"
    seen: dict[str, str | None] = {}

    @asset(name="report_failures")  # a table the IO manager knows the schema of
    def probe(docgraph: DocgraphConfig, embedder: EmbedderResource, llm: LlmResource):
        seen.update(
            docgraph=docgraph.output_dir,
            embedder=embedder.config.output_dir,
            llm=llm.config.output_dir,
        )
        return schemas.empty("report_failures")

    resources = build_resources(output_dir=str(default))
    assert resources["docgraph"].settings().output_dir == str(default)  # load-time defaults
    try:
        result = materialize([probe], resources=resources, run_config=override(moved))
    finally:
        lock.release(moved)
    assert seen == dict.fromkeys(("docgraph", "embedder", "llm"), str(moved))
    (event,) = result.asset_materializations_for_node("report_failures")
    assert event.metadata[OUTPUT_ROOT].value == str(moved.resolve())
    assert (moved / "staging" / "report_failures.parquet").is_file()  # the IO manager's write
    assert not default.exists()

    # the others have no folders of their own: setting one is refused, naming the field
    for key in ("io_manager", "embedder", "llm"):
        split = {"resources": {key: {"config": {"config": {"output_dir": str(default)}}}}}
        with pytest.raises(DagsterInvalidConfigError, match=f"{key}"):
            materialize([probe], resources=build_resources(), run_config=split)
    assert not default.exists()


@pytest.mark.slow
def test_launchpad_output_override_moves_every_output(tmp_path):
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    from app.cli.demo import write_sample_corpus
    from pipeline.storage import store

    inp, default, moved = tmp_path / "input", tmp_path / "default", tmp_path / "moved"
    write_sample_corpus(inp)
    home = instance_home(tmp_path / "home", queued=True)
    env = docgraph_env(home, inp, default)

    with DagsterServer(env, tmp_path / "dagster.log", daemon=True) as server:
        run_id = server.submit(override(moved))
        status = server.wait_run(run_id, timeout_s=480)
        assert status == "SUCCESS", server.log_tail()

    assert not default.exists(), sorted(p.name for p in default.rglob("*"))
    manifest = store.read_manifest(moved)
    assert manifest is not None and manifest["run_id"] == run_id
    version = moved / "versions" / manifest["version"]
    for name, rows in manifest["tables"].items():
        files = store.table_files(moved, name)  # <name>.parquet, or <name>/<shard>.parquet
        assert files and all(f.is_relative_to(version) for f in files), name
        assert store.table_rows(moved, name) == rows, name
    lance = version / "lancedb"
    assert {p.name for p in lance.iterdir()} >= {
        "text_units.lance",
        "entities.lance",
        "relationships.lance",
        "community_reports.lance",
    }
    assert (moved / "cache" / "embeddings").is_dir()

    # every table written through the IO manager names the folder it went to
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        roots = {
            entry.dagster_event.event_specific_data.materialization.metadata[OUTPUT_ROOT].value
            for entry in instance.all_logs(run_id)
            if entry.dagster_event is not None
            and entry.dagster_event.event_type.name == "ASSET_MATERIALIZATION"
            and OUTPUT_ROOT in entry.dagster_event.event_specific_data.materialization.metadata
        }
    assert roots == {str(moved.resolve())}
    assert any(kind == "RUN_SUCCESS" for _, kind, _, _ in run_events(home, run_id))

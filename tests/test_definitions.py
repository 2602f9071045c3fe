"""Tier 4: the code location loads and holds the whole asset graph, its checks and the job."""

from __future__ import annotations

from dagster import AssetKey

from definitions import defs

EXPECTED_ASSETS = {
    "documents",
    "rejected_documents",
    "sections",
    "content_nodes",
    "structure_edges",
    "structure_failures",
    "same_topic_edges",
    "content_nodes_vectors",
    "chunks",
    "chunk_failures",
    "extracted_entities",
    "extracted_relationships",
    "extraction_failures",
    "summary_failures",
    "report_failures",
    "entities",
    "relationships",
    "text_units",
    "communities",
    "community_reports",
    "text_units_vectors",
    "entities_vectors",
    "relationships_vectors",
    "community_reports_vectors",
    "published_index",
}


def test_definitions_load_with_every_asset_and_check():
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == EXPECTED_ASSETS
    checked = {k.asset_key.to_user_string() for k in graph.asset_check_keys}
    assert {"documents", "entities", "relationships", "communities", "community_reports"} <= checked
    job = defs.resolve_job_def("index_job")
    assert job is not None


def test_lineage_follows_the_design():
    graph = defs.get_repository_def().asset_graph

    def parents(name: str) -> set[str]:
        return {k.to_user_string() for k in graph.get(AssetKey(name)).parent_keys}

    assert parents("chunks") == {"documents", "sections", "content_nodes"}
    assert parents("entities") == {"chunks", "extracted_entities", "extracted_relationships"}
    assert parents("communities") == {"entities", "relationships"}
    assert "communities" in parents("community_reports")
    assert parents("text_units_vectors") == {"text_units"}
    # publishing comes after everything, so it publishes a whole version
    assert parents("published_index") == {
        k.to_user_string() for k in graph.get_all_asset_keys()
    } - {"published_index"}


def test_nightly_schedule_and_folder_sensor(tmp_path):
    import time

    from dagster import RunRequest, SkipReason, build_sensor_context

    from resources import DocgraphConfig

    assert defs.resolve_schedule_def("index_nightly").cron_schedule == "0 2 * * *"
    sensor_def = defs.resolve_sensor_def("input_folder_changed")
    config = DocgraphConfig(input_dir=str(tmp_path))
    (tmp_path / "a.txt").write_text("Ada Lovelace met Charles Babbage.")

    def tick(cursor: str | None):
        ctx = build_sensor_context(cursor=cursor, resources={"docgraph": config})
        return sensor_def(ctx), ctx.cursor

    first, cursor = tick(None)
    assert isinstance(first, RunRequest) and cursor
    unchanged, same = tick(cursor)
    assert isinstance(unchanged, SkipReason) and same == cursor
    time.sleep(0.01)
    (tmp_path / "b.md").write_text("# New\n\nA new document.")
    added, cursor2 = tick(cursor)
    assert isinstance(added, RunRequest) and cursor2 != cursor
    (tmp_path / "b.md").unlink()
    deleted, cursor3 = tick(cursor2)
    assert isinstance(deleted, RunRequest) and cursor3 == cursor  # back to the first state

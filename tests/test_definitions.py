"""Tier 4: the code location loads and holds the whole asset graph, its checks and the job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dagster import AssetKey

from definitions import defs

EXPECTED_ASSETS = {
    "documents",
    "rejected_documents",
    "publications",
    "publication_failures",
    "sections",
    "content_nodes",
    "document_edges",
    "document_links",
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
    "chunk_embeddings",
    "text_units_vectors",
    "entities_vectors",
    "relationships_vectors",
    "community_reports_vectors",
    "lexical_index",
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
    assert parents("text_units_vectors") == {"text_units", "chunk_embeddings"}
    assert parents("structure_edges") == {
        "documents",
        "sections",
        "document_edges",
        "document_links",
    }
    # the per-document stages are partitioned by document shard, the tail is not
    shards = {"documents", "sections", "content_nodes", "chunks", "extracted_entities"}
    shards |= {"chunk_embeddings", "document_links", "rejected_documents"}
    for name in shards:
        assert graph.get(AssetKey(name)).is_partitioned, name
    for name in ("structure_edges", "entities", "text_units", "communities", "published_index"):
        assert not graph.get(AssetKey(name)).is_partitioned, name
    # publishing comes after everything, so it publishes a whole version
    assert parents("published_index") == {
        k.to_user_string() for k in graph.get_all_asset_keys()
    } - {"published_index"}


def test_nightly_schedule_and_folder_sensor(tmp_path):
    import time

    from dagster import RunRequest, build_sensor_context

    from resources import DocgraphConfig

    assert defs.resolve_schedule_def("index_nightly").cron_schedule == "0 2 * * *"
    sensor_def = defs.resolve_sensor_def("input_folder_changed")
    inp = tmp_path / "in"  # and an output folder of its own: nothing indexed yet
    inp.mkdir()
    config = DocgraphConfig(input_dir=str(inp), output_dir=str(tmp_path / "out"))
    (inp / "a.txt").write_text("Ada Lovelace met Charles Babbage.")

    def tick(cursor: str | None):
        ctx = build_sensor_context(cursor=cursor, resources={"docgraph": config})
        return sensor_def(ctx), ctx.cursor

    # nothing indexed yet: every shard, as one run over the whole shard range
    first, cursor = tick(None)
    assert isinstance(first, RunRequest) and cursor
    assert first.tags["dagster/asset_partition_range_start"] == "000"
    assert first.tags["dagster/asset_partition_range_end"] == "015"
    again, same = tick(cursor)  # until it publishes, the same request (the run key dedupes)
    assert isinstance(again, RunRequest) and again.run_key == first.run_key
    time.sleep(0.01)
    (inp / "b.md").write_text("# New\n\nA new document.")
    added, cursor2 = tick(cursor)
    assert isinstance(added, RunRequest) and added.run_key != first.run_key
    (inp / "b.md").unlink()
    deleted, _ = tick(cursor2)
    assert isinstance(deleted, RunRequest) and deleted.run_key == first.run_key


def test_loading_the_code_location_leaves_heavy_libraries_for_the_steps_that_use_them():
    # every step process of a multiprocess or Dask run loads the definitions: pymupdf
    # (~0.45 s) loads with the first PDF, torch and sentence-transformers with a worker
    code = (
        "import sys, definitions; heavy = {'pymupdf', 'torch', 'sentence_transformers', "
        "'bpe_openai', 'lancedb'} & set(sys.modules); assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_a_pdf_is_read_and_parsed_through_the_deferred_registrations(tmp_path):
    # in a fresh interpreter, so the calls go through the deferred functions, not the real
    # ones a PDF test earlier in this process registered
    import pymupdf

    doc = pymupdf.open()
    text = "Marie Curie discovered polonium in 1898.\nShe worked in Paris with Pierre Curie."
    doc.new_page().insert_text((72, 200), text)
    (tmp_path / "a.pdf").write_bytes(doc.tobytes())
    code = (
        "import sys; from pathlib import Path; p = Path(sys.argv[1]); data = p.read_bytes()\n"
        "from pipeline.ingest import LOADERS; from pipeline.structure import PARSERS\n"
        "assert 'pymupdf' not in sys.modules\n"
        "loaded = LOADERS['.pdf'](p, data)\n"
        "assert 'polonium' in loaded.text and loaded.n_pages == 1, loaded\n"
        "row = {'id': 'd', 'source_path': 'a.pdf', 'title': 'a', 'text': loaded.text}\n"
        "st = PARSERS['application/pdf'](row, data, None)\n"
        "assert any('polonium' in (n.get('text') or '') for n in st.nodes), st.nodes\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "a.pdf")],
        check=True,
        cwd=Path(__file__).parents[1],
    )


def test_a_notebook_loads_asset_values_from_the_published_version(sample_run):
    """`Definitions.load_asset_value` (Dagster's way to read an asset in a notebook) gives the
    published tables, one shard by partition key and a vector asset's Lance rows, and only
    reads: no writer lock taken, no staging folder, the output folder unchanged."""
    import pytest
    from polars.testing import assert_frame_equal

    from definitions import make_definitions
    from pipeline.storage import lock, shard_files, store

    inp, out = sample_run
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    loaded = make_definitions(input_dir=str(inp), output_dir=str(out))

    entities = loaded.load_asset_value("entities")
    assert entities.height > 0
    assert_frame_equal(entities, store.read_table(out, "entities"))
    chunks = loaded.load_asset_value("chunks")
    assert_frame_equal(chunks, store.read_table(out, "chunks"))
    version = store.resolve(out)
    key = next(p.stem for p in sorted((version / "chunks").glob("*.parquet")))
    shard = loaded.load_asset_value("chunks", partition_key=key)
    assert 0 < shard.height < chunks.height
    assert_frame_equal(shard, shard_files.read_shard(version, "chunks", key))
    vectors = loaded.load_asset_value("text_units_vectors")
    assert sorted(vectors["id"]) == sorted(store.read_table(out, "text_units")["id"])
    assert vectors["vector"].dtype.size == 384  # all-MiniLM-L6-v2's width
    with pytest.raises(ValueError, match="text_units_vectors"):
        loaded.load_asset_value("chunk_embeddings")

    assert lock.holder(out) is None
    assert not store.staging_dir(out).exists()
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    empty = make_definitions(input_dir=str(inp), output_dir=str(out.parent / "nothing-here"))
    with pytest.raises(FileNotFoundError, match="no docgraph index"):
        empty.load_asset_value("entities")

"""The graph step of an incremental run (assets/graph.py over pipeline.graph.merge_carry):
after files are edited, added and deleted, its entities, relationships and text units equal
a full index of the same input into a fresh folder (but the entities' and relationships'
short ids, carried from run to run), and its metadata says it carried rows over."""

from __future__ import annotations

import time

import polars as pl
from conftest import materialization_metadata

from pipeline.storage import store

NAMES = ["Ada Lovelace", "Charles Babbage", "Mary Somerville", "Michael Faraday", "Alan Turing"]
PLACES = ["London", "Paris", "Cambridge", "Manchester", "Edinburgh", "Geneva", "Turin"]
# stands in several documents: its centrality is counted over all of them
SHARED = "Ada Lovelace met Charles Babbage and Mary Somerville at the Royal Society in London."


def _doc(i: int) -> str:
    a, b, place = NAMES[i % 5], NAMES[(i + 2) % 5], PLACES[i % 7]
    shared = f"{SHARED}\n" if i % 4 == 0 else ""
    shared += "Alan Turing and Ada Lovelace lived in Berlin.\n" if i == 7 else ""
    return (
        f"# {place} notes {i}\n\n{a} met {b} in {place} in {1800 + i}. {shared}"
        f"{a} wrote to {b} about the engine number {i}. "
        f"Later {b} visited {PLACES[(i + 1) % 7]} with {a}.\n"
    )


# the graph step's tables, and a vector table made from them (the vector_tables step)
GRAPH_TABLES = ("entities", "relationships", "text_units", "relationships_vectors")


def _graph_metadata(result) -> dict[str, dict]:
    """The metadata of the graph tables' materializations in the run of `result`."""
    meta = materialization_metadata(result)
    return {name: meta[name] for name in GRAPH_TABLES if name in meta}


def _tables(out) -> dict[str, pl.DataFrame]:
    tables = {}
    for name in ("entities", "relationships", "text_units"):
        frame = store.read_table(out, name)
        if name != "text_units":  # carried from run to run: not a fresh index's
            frame = frame.drop("human_readable_id")
        tables[name] = frame
    return tables


def test_an_incremental_graph_equals_a_fresh_index(tmp_path):
    from app.run import run_index

    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    for i in range(16):
        (inp / f"note{i:02d}.md").write_text(_doc(i))
    config = tmp_path / "docgraph.yaml"
    # a corpus this small is one neighbourhood: every edit reads most of it
    config.write_text("storage:\n  shards: 8\ngraph:\n  incremental_merge_max_share: 1.0\n")

    def run(folder, full=False):
        result = run_index(str(config), str(inp), str(folder), log_level="ERROR", full=full)
        assert result.success
        return result

    run(out)
    time.sleep(0.01)
    # an edit that adds a sentence other documents hold; Berlin (in one unchanged document)
    # named more often in another form: an entity's title is its most frequent form, so
    # the title of Berlin and of its relationships there changes
    flip = "The BERLIN office met Ada Lovelace."
    (inp / "note03.md").write_text(_doc(3) + f"{SHARED} {flip}\n")
    (inp / "note20.md").write_text(_doc(20) + f"Somerville translated Laplace. {flip}\n")
    (inp / "note08.md").unlink()
    meta = _graph_metadata(run(out))
    fresh = tmp_path / "fresh"
    run(fresh)
    got, want = _tables(out), _tables(fresh)
    for name in want:
        assert got[name].equals(want[name]), name
    for name in ("entities", "relationships"):
        assert meta[name]["incremental"] == "carried", meta[name]["incremental_reason"]
        assert meta[name]["rows_carried"] > 0 and meta[name]["rows_recomputed"] > 0, meta[name]
        assert meta[name]["rows_carried"] + meta[name]["rows_recomputed"] == want[name].height
    assert "BERLIN" in got["entities"]["title"].to_list()  # the flip is exercised
    # `docgraph index --full` carries nothing over, whatever changed (assets.shards.tail_changes)
    meta = _graph_metadata(run(out, full=True))
    assert {m["incremental_reason"] for m in meta.values()} == {"a full run (--full)"}
    assert _tables(out)["entities"].equals(want["entities"])


def test_an_edit_that_changes_no_report_keeps_the_reports_file(tmp_path):
    """A sentence naming nothing, added to a note: its text unit is replaced, and with it
    the unit lists of its communities, but no report reads more of it than the sentences
    naming its entities, so none is assembled again; a sentence naming one that no report
    picks: they are assembled again, to the same rows. Either way the reports' file stays
    the base version's (a hard link), not written again. An edit that changes a report
    writes the file."""
    from app.run import run_index

    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    for i in range(12):
        (inp / f"note{i:02d}.md").write_text(_doc(i))

    def index():
        result = run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR")
        assert result.success
        path = store.table_path(out, "community_reports")
        return (
            materialization_metadata(result),
            path.stat().st_ino,
            store.read_table(out, path.stem),
        )

    _, before, rows = index()
    assert rows.height
    (inp / "note02.md").write_text(_doc(2) + "It was a quiet morning.\n")
    meta, after, again = index()
    # the unit's sentences naming its entities are the same: no report is assembled again
    assert meta["community_reports"]["rows_recomputed"] == 0
    assert again.equals(rows) and after == before
    (inp / "note02.md").write_text(_doc(2) + f"{NAMES[2]} was there.\n")
    meta, after, again = index()
    assert meta["community_reports"]["rows_recomputed"] > 0  # assembled again, the same
    assert again.equals(rows) and after == before
    (inp / "note03.md").write_text(_doc(3) + "Alan Turing met Mary Somerville in Geneva.\n")
    _, changed, newer = index()
    assert changed != before and not newer.equals(rows)

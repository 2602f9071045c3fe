"""The corpus-wide steps that carry rows over from the base version (issue 49): after edits,
additions and deletions their output equals a full index of the same input, and their
metadata says what they recomputed and carried."""

from __future__ import annotations

import filecmp

import polars as pl

from app.run import run_index
from pipeline.lexical.bm25 import index_dir
from pipeline.storage import store
from pipeline.structure.link_carry import SIDECAR
from pipeline.vectors.topic_carry import STATE_DIR

TOPICS = {
    "volcano": "The volcano erupted lava and ash; magma rose through the crater of the volcano.",
    "violin": "The violin has four strings; a bow of horse hair makes the violin sing.",
    "glacier": "The glacier carved the valley; ice of the glacier moved a metre a day.",
    "tax": "The tax on income rose; the tax office sent every citizen a form.",
}


def _page(i: int, extra: str = "") -> str:
    """Page i: two sections on its topic and the next one, links to other pages (some
    missing until page 20 is added) and their headings."""
    names = list(TOPICS)
    a, b = names[i % 4], names[(i + 1) % 4]
    return (
        f"# Page {i}\n\n## About the {a}\n\n{TOPICS[a]} Page {i} says so.{extra}\n\n"
        f"See [page {(i + 3) % 22}](page{(i + 3) % 22}.md#about-the-{names[(i + 3) % 4]}) "
        f"and [[Page {(i + 5) % 22}]].\n\n## About the {b}\n\n{TOPICS[b]} Page {i} adds.\n"
    )


def _index(inp, out):
    result = run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR")
    assert result.success
    return result


def _meta(result, asset: str) -> dict:
    [event] = [
        e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset
    ]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_edits_additions_and_deletions_carry_rows_and_equal_a_full_index(tmp_path):
    inp, out = tmp_path / "input", tmp_path / "output"
    inp.mkdir()
    for i in range(20):
        (inp / f"page{i}.md").write_text(_page(i))
    _index(inp, out)
    (inp / "page4.md").write_text(_page(4, " The crater glowed."))  # edited
    (inp / "page20.md").write_text(_page(20))  # added: pages 17 and 15 link to it
    (inp / "page9.md").unlink()  # deleted: pages 6 and 4 link to it
    result = _index(inp, out)
    links, topic = _meta(result, "structure_edges"), _meta(result, "same_topic_edges")
    assert links["incremental"] == topic["incremental"] == "carried", (
        links["incremental_reason"],
        topic["incremental_reason"],
    )
    assert links["rows_carried"] > 0 and links["rows_recomputed"] > 0
    assert topic["rows_carried"] > 0 and topic["rows_recomputed"] > 0
    lexical_meta = _meta(result, "lexical_index")
    assert lexical_meta["incremental"] == "carried", lexical_meta["incremental_reason"]
    assert lexical_meta["rows_carried"] > 0 and lexical_meta["rows_recomputed"] > 0

    full = tmp_path / "full"
    _index(inp, full)
    for name in ("structure_edges", "same_topic_edges"):
        assert store.read_table(out, name).equals(store.read_table(full, name)), name
    edges = store.read_table(out, "structure_edges")
    assert edges.filter(pl.col("target_id").is_not_null()).height
    assert store.read_table(out, "same_topic_edges").height
    ours, theirs = store.resolve(out), store.resolve(full)
    assert pl.read_parquet(ours / SIDECAR).equals(pl.read_parquet(theirs / SIDECAR))
    lists = [pl.read_parquet(root / STATE_DIR / "lists.parquet") for root in (ours, theirs)]
    assert lists[0].equals(lists[1])
    state = [(root / STATE_DIR / "state.json").read_text() for root in (ours, theirs)]
    assert state[0] == state[1]
    lexical = [index_dir(root, "text_units") for root in (ours, theirs)]
    files = sorted(p.name for p in lexical[0].iterdir())
    assert files == sorted(p.name for p in lexical[1].iterdir())
    assert all(filecmp.cmp(lexical[0] / f, lexical[1] / f, shallow=False) for f in files)

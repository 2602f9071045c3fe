"""Links carried over (pipeline.structure.link_carry): after any sequence of edits,
additions and deletions of pages of a linked docs site, the resolved edges (and the traces
kept for the next run) equal resolving every link, and only the links a change can affect
are resolved again."""

from __future__ import annotations

import random

import polars as pl
from link_versions import changes_of, publish, stage, write_docs

from pipeline.storage import store
from pipeline.structure.link_carry import link_edges, read_sidecar, write_sidecar
from pipeline.structure.links import resolve_link_table


def _page(i: int, rng: random.Random, heading: str = "Usage") -> str:
    """Page i of folder a/ or b/: links by relative path (with and without .md, with
    anchors), by wikilink title, to a label another page declares, and to pages that do
    not exist yet (p30..p39)."""
    folder = "a" if i % 2 else "b"
    lines = [f"# Page {i}", "", f"## {heading}", "", f"(label-{i})=", "", "Text.", ""]
    for _ in range(4):
        j = rng.randrange(40)
        there = "a" if j % 2 else "b"
        rel = f"p{j}.md" if there == folder else f"../{there}/p{j}.md"
        kind = rng.randrange(5)
        if kind == 0:
            lines.append(f"See [p{j}]({rel}#usage).")
        elif kind == 1:
            lines.append(f"See [p{j}]({rel.removesuffix('.md')}).")
        elif kind == 2:
            lines.append(f"See [[Page {j}]].")
        elif kind == 3:
            lines.append(f"See [label](label-{j}).")
        else:
            lines.append(f"See [p{j}]({rel}).")
    return "\n".join(lines) + "\n"


def _path(i: int) -> str:
    return f"{'a' if i % 2 else 'b'}/p{i}.md"


def _full(folder) -> pl.DataFrame:
    """Every link resolved as before carrying existed (pipeline.structure.links)."""
    rows = resolve_link_table(
        store.read_table(folder, "documents", ["id", "source_path", "title"]),
        store.read_table(folder, "sections"),
        store.read_table(folder, "document_links"),
    )
    from pipeline import schemas

    return pl.from_arrow(schemas.pa.Table.from_pylist(rows, schema=schemas.STRUCTURE_EDGES))


def test_a_random_sequence_of_changes_equals_resolving_every_link(tmp_path):
    rng = random.Random(3)
    inp, out = tmp_path / "in", tmp_path / "out"
    pages = {_path(i): _page(i, rng) for i in range(30)}
    write_docs(inp, pages)
    folder = stage(inp, out, "run0")
    first = link_edges(folder, changes_of(folder, out))
    assert first.meta["incremental"] == "whole"
    assert first.edges.equals(_full(folder))
    write_sidecar(folder, first.sidecar)
    publish(folder, out, "run0")
    carried = 0
    for step in range(1, 21):
        for _ in range(rng.randrange(1, 3)):
            i = rng.randrange(40)
            op = rng.choice(["edit", "add", "delete"])
            if op == "delete" and _path(i) in pages and len(pages) > 5:
                del pages[_path(i)]
            elif op == "edit" and _path(i) in pages:  # a heading renamed: anchors move
                pages[_path(i)] = _page(i, rng, heading=rng.choice(["Usage", "Use", "Install"]))
            else:
                pages[_path(i)] = _page(i, rng)
        write_docs(inp, pages)
        folder = stage(inp, out, f"run{step}")
        run = link_edges(folder, changes_of(folder, out))
        whole = link_edges(folder, None)
        assert run.edges.equals(_full(folder)), step
        assert run.sidecar.equals(whole.sidecar), step
        if run.meta["incremental"] == "carried":
            carried += 1
            assert run.meta["rows_carried"] > 0
        assert run.meta["rows_recomputed"] + run.meta["rows_carried"] == run.edges.height
        write_sidecar(folder, run.sidecar)
        publish(folder, out, f"run{step}")
    assert carried >= 10
    assert read_sidecar(store.resolve(out)) is not None


def test_an_edit_resolves_its_own_links_and_those_that_looked_up_its_keys(tmp_path):
    rng = random.Random(1)
    inp, out = tmp_path / "in", tmp_path / "out"
    pages = {_path(i): _page(i, rng) for i in range(40)}
    write_docs(inp, pages)
    folder = stage(inp, out, "run0")
    write_sidecar(folder, link_edges(folder, None).sidecar)
    publish(folder, out, "run0")
    pages[_path(7)] = pages[_path(7)].replace("Text.", "Other text.")
    write_docs(inp, pages)
    folder = stage(inp, out, "run1")
    run = link_edges(folder, changes_of(folder, out))
    links = store.read_table(folder, "document_links")
    docs = store.read_table(folder, "documents", ["id", "source_path"])
    own = links.join(docs, left_on="document_id", right_on="id").filter(
        pl.col("source_path") == _path(7)
    )
    edges = run.edges
    to_it = edges.filter(pl.col("metadata").str.contains(f'"target_path": "{_path(7)}"'))
    assert run.meta["incremental"] == "carried"
    assert own.height <= run.meta["rows_recomputed"] <= own.height + to_it.height + 4
    assert run.meta["rows_carried"] >= edges.height - own.height - to_it.height - 4
    assert edges.equals(_full(folder))

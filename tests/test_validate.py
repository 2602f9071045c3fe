"""The integrity rules behind the asset checks find what they are meant to find."""

from __future__ import annotations

import polars as pl

from pipeline.storage import shard_files, store, validate
from pipeline.structure.model import DocStructure


def _write_structure(root, docs: list[DocStructure]) -> None:
    from pipeline.structure.build import _frame

    store.write_table(
        root,
        "documents",
        pl.DataFrame({"id": [d.document_id for d in docs]}).with_columns(
            human_readable_id=pl.int_range(pl.len()),
            title=pl.lit("t"),
            source_path=pl.col("id"),
            mime_type=pl.lit("text/plain"),
            sha256=pl.col("id"),
            byte_size=pl.lit(1),
            n_pages=pl.lit(1),
            language=pl.lit("en"),
            metadata=pl.lit("{}"),
            text=pl.lit("x"),
            creation_date=pl.lit(""),
            warnings=pl.lit([], dtype=pl.List(pl.Utf8)),
        ),
    )
    store.write_table(root, "sections", _frame([s for d in docs for s in d.sections], "sections"))
    store.write_table(
        root, "content_nodes", _frame([n for d in docs for n in d.nodes], "content_nodes")
    )
    store.write_table(
        root, "structure_edges", _frame([e for d in docs for e in d.edges], "structure_edges")
    )


def test_structure_rules_pass_on_good_tables_and_catch_bad_ones(tmp_path):
    a, b = DocStructure("da", "a.md", "A"), DocStructure("db", "b.md", "B")
    sec = a.add_section(a.root_id, "SECTION", "Intro")
    n1 = a.add_node(sec, "PARAGRAPH", "hello")
    n2 = b.add_node(b.root_id, "PARAGRAPH", "world")
    a.add_edge(n1, b.root_id, "REFERS_TO")
    a.add_edge(n1, None, "REFERS_TO")  # unresolved link: allowed
    _write_structure(tmp_path, [a, b])
    for name in ("sections", "content_nodes", "structure_edges"):
        assert validate.integrity_problems(tmp_path, name) == [], name

    # A node that claims document A but sits in B's section, and an edge to nowhere.
    b.nodes[0]["document_id"] = "da"
    a.add_edge(n2, "no-such-id", "REFERS_TO")
    _write_structure(tmp_path, [a, b])
    assert validate.integrity_problems(tmp_path, "content_nodes") == [
        "1 content nodes sit in another document's section"
    ]
    assert validate.integrity_problems(tmp_path, "structure_edges") == [
        "1 target_id values are no node or section"
    ]

    # A duplicated node and a section whose parent is no section: key and reference rules
    # read only the columns they need, and still see both.
    b.nodes.append(dict(b.nodes[0]))
    a.sections[-1]["parent_id"] = "no-such-section"
    _write_structure(tmp_path, [a, b])
    assert "1 duplicate id values" in validate.integrity_problems(tmp_path, "content_nodes")
    assert validate.integrity_problems(tmp_path, "sections") == [
        "1 parent_id values not in sections.id, e.g. ['no-such-section']"
    ]


def test_short_ids_must_be_unique_over_every_shard(tmp_path):
    """Contexts cite rows by human_readable_id: two shards each numbered from 0 is an error."""
    a, b = DocStructure("da", "a.md", "A"), DocStructure("db", "b.md", "B")
    _write_structure(tmp_path, [a, b])
    assert validate.integrity_problems(tmp_path, "documents") == []
    docs = store.read_table(tmp_path, "documents")
    for shard, row in (("000", docs[:1]), ("001", docs[1:])):
        shard_files.write_shard(tmp_path, "documents", shard, row.with_columns(human_readable_id=0))
    assert validate.integrity_problems(tmp_path, "documents") == [
        "1 duplicate human_readable_id values"
    ]

"""Structure-aware chunking: SmartChunker and SemanticChunker through chunk_structured."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.chunking.documents import chunk_documents, chunk_structured
from pipeline.chunking.simple import SimpleChunker
from pipeline.config import ChunkingSettings
from pipeline.structure import DocStructure, position
from pipeline.structure.text import parse_text
from pipeline.tokens import count_tokens

WORDS = [
    "river",
    "mountain",
    "archive",
    "ledger",
    "harbour",
    "lantern",
    "orchard",
    "quarry",
    "meadow",
    "copper",
    "signal",
    "bridge",
    "tunnel",
    "market",
    "engine",
    "garden",
    "window",
    "canal",
    "forest",
    "village",
    "station",
    "tower",
]


def _sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def _frames(structs: list[DocStructure], texts: list[str] | None = None):
    docs = pl.DataFrame(
        {
            "id": [s.document_id for s in structs],
            "human_readable_id": list(range(len(structs))),
            "title": [s.title for s in structs],
            "source_path": [s.source_path for s in structs],
            "text": texts or ["\n\n".join(n["text"] for n in s.nodes) for s in structs],
        }
    )
    secs = [r for s in structs for r in s.sections]
    nodes = [r for s in structs for r in s.nodes]
    sections = pl.from_arrow(
        schemas.pa.Table.from_pylist(
            [{**r, "human_readable_id": i} for i, r in enumerate(secs)], schema=schemas.SECTIONS
        )
    )
    content = pl.from_arrow(
        schemas.pa.Table.from_pylist(
            [{**r, "human_readable_id": i} for i, r in enumerate(nodes)],
            schema=schemas.CONTENT_NODES,
        )
    )
    return docs, sections, content


def _guide(n_sections: int = 50, edit: int | None = None, seed: int = 3) -> DocStructure:
    """A generated Markdown-like guide: 10 chapters x 5 sections, heading + 2 paragraphs each."""
    rng = random.Random(seed)
    doc = DocStructure("doc-guide", "guide.md", "Field Guide")
    chapter = doc.root_id
    for i in range(n_sections):
        if i % 5 == 0:
            title = f"Chapter {i // 5 + 1}"
            chapter = doc.add_section(doc.root_id, "CHAPTER", title)
            doc.add_node(chapter, "HEADING", f"# {title}")
        sid = doc.add_section(chapter, "SECTION", f"Topic {i}")
        doc.add_node(sid, "HEADING", f"## Topic {i}")
        p1 = _paragraph(rng, 6)
        if edit == i:
            p1 = p1.replace(".", ". Nobody noticed the clock strike thirteen.", 1)
        doc.add_node(sid, "PARAGRAPH", p1)
        doc.add_node(sid, "PARAGRAPH", _paragraph(rng, 5))
    return doc


def _subtree(sections: pl.DataFrame, root: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for sid, parent in sections.select("id", "parent_id").iter_rows():
        children.setdefault(parent, []).append(sid)
    out, todo = set(), [root]
    while todo:
        s = todo.pop()
        out.add(s)
        todo += children.get(s, [])
    return out


def test_units_never_straddle_sections_and_carry_prefix():
    docs, sections, nodes = _frames([_guide()])
    units = chunk_structured(docs, sections, nodes, ChunkingSettings())
    assert units.columns == schemas.TEXT_UNITS.names
    node_section = dict(nodes.select("id", "section_id").iter_rows())
    path = dict(sections.select("id", "path").iter_rows())
    for u in units.iter_rows(named=True):
        assert u["content_node_ids"], u
        allowed = _subtree(sections, u["section_id"])
        assert {node_section[n] for n in u["content_node_ids"]} <= allowed
        assert u["n_tokens"] <= 300
        # the prefix is the unit's section path below the document, minus a title the text
        # opens with (the document title is never repeated in units)
        full = path[u["section_id"]][1:]
        text = u["text"]
        if full and text.startswith("# " + " > ".join(full) + "\n\n"):
            rest = text.split("\n\n", 1)[1]
            assert not rest.lstrip("# ").startswith(full[-1])
        elif len(full) > 1:
            assert text.startswith("# " + " > ".join(full[:-1]) + "\n\n"), text[:80]
            assert text.split("\n\n", 1)[1].lstrip("# ").startswith(full[-1])
        elif full:
            assert text.lstrip("# ").startswith(full[-1]), text[:80]
    # every node is in some unit, in reading order
    covered = [n for ids in units["content_node_ids"].to_list() for n in ids]
    assert set(covered) == set(nodes["id"].to_list())
    assert units["id"].n_unique() == units.height


def test_heading_prefix_counts_toward_budget_and_no_duplicate_title():
    rng = random.Random(1)
    doc = DocStructure("d", "a.md", "Atlas")
    sid = doc.add_section(doc.root_id, "SECTION", "Rivers of the North")
    doc.add_node(sid, "HEADING", "## Rivers of the North")
    for _ in range(6):
        doc.add_node(sid, "PARAGRAPH", _paragraph(rng, 5))
    docs, sections, nodes = _frames([doc])
    settings = ChunkingSettings(chunk_size=120, overlap=0, min_size=30)
    units = chunk_structured(docs, sections, nodes, settings)
    texts = units["text"].to_list()
    assert len(texts) > 2
    assert texts[0].startswith("## Rivers of the North")  # section title not said twice
    assert all(t.startswith("# Rivers of the North\n\n") for t in texts[1:])
    assert not any("Atlas" in t for t in texts)  # the document title is not repeated
    assert all(count_tokens(t) <= 120 for t in texts)
    off = chunk_structured(
        docs, sections, nodes, settings.model_copy(update={"heading_prefix": False})
    )
    assert not any(t.startswith("# Atlas") for t in off["text"].to_list())


def test_tables_stay_whole_even_over_the_limit():
    rng = random.Random(2)
    doc = DocStructure("d", "t.md", "Tables")
    sid = doc.add_section(doc.root_id, "SECTION", "Data")
    doc.add_node(sid, "PARAGRAPH", _paragraph(rng, 4))
    small = "| a | b |\n|---|---|\n" + "\n".join(f"| {i}. Row. | Value {i}. |" for i in range(8))
    big = "| x | y |\n|---|---|\n" + "\n".join(
        f"| {_sentence(rng, 6)} | {_sentence(rng, 6)} |" for _ in range(40)
    )
    doc.add_node(sid, "TABLE", small)
    doc.add_node(sid, "PARAGRAPH", _paragraph(rng, 4))
    doc.add_node(sid, "TABLE", big)
    doc.add_node(sid, "PARAGRAPH", _paragraph(rng, 4))
    docs, sections, nodes = _frames([doc])
    settings = ChunkingSettings(chunk_size=150, overlap=20, min_size=40)
    units = chunk_structured(docs, sections, nodes, settings)
    tables = dict(nodes.filter(pl.col("node_type") == "TABLE").select("id", "text").iter_rows())
    seen = set()
    for u in units.iter_rows(named=True):
        for nid in u["content_node_ids"]:
            if nid in tables:
                assert tables[nid] in u["text"]  # a listed table is there in full
                seen.add(nid)
    assert seen == set(tables)
    over = units.filter(pl.col("n_tokens") > 150)
    assert over.height == 1 and big in over["text"][0]


def test_tiny_sections_merge_under_their_common_parent():
    rng = random.Random(4)
    doc = DocStructure("d", "m.md", "Manual")
    ch = doc.add_section(doc.root_id, "CHAPTER", "Setup")
    doc.add_node(ch, "HEADING", "# Setup")
    a = doc.add_section(ch, "SECTION", "Install")
    doc.add_node(a, "HEADING", "## Install")
    doc.add_node(a, "PARAGRAPH", "Run the installer.", [position(2)])
    b = doc.add_section(ch, "SECTION", "Configure")
    doc.add_node(b, "HEADING", "## Configure")
    doc.add_node(b, "PARAGRAPH", "Edit the file.", [position(3)])
    big = doc.add_section(doc.root_id, "CHAPTER", "Usage")
    doc.add_node(big, "HEADING", "# Usage")
    for _ in range(4):
        doc.add_node(big, "PARAGRAPH", _paragraph(rng, 5), [position(4)])
    docs, sections, nodes = _frames([doc])
    units = chunk_structured(docs, sections, nodes, ChunkingSettings())
    first = units.row(0, named=True)
    setup_nodes = nodes.filter(pl.col("section_id").is_in([ch, a, b]))["id"].to_list()
    assert first["section_id"] == ch  # nearest common ancestor of Setup, Install, Configure
    assert first["content_node_ids"] == setup_nodes
    assert first["pages"] == [1, 2, 3]  # union of the nodes' pages
    assert "## Install" in first["text"] and "## Configure" in first["text"]
    # the tiny chapter did not swallow the next (unrelated-size) chapter
    assert all(u["section_id"] == big for u in units.slice(1).iter_rows(named=True))


def test_edit_locality_in_a_50_section_document():
    settings = ChunkingSettings()
    docs, sections, nodes = _frames([_guide()])
    before = set(chunk_structured(docs, sections, nodes, settings)["text"].to_list())
    for k in (0, 17, 49):
        edited = _guide(edit=k)
        d2, s2, n2 = _frames([edited])
        after = chunk_structured(d2, s2, n2, settings)
        new = after.filter(~pl.col("text").is_in(list(before)))
        assert 1 <= new.height <= 2, (k, new.height)
        target = next(s["id"] for s in edited.sections if s["title"] == f"Topic {k}")
        mine = set(n2.filter(pl.col("section_id") == target)["id"].to_list())
        for ids in new["content_node_ids"].to_list():  # only units holding the edited section
            assert set(ids) & mine


def test_single_passage_documents_keep_their_units():
    """MuSiQue-like: 'Title\\ntext' plain-text files give exactly the SimpleChunker's units."""
    rng = random.Random(5)
    structs, texts = [], []
    for i in range(20):
        text = f"Place {i}\n" + _paragraph(rng, 3 + i * 2)
        texts.append(text)
        structs.append(parse_text(f"doc{i}", f"{i:05d}.txt", f"Place {i}", text))
    docs, sections, nodes = _frames(structs, texts)
    settings = ChunkingSettings()
    smart = chunk_structured(docs, sections, nodes, settings)
    simple = chunk_documents(docs, settings)
    one = simple.group_by("document_id").len().filter(pl.col("len") == 1)["document_id"]
    assert one.len() >= 10
    a = smart.filter(pl.col("document_id").is_in(one.implode()))
    b = simple.filter(pl.col("document_id").is_in(one.implode()))
    assert a["id"].to_list() == b["id"].to_list()
    assert a["section_id"].null_count() == 0 and all(len(x) == 1 for x in a["content_node_ids"])
    # longer passages: later units do not repeat the document title (editing a title must
    # not change every unit of its document)
    multi = smart.filter(~pl.col("document_id").is_in(one.implode()) & (pl.col("seq") > 0))
    assert multi.height and not any("Place" in t for t in multi["text"].to_list())


def test_simple_method_and_fallback_without_structure():
    rng = random.Random(6)
    text = "Alpha\n\n" + _paragraph(rng, 40)
    st = parse_text("d1", "a.txt", "Alpha", text)
    docs, sections, nodes = _frames([st], [text])
    s = ChunkingSettings(method="simple")
    simple = chunk_structured(docs, sections, nodes, s)
    ref = chunk_documents(docs, s)
    assert simple["id"].to_list() == ref["id"].to_list()
    assert set(simple["section_id"].to_list()) == {st.root_id}
    fallback = chunk_structured(docs, sections, nodes.clear(), ChunkingSettings())
    assert fallback["id"].to_list() == ref["id"].to_list()


@pytest.fixture(scope="module")
def book(shared_data) -> str:
    path = shared_data / "christmas_carol" / "mock_data.txt"
    return path.read_text(encoding="utf-8")


def _units(text: str) -> list[str]:
    st = parse_text("carol", "carol.txt", "A Christmas Carol", text)
    docs, sections, nodes = _frames([st], [text])
    return chunk_structured(docs, sections, nodes, ChunkingSettings())["text"].to_list()


def test_plain_text_book_locality(book):
    """One section, many paragraphs: edits stay as local as with the SimpleChunker."""
    simple = SimpleChunker(ChunkingSettings())
    original = set(_units(book))
    original_simple = {c.text for c in simple.chunk(book)}
    paras = [p for p in book.split("\n\n") if len(p) > 200]
    rng = random.Random(7)
    new, new_simple = [], []
    for p in rng.sample(paras, 12):
        edited = book.replace(p, p + " Nobody noticed the clock strike thirteen.", 1)
        new.append(len([t for t in _units(edited) if t not in original]))
        new_simple.append(len([c for c in simple.chunk(edited) if c.text not in original_simple]))
    print(f"\nbook, 12 paragraph edits -> new units {new} (SimpleChunker {new_simple})")
    assert max(new) <= 4
    assert sum(new) <= sum(new_simple) + 1


class TopicEmbedder:
    """Deterministic fake: a sentence about ships points one way, about bread another."""

    dim = 16

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            h = hashlib.blake2b(t.encode(), digest_size=16).digest()
            out[i] = np.frombuffer(h, dtype=np.uint8).astype(np.float32) / 255.0 * 0.3
            out[i, 0] += 3.0 * t.count("ship")
            out[i, 1] += 3.0 * t.count("bread")
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_semantic_chunker_cuts_at_the_topic_change():
    rng = random.Random(8)
    ships = [
        f"The ship {rng.choice(WORDS)} sailed past the {rng.choice(WORDS)} ship." for _ in range(9)
    ]
    bread = [
        f"The bread {rng.choice(WORDS)} rose in the {rng.choice(WORDS)} bread oven."
        for _ in range(9)
    ]
    st = DocStructure("d", "t.txt", "Notes")
    st.add_node(st.root_id, "PARAGRAPH", " ".join(ships[:5]))
    st.add_node(
        st.root_id, "PARAGRAPH", " ".join(ships[5:] + bread[:3])
    )  # topic shifts mid-paragraph
    st.add_node(st.root_id, "PARAGRAPH", " ".join(bread[3:]))
    docs, sections, nodes = _frames([st])
    settings = ChunkingSettings(method="semantic", chunk_size=400, overlap=0, min_size=30)
    units = chunk_structured(docs, sections, nodes, settings, embedder=TopicEmbedder())
    texts = units["text"].to_list()
    assert len(texts) == 2, texts
    assert "bread" not in texts[0] and "ship" not in texts[1]
    assert units["content_node_ids"][0].len() == 2 and units["content_node_ids"][1].len() == 2
    smart = chunk_structured(docs, sections, nodes, settings.model_copy(update={"method": "smart"}))
    assert smart.height == 1  # the same text fits one smart unit: the cut is the topic's
    with pytest.raises(ValueError):
        chunk_structured(docs, sections, nodes, settings)


class WordEmbedder:
    """Fake model for node search: one axis per vocabulary word."""

    model_id = "fake-words"
    vocab = ["volcano", "violin", "glacier", "table", "rows", "ash", "string"]
    dim = len(vocab) + 1

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            low = t.lower()
            out[i, :-1] = [low.count(w) for w in self.vocab]
            out[i, -1] = 0.1
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_content_node_vectors_and_type_prefiltered_search(tmp_path):
    from pipeline.config import EmbeddingSettings, Settings
    from pipeline.query.index import GraphIndex
    from pipeline.storage import store
    from pipeline.vectors import lance as vectors

    doc = DocStructure("d", "geo.md", "Geo")
    a = doc.add_section(doc.root_id, "SECTION", "Volcano")
    doc.add_node(a, "HEADING", "## Volcano")
    doc.add_node(a, "PARAGRAPH", "The volcano spat ash. Volcano ash everywhere.", [position(2)])
    tbl = doc.add_node(
        a,
        "TABLE",
        "| volcano | ash |\n|---|---|\n| Etna | lots |",
        [position(3, "iii", 10, 20, 300, 400)],
    )
    b = doc.add_section(doc.root_id, "SECTION", "Music")
    doc.add_node(b, "HEADING", "## Music")
    doc.add_node(b, "PARAGRAPH", "A violin has a string. The violin string sings.", [position(4)])
    docs, sections, nodes = _frames([doc])
    units = chunk_structured(docs, sections, nodes, ChunkingSettings(min_size=5))
    full_docs = docs.with_columns(
        mime_type=pl.lit("text/markdown"),
        sha256=pl.lit(""),
        byte_size=pl.lit(0),
        n_pages=pl.lit(4),
        language=pl.lit("en"),
        metadata=pl.lit("{}"),
        creation_date=pl.lit(""),
        warnings=pl.lit([], dtype=pl.List(pl.Utf8)),
    )
    for name, frame in [
        ("documents", full_docs),
        ("sections", sections),
        ("content_nodes", nodes),
        ("text_units", units),
    ]:
        store.write_table(tmp_path, name, frame)
    emb = WordEmbedder()
    settings = EmbeddingSettings()
    vectors.build_vector_table(tmp_path, "text_units", units, emb, settings)
    calls: list[list[str]] = []

    class Counting(WordEmbedder):
        def embed(self, texts):
            calls.append(list(texts))
            return super().embed(texts)

    vectors.build_vector_table(tmp_path, "content_nodes", nodes, Counting(), settings)
    embedded = [t for c in calls for t in c]
    assert not any(t.startswith(("The volcano", "A violin")) for t in embedded)  # derived
    assert any(t.startswith("| volcano") for t in embedded)  # tables are embedded
    ids, mat = vectors.read_vectors(tmp_path, "content_nodes")
    assert len(ids) == nodes.height and np.all(np.abs(np.linalg.norm(mat, axis=1) - 1) < 1e-3)

    index = GraphIndex(tmp_path, Settings(), embedder=WordEmbedder())
    res = index.search_nodes("volcano ash", node_types=["table"], top_k=5)
    assert [r["node_type"] for r in res.records] == ["TABLE"]
    hit = res.records[0]
    assert hit["id"] == tbl and hit["pages"] == [3] and hit["section_path"] == ["Geo", "Volcano"]
    assert hit["bbox"][0]["x1"] == 300 and hit["bbox"][0]["page_label"] == "iii"
    assert hit["document_title"] == "Geo" and res.text_unit_ids
    every = index.search_nodes("violin string", top_k=3)
    assert every.records[0]["node_type"] == "PARAGRAPH" and "violin" in every.records[0]["text"]
    assert index.search_nodes("x", node_types=["FIGURE"]).records == []

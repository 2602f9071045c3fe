"""One document never aborts a run: long texts are counted and cut in bounded pieces, and a
document whose structure or chunking still raises is a recorded per-document failure.

Real inputs: A Christmas Carol six times over (1.1 MB of plain text), the same book as one
1 MB Markdown line, an 800 KB base64 PNG inside a Markdown data URI, a list nested 1,000
deep — each indexed next to a normal document.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pymupdf
import pytest

from pipeline.chunking.documents import chunk_structured
from pipeline.config import Settings
from pipeline.ingest import load_folder
from pipeline.structure import build_structure
from pipeline.tokens import (
    MAX_PIECE_CHARS,
    count_tokens,
    count_tokens_batch,
    pieces,
    token_starts,
    truncate_tokens,
)

NORMAL = (
    "# Curie in Paris\n\nMarie Curie worked in Paris with Pierre Curie. They discovered "
    "polonium and radium in 1898.\n\n## Later years\n\nShe founded the Radium Institute.\n"
)
SETTINGS = Settings()


def _book(shared_data: Path) -> str:
    return (shared_data / "christmas_carol" / "mock_data.txt").read_text("utf-8")


def _png_base64(n_bytes: int) -> str:
    """A real PNG of random pixels (incompressible), base64-encoded: about `n_bytes` chars."""
    import base64

    side = int((n_bytes * 3 / 4 / 3) ** 0.5)
    rng = random.Random(7)
    pix = pymupdf.Pixmap(pymupdf.csRGB, side, side, rng.randbytes(side * side * 3), 0)
    return base64.b64encode(pix.tobytes("png")).decode("ascii")


def _nested_list(depth: int) -> str:
    return "# Deep list\n\n" + "".join("  " * i + f"- level {i} item\n" for i in range(depth))


def write_long_inputs(folder: Path, shared_data: Path) -> dict[str, int]:
    """The long documents and a normal one; maps file name -> its size in characters."""
    folder.mkdir(parents=True, exist_ok=True)
    book = _book(shared_data)
    files = {
        "carol_x6.txt": book * 6,
        "one_line.md": " ".join(book.split() * 6) + "\n",
        "image.md": "# Figure\n\nThe plot below.\n\n![plot](data:image/png;base64,"
        + _png_base64(800_000)
        + ")\n\nAfter the plot.\n",
        "nested.md": _nested_list(1000),
        "curie.md": NORMAL,
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return {name: len(text) for name, text in files.items()}


def _index(folder: Path):
    docs, rejected = load_folder(folder)
    assert rejected.is_empty(), rejected.to_dicts()
    built = build_structure(docs, folder, SETTINGS.structure)
    sections, nodes, failures = built.sections, built.content_nodes, built.failures
    units = chunk_structured(docs, sections, nodes, SETTINGS.chunking, failures=failures)
    return docs, sections, nodes, units, built.warnings, failures


def _units_of(docs: pl.DataFrame, units: pl.DataFrame, name: str) -> pl.DataFrame:
    doc_id = docs.filter(pl.col("source_path") == name)["id"].item()
    return units.filter(pl.col("document_id") == doc_id)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]+", text))


# ---- tokens: bounded pieces ------------------------------------------------------------------


def test_counting_a_book_six_times_over_is_six_counts(shared_data):
    book = _book(shared_data)
    one = count_tokens(book)
    six = book * 6
    assert len(six) > 1_000_000  # over the encoder's one-call limit
    assert abs(count_tokens(six) - 6 * one) <= 6  # pieces cut at line ends: exact but seams
    assert count_tokens_batch([six, "", book]) == [count_tokens(six), 0, one]


def test_truncating_a_long_line_reads_only_its_start():
    text = _png_base64(800_000)
    assert len(text) > MAX_PIECE_CHARS
    cut = truncate_tokens(text, 1000)
    assert text.startswith(cut) and 990 <= count_tokens(cut) <= 1000
    assert truncate_tokens("short text", 1000) == "short text"
    assert count_tokens(text) > 200_000  # over the encoder's token limit for one call


def test_a_cut_inside_a_character_keeps_only_whole_characters():
    # Fraktur letters and hieroglyphs are 4 UTF-8 bytes spread over several tokens: most
    # token counts end inside one, and the cut must not leave half of it (or U+FFFD)
    text = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀𓀁 🙂 " * 40
    for limit in range(1, 60):
        cut = truncate_tokens(text, limit)
        assert text.startswith(cut) and "\ufffd" not in cut and count_tokens(cut) <= limit
    assert len(truncate_tokens(text, 59)) > len(truncate_tokens(text, 5)) > 0
    broken = "caf\udce9 au lait"  # a lone surrogate: bytes decoded with surrogateescape
    assert count_tokens(broken) == count_tokens("caf\ufffd au lait")
    assert truncate_tokens(broken, 2) == "caf\ufffd"  # counted and cut as the replacement


def test_token_offsets_are_the_packages_on_every_script():
    """token_starts reads the Rust tokenizer's tokens; the offsets are those of the package's
    own decoder (a token inside a character at that character), on text whose characters
    are spread over tokens, a lone surrogate and a text over one encoder call."""
    import bpe_openai

    enc = bpe_openai.get_encoding("o200k_base")
    texts = [
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀𓀁 🙂 👩‍👩‍👧 family, 你好吗，我很好。 مرحبا Ωmega",
        "caf\udce9 au lait",
        ("Ünïcödé wörds " * 4000) + "end",
    ]
    for text in texts:
        expected = []
        for a, b in pieces(text):
            _, offsets = enc.decode_with_offsets(enc.encode_ordinary(text[a:b]))
            expected += [a + o for o in offsets]
        assert token_starts(text) == expected


def test_counting_tokens_does_not_build_the_packages_rank_tables():
    # the bpe_openai package builds Python tables of three encodings on import (~0.9 s)
    code = (
        "import sys; from pipeline.tokens import count_tokens, token_starts, truncate_tokens; "
        "assert count_tokens('Marie Curie') == 3; truncate_tokens('a b c', 1); "
        "assert token_starts('Marie Curie') == [0, 5, 9]; "
        "assert 'bpe_openai' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


# ---- structure: a 1,000-deep list parses ----------------------------------------------------


def test_a_list_nested_1000_deep_parses_into_list_items(tmp_path):
    (tmp_path / "nested.md").write_text(_nested_list(1000), encoding="utf-8")
    docs, _ = load_folder(tmp_path)
    built = build_structure(docs, tmp_path)
    nodes = built.content_nodes
    assert built.warnings == {} and built.failures == []
    items = nodes.filter(pl.col("node_type") == "LIST_ITEM")["text"].to_list()
    assert items == [f"level {i} item" for i in range(1000)]


def test_a_heading_line_of_200_kb_stays_a_short_section_title(tmp_path, shared_data):
    words = " ".join(_book(shared_data).split())[:200_000]
    (tmp_path / "heading.md").write_text(f"# {words}\n\nA short body.\n", encoding="utf-8")
    docs, sections, nodes, units, _, failures = _index(tmp_path)
    assert failures == []
    assert sections["title"].str.len_chars().max() <= 200
    heading = nodes.filter(pl.col("node_type") == "HEADING")["text"].item()
    assert _words(words) == _words(heading)  # the node keeps the whole heading (markup aside)
    assert units["n_tokens"].max() <= SETTINGS.chunking.chunk_size
    assert _words(words) <= _words(" ".join(units["text"]))


def test_a_code_block_of_16_units_and_more_is_cut_at_line_ends(tmp_path):
    import pipeline.extract.gazetteer as source

    code = Path(source.__file__).read_text("utf-8")  # real code, ~19 KB
    md = f"# Listing\n\nThe chunker:\n\n```python\n{code}```\n\nAnd a table:\n\n"
    md += "| a | b |\n|---|---|\n| 1 | 2 |\n"
    (tmp_path / "listing.md").write_text(md, encoding="utf-8")
    _, _, nodes, units, _, _ = _index(tmp_path)
    size = SETTINGS.chunking.chunk_size
    assert count_tokens(code) > 16 * size
    assert units["n_tokens"].max() <= size
    lines = {x.strip() for t in units["text"] for x in t.split("\n")}
    assert {x.strip() for x in code.split("\n")} <= lines  # cut between lines, none lost
    table = nodes.filter(pl.col("node_type") == "TABLE")["text"].item()
    assert any(table in t for t in units["text"])  # a small table stays whole


# ---- pipeline: every long document is indexed next to a normal one -----------------------


def test_long_documents_are_indexed_with_a_normal_one(tmp_path, shared_data):
    sizes = write_long_inputs(tmp_path / "in", shared_data)
    started = time.perf_counter()
    docs, sections, nodes, units, warnings, failures = _index(tmp_path / "in")
    elapsed = time.perf_counter() - started
    print(f"\nstructure + chunks of {sum(sizes.values()):,} chars: {elapsed:.1f} s")
    assert failures == [] and warnings == {}
    assert docs.height == 5 and units["id"].n_unique() == units.height
    size = SETTINGS.chunking.chunk_size
    for name in sizes:
        mine = _units_of(docs, units, name)
        assert mine.height > 0, name
        assert mine["n_tokens"].max() <= size, name
        text = docs.filter(pl.col("source_path") == name)["text"].item()
        if name == "image.md":  # the image reads as its alt text, its data URI is in no unit
            read = " ".join(mine["text"])
            assert mine.height == 1 and "base64" not in read
            assert {"plot", "After"} <= _words(read)
        else:
            assert _words(text) <= _words(" ".join(mine["text"])), name  # nothing lost
    normal = _units_of(docs, units, "curie.md")
    doc_id = normal["document_id"][0]
    cited = {n for ids in normal["content_node_ids"] for n in ids}
    assert cited == set(nodes.filter(pl.col("document_id") == doc_id)["id"])
    book = _units_of(docs, units, "carol_x6.txt")
    assert book["n_tokens"].sum() >= 6 * count_tokens(_book(shared_data)) * 0.95
    assert elapsed < 120


@pytest.mark.parametrize("name", ["one_line.md", "base64.md"])
def test_one_long_line_is_chunked_quickly(tmp_path, shared_data, name):
    write_long_inputs(tmp_path / "all", shared_data)
    # 800 KB of base64 with no space, not in a data URI (those are dropped): text to chunk
    (tmp_path / "all" / "base64.md").write_text(f"# Blob\n\n{_png_base64(800_000)}\n", "utf-8")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_bytes((tmp_path / "all" / name).read_bytes())
    count_tokens("warm up")
    started = time.perf_counter()
    docs, _, _, units, _, failures = _index(tmp_path / "in")
    elapsed = time.perf_counter() - started
    print(f"\n{name}: {units.height} units in {elapsed:.2f} s")
    assert failures == [] and units.height > 100
    assert units["n_tokens"].max() <= SETTINGS.chunking.chunk_size
    assert elapsed < 15


# ---- the safety net: what still raises is a recorded per-document failure ---------------


def _fail_for(real, source_path: str, exc: Exception):
    """`real` (a parser or chunking method), raising `exc` for one document only."""

    def wrapped(*args, **kwargs):
        row = args[0] if isinstance(args[0], dict) else {"id": args[1]}
        if row.get("source_path") == source_path or row.get("id") == source_path:
            raise exc
        return real(*args, **kwargs)

    return wrapped


def test_a_parser_that_raises_costs_one_document_its_structure_only(tmp_path, monkeypatch):
    from pipeline import structure

    write = tmp_path / "in"
    write.mkdir()
    (write / "curie.md").write_text(NORMAL, encoding="utf-8")
    (write / "odd.md").write_text("# Odd\n\nFirst paragraph.\n\nSecond one.\n", encoding="utf-8")
    boom = OSError(f"cannot map {write / 'odd.md'}")  # a message naming an absolute path
    parser = _fail_for(structure.PARSERS["text/markdown"], "odd.md", boom)
    monkeypatch.setitem(structure.PARSERS, "text/markdown", parser)
    docs, _, nodes, units, _, failures = _index(write)
    assert [(f["source_path"], f["stage"], f["fallback"]) for f in failures] == [
        ("odd.md", "structure", "plain paragraphs")
    ]
    assert "OSError" in failures[0]["reason"] and str(tmp_path) not in failures[0]["reason"]
    assert "odd.md" in failures[0]["reason"]
    odd = docs.filter(pl.col("source_path") == "odd.md")["id"].item()
    paras = nodes.filter(pl.col("document_id") == odd)["text"].to_list()
    assert paras == ["# Odd", "First paragraph.", "Second one."]  # blank-line paragraphs
    assert "Second one." in " ".join(_units_of(docs, units, "odd.md")["text"])
    assert "HEADING" in set(nodes.filter(pl.col("document_id") != odd)["node_type"])


def test_chunking_that_raises_falls_back_to_the_documents_text(tmp_path, monkeypatch):
    from pipeline.chunking.smart import SmartChunker

    (tmp_path / "in").mkdir()  # a normal document beside the one whose chunking raises
    (tmp_path / "in" / "curie.md").write_text(NORMAL, encoding="utf-8")
    (tmp_path / "in" / "odd.md").write_text("# Odd\n\nIt has words.\n", encoding="utf-8")
    docs, _ = load_folder(tmp_path / "in")
    odd = docs.filter(pl.col("source_path") == "odd.md")["id"].item()
    bad = _fail_for(SmartChunker.chunk_document, odd, IndexError("list index out of range"))
    monkeypatch.setattr(SmartChunker, "chunk_document", bad)
    docs, _, _, units, _, failures = _index(tmp_path / "in")
    assert [(f["source_path"], f["stage"], f["fallback"]) for f in failures] == [
        ("odd.md", "chunking", "plain paragraphs")
    ]
    assert failures[0]["reason"] == "smart chunking: IndexError: list index out of range"
    assert _units_of(docs, units, "odd.md")["text"].to_list() == ["# Odd\n\nIt has words."]
    assert _units_of(docs, units, "curie.md")["content_node_ids"].list.len().sum() == 4


def test_a_real_run_indexes_long_documents_and_records_a_failure(
    tmp_path, shared_data, monkeypatch
):
    """The index job (Dagster) on the 1.1 MB book, the 1,000-deep list, a normal document
    and one whose parser raises: the run succeeds, every document has text units, the
    failure is a table row and is listed in the Dagster metadata."""
    from app.run import run_index
    from pipeline import structure
    from pipeline.storage import store

    inp = tmp_path / "in"
    write_long_inputs(inp, shared_data)
    (inp / "one_line.md").unlink()
    (inp / "image.md").unlink()
    (inp / "odd.md").write_text("# Odd\n\nMarie Curie met Einstein.\n", encoding="utf-8")
    boom = RecursionError("maximum recursion depth exceeded")
    parser = _fail_for(structure.PARSERS["text/markdown"], "odd.md", boom)
    monkeypatch.setitem(structure.PARSERS, "text/markdown", parser)
    started = time.perf_counter()
    result = run_index(input_dir=str(inp), output_dir=str(tmp_path / "out"))
    print(f"\nindex job: {time.perf_counter() - started:.1f} s")
    assert result.success
    out = tmp_path / "out"
    docs = store.read_table(out, "documents")
    units = store.read_table(out, "text_units")
    assert sorted(docs["source_path"]) == sorted(p.name for p in inp.iterdir())
    per_doc = units.group_by("document_id").len()
    assert per_doc.height == docs.height and per_doc["len"].min() > 0
    failed = store.read_table(out, "structure_failures")
    assert failed.select("source_path", "stage").rows() == [("odd.md", "structure")]
    assert store.read_table(out, "chunk_failures").is_empty()
    meta = {
        m.asset_key.to_user_string(): m.materialization.metadata
        for m in result.get_asset_materialization_events()
    }
    assert "odd.md" in meta["structure_failures"]["failures"].value
    assert "RecursionError" in meta["structure_failures"]["failures"].value
    assert {"Marie Curie", "Scrooge"} <= set(store.read_table(out, "entities")["title"])


def test_a_base64_line_gives_units_but_no_entities(tmp_path):
    from pipeline.extract import extract_resilient, get_extractor

    (tmp_path / "in").mkdir()
    text = "# Figure\n\nMarie Curie drew the plot below in Paris.\n\n"
    text += _png_base64(800_000) + "\n\nAfter the plot.\n"  # no data URI: a line of text
    (tmp_path / "in" / "image.md").write_text(text, encoding="utf-8")
    _, _, _, units, _, _ = _index(tmp_path / "in")
    assert units.height > 1000  # the payload is indexed ...
    entities, relations, failed = extract_resilient(get_extractor(SETTINGS.extraction), units)
    assert failed.is_empty()
    assert set(entities["title"]) <= {"Marie Curie", "Paris", "Figure", "plot"}  # ... not read
    assert {"Marie Curie", "Paris"} <= set(entities["title"])
    assert relations.height <= 2


def test_a_huge_documents_shard_is_extracted_and_written_a_part_at_a_time(
    tmp_path, shared_data, monkeypatch
):
    """One file is one shard whatever its size: extraction reads the shard's text units a
    row group at a time and writes its mentions part by part (PART_UNITS units), so memory
    is that of a part; the parts together hold exactly what extracting the whole shard at
    once gives."""
    import pyarrow.parquet as pq

    import assets.extract
    import pipeline.extract
    from app.run import run_index
    from pipeline.extract import extract_resilient, get_extractor
    from pipeline.storage import shard_files, store

    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "carol.txt").write_text(_book(shared_data)[:60_000], encoding="utf-8")
    monkeypatch.setattr(shard_files, "ROW_GROUP_ROWS", 8)
    monkeypatch.setattr(assets.extract, "PART_UNITS", 5)
    sizes: list[int] = []

    def counted(extractor, units, *args, **kwargs):
        sizes.append(units.height)
        return extract_resilient(extractor, units, *args, **kwargs)

    # the step extracts through pipeline.extract (the units not carried over, extract_carried)
    monkeypatch.setattr(pipeline.extract, "extract_resilient", counted)
    result = run_index(input_dir=str(inp), output_dir=str(tmp_path / "out"))
    assert result.success
    out = tmp_path / "out"
    units = store.read_table(out, "text_units")
    assert units.height > 20 and max(sizes) <= 5 and sum(sizes) == units.height
    whole, _, _ = extract_resilient(get_extractor(SETTINGS.extraction), units)
    parted = store.read_table(out, "extracted_entities")
    assert parted.height == whole.height
    assert parted.sort(parted.columns).equals(whole.select(parted.columns).sort(parted.columns))
    files = store.table_files(out, "extracted_entities")
    assert sum(pq.ParquetFile(f).metadata.num_row_groups for f in files) > 1

"""One huge document is chunked a window at a time (issue 45): the units are the ones cutting
it whole gives, cut for cut, and what chunking holds does not grow with the document."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import polars as pl
import pytest
from test_smart_chunking import _frames

from pipeline.chunking import documents, simple, smart, sources, units
from pipeline.chunking.documents import chunk_structured
from pipeline.chunking.simple import SimpleChunker
from pipeline.chunking.units import Unit, UnitFrames, units_frame
from pipeline.config import ChunkingSettings
from pipeline.ingest.text import decode_text
from pipeline.structure import DocStructure, position
from pipeline.structure.text import parse_text
from pipeline.tokens import _rank_lengths, count_tokens

SMALL = ChunkingSettings(chunk_size=120, overlap=20, min_size=40)  # ~3x the cuts per text
ONE_WINDOW = 10**9  # WINDOW_SENTENCES that holds any test text whole: the reference
# sha256 of the chunks' (start, end, n_tokens) of the book x3 (SimpleChunker, default and
# SMALL settings) and of the units' texts of `_structured(book, 2)` (chunk_structured), as
# the code before windows (commit ed4016f) cut them: windows changed no cut.
BEFORE_WINDOWS = {
    "plain": "1183ded1058bf4d085d097bc8e70e18e2fa09a3034f15d6ed12915501f67c35c",
    "plain small": "e1b5b0bf1b2301da19b863f3777d0ac95484db8cbd02577c982e0b547924a669",
    "structured": "31af85b394fc98feb2d7ec17dc3e11e18d0dda5aa0fc496ba9c6ff59180de8d2",
}


@pytest.fixture(scope="module")
def book(shared_data) -> str:
    return decode_text((shared_data / "christmas_carol" / "mock_data.txt").read_bytes())


def _structured(book: str, copies: int, doc_id: str = "doc-book") -> DocStructure:
    """The book `copies` times as one document: a section per stave (its heading a node),
    the paragraphs, every 40th a table (atomic), a page every 60."""
    doc = DocStructure(doc_id, f"{doc_id}.md", "A Christmas Carol")
    sid, k = doc.root_id, 0
    for copy in range(copies):
        for para in re.split(r"\n\s*\n", book):
            para = para.strip()
            if para.startswith("STAVE") and "\n" not in para:
                sid = doc.add_section(doc.root_id, "SECTION", f"{para.title()} ({copy})")
                doc.add_node(sid, "HEADING", f"## {para.title()}")
            elif para:
                k += 1
                if k % 40:
                    doc.add_node(sid, "PARAGRAPH", para, [position(1 + k // 60)])
                else:
                    table = f"| line | text |\n|---|---|\n| {k} | {para[:80]} |"
                    doc.add_node(sid, "TABLE", table, [position(1 + k // 60)])
    return doc


def _corpus(book: str):
    """A structured book x2, the book x2 as plain paragraphs (one section: one group of
    ~2,000 nodes), a short document, and one without structure (plain text fallback)."""
    structs = [
        _structured(book, 2),
        parse_text("doc-plain", "plain.txt", "Plain", (book + "\n\n") * 2),
        parse_text("doc-short", "short.txt", "Short", "One short paragraph.\n\nAnother one."),
    ]
    docs, sections, nodes = _frames(structs)
    bare = pl.DataFrame(
        {
            "id": ["doc-bare"],
            "human_readable_id": [3],
            "title": ["Bare"],
            "source_path": ["bare.txt"],
            "text": [book[: len(book) // 3]],
        }
    )
    return pl.concat([docs, bare]), sections, nodes


def _digest(values) -> str:
    return hashlib.sha256(repr(list(values)).encode()).hexdigest()


def _held(monkeypatch) -> list[tuple[int, int]]:
    """(sentences, tokens) each round of cut selection found in its window."""
    seen: list[tuple[int, int]] = []
    advance = SimpleChunker._advance

    def spy(self, source, win, cuts, final):
        seen.append((len(win), win.cum[-1] - win.cum[0]))
        return advance(self, source, win, cuts, final)

    monkeypatch.setattr(SimpleChunker, "_advance", spy)
    return seen


def test_max_token_chars_is_the_longest_o200k_token():
    assert max(_rank_lengths().values()) == simple.MAX_TOKEN_CHARS


@pytest.mark.parametrize("settings", [ChunkingSettings(), SMALL], ids=["default", "small"])
def test_windows_never_change_a_cut(book, monkeypatch, settings):
    """The book x3 (~12,000 sentences) cut in windows of 16 to 4,096 sentences: every chunk
    is the one the whole text in one window gives, and the same as before windows."""
    text = (book + "\n\n") * 3
    monkeypatch.setattr(simple, "WINDOW_SENTENCES", ONE_WINDOW)
    whole = SimpleChunker(settings).chunk(text)
    name = "plain" if settings == ChunkingSettings() else "plain small"
    assert _digest((c.start, c.end, c.n_tokens) for c in whole) == BEFORE_WINDOWS[name]
    for size in (16, 333, 4096):
        monkeypatch.setattr(simple, "WINDOW_SENTENCES", size)
        held = _held(monkeypatch)
        assert SimpleChunker(settings).chunk(text) == whole, f"windows of {size}"
        assert len(held) >= 3  # several windows, each cutting up to its last anchor


def test_structured_documents_give_the_same_units_whatever_the_windows(book, monkeypatch):
    """chunk_structured over a corpus whose big documents are cut in many windows, read from
    the frame a few nodes at a time, their units framed a few at a time: the same frame as
    one window, lists of all nodes and one frame part give, and as before windows."""
    docs, sections, nodes = _corpus(book)
    for settings in (ChunkingSettings(), SMALL):
        monkeypatch.setattr(simple, "WINDOW_SENTENCES", ONE_WINDOW)
        monkeypatch.setattr(documents, "READ_NODES", 10**9)
        monkeypatch.setattr(documents, "READ_BYTES", 10**12)
        whole = chunk_structured(docs, sections, nodes, settings)
        assert whole.height > 400 and whole.select(pl.col("document_id").n_unique()).item() == 4
        if settings == ChunkingSettings():
            mine = whole.filter(pl.col("document_id") == "doc-book")["text"]
            assert _digest(mine) == BEFORE_WINDOWS["structured"]
        monkeypatch.setattr(simple, "WINDOW_SENTENCES", 50)
        monkeypatch.setattr(documents, "READ_NODES", 7)
        monkeypatch.setattr(documents, "READ_BYTES", 3000)
        monkeypatch.setattr(units, "UNITS_PER_PART", 5)
        assert chunk_structured(docs, sections, nodes, settings).equals(whole)


class HashEmbedder:
    """Fake sentence model: 8 dimensions from a sentence's hash."""

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = [list(hashlib.blake2b(t.encode(), digest_size=8).digest()) for t in texts]
        return np.array(rows, dtype=np.float64) + 1


def test_semantic_chunking_reads_large_documents_from_the_frame_alike(book, monkeypatch):
    """Semantic cuts rank a boundary among all of its text's (one window, whatever
    WINDOW_SENTENCES); its documents read from the frame a batch at a time cut alike."""
    docs, sections, nodes = _corpus(book)
    settings = ChunkingSettings(method="semantic")
    whole = chunk_structured(docs, sections, nodes, settings, embedder=HashEmbedder())
    monkeypatch.setattr(simple, "WINDOW_SENTENCES", 50)
    monkeypatch.setattr(documents, "READ_NODES", 7)
    out = chunk_structured(docs, sections, nodes, settings, embedder=HashEmbedder())
    assert out.equals(whole) and whole.height > 400


def test_what_a_window_holds_does_not_grow_with_the_document(book, monkeypatch):
    """The book as one section of plain paragraphs, once and 4 times: the largest window,
    the text held and the nodes read at once are the same, far below the document."""
    monkeypatch.setattr(simple, "WINDOW_SENTENCES", 256)
    monkeypatch.setattr(documents, "READ_NODES", 100)
    texts: list[int] = []
    release = sources.RollingText.release

    def spy_release(self, pos):
        texts.append(len(self[self.base : 10**12]))
        release(self, pos)

    monkeypatch.setattr(sources.RollingText, "release", spy_release)
    reads: list[int] = []
    read_nodes = documents._read_nodes
    monkeypatch.setattr(
        documents,
        "_read_nodes",
        lambda frame, rows: reads.append(len(rows)) or read_nodes(frame, rows),
    )
    peaks = []
    for copies in (1, 4):
        held = _held(monkeypatch)
        texts.clear()
        reads.clear()
        doc = parse_text("doc-plain", "plain.txt", "Plain", (book + "\n\n") * copies)
        out = chunk_structured(*_frames([doc]), ChunkingSettings())
        assert out.height > 100 * copies
        peaks.append((max(n for n, _ in held), max(texts), max(reads)))
    assert peaks[1] == pytest.approx(peaks[0], rel=0.1)  # flat: 4x the book, the same window
    sentences, chars, nodes = peaks[1]
    assert sentences < 256 + 100 and chars < len(book) // 4 and nodes <= 100


def test_a_text_without_anchors_is_cut_in_bounded_windows(monkeypatch):
    """One sentence repeated 30,000 times has equal scores, so no local maximum: the windows
    cut it at their best boundary once a run passes FORCED_CUT_CHUNKS chunks."""
    monkeypatch.setattr(simple, "WINDOW_SENTENCES", 256)
    held = _held(monkeypatch)
    text = "The same sentence again. " * 30_000
    chunks = SimpleChunker(ChunkingSettings()).chunk(text)
    assert max(c.n_tokens for c in chunks) <= 300
    assert chunks[0].start == 0 and chunks[-1].end == len(text.rstrip())
    assert all(a.end >= b.start for a, b in zip(chunks, chunks[1:], strict=False))  # no gap
    bound = (simple.FORCED_CUT_CHUNKS + 8) * 300  # a forced run and a batch of sentences
    assert max(t for _, t in held) <= bound < count_tokens(text) // 5


def test_units_of_a_failed_try_are_taken_back_across_parts(monkeypatch):
    monkeypatch.setattr(units, "UNITS_PER_PART", 3)
    frames = UnitFrames({})
    a = [Unit("a", f"a{i}", 1, [1]) for i in range(4)]
    frames.extend(a)
    mark = frames.mark()
    frames.extend(Unit("b", f"b{i}", 1, [1]) for i in range(8))
    frames.rollback(mark)
    b = [Unit("b", "b plain", 1, [1])]
    frames.extend(b)
    assert frames.frame().equals(units_frame(a + b, {}))
    same = [Unit("c", "again", 1, [1])] * 7  # occurrences count across parts
    assert units_frame(same, {})["id"].n_unique() == 7


def fail_half_way(monkeypatch) -> None:
    """Smart chunking of "doc-book" raises at its 31st unit (after several frame parts)."""
    real = smart.SmartChunker._units

    def failing(self, document_id, tree, chunker, read):
        for k, unit in enumerate(real(self, document_id, tree, chunker, read)):
            if document_id == "doc-book" and k == 30:
                raise IndexError("list index out of range")
            yield unit

    monkeypatch.setattr(smart.SmartChunker, "_units", failing)


def test_a_document_failing_half_way_falls_back_to_its_text_alone(book, monkeypatch):
    """Its smart units made so far (several frame parts) are dropped for the plain ones."""
    docs, sections, nodes = _corpus(book)
    monkeypatch.setattr(units, "UNITS_PER_PART", 5)
    normal = chunk_structured(docs, sections, nodes, ChunkingSettings())
    fail_half_way(monkeypatch)
    failures: list[dict] = []
    out = chunk_structured(docs, sections, nodes, ChunkingSettings(), failures=failures)
    assert [(f["document_id"], f["fallback"]) for f in failures] == [
        ("doc-book", "plain paragraphs")
    ]
    text = docs.filter(pl.col("id") == "doc-book")["text"].item()
    plain = [c.text for c in SimpleChunker(ChunkingSettings()).chunk(text)]
    assert out.filter(pl.col("document_id") == "doc-book")["text"].to_list() == plain
    others = pl.col("document_id") != "doc-book"
    assert (
        out.filter(others)
        .drop("human_readable_id")
        .equals(normal.filter(others).drop("human_readable_id"))
    )

"""SimpleChunker: token limits, sentence-aligned ends, overlap, pages, and the property the
design rests on: an edit changes only the chunks around it."""

from __future__ import annotations

import random
import time

import polars as pl
import pytest

from pipeline import schemas
from pipeline.chunking.documents import chunk_documents
from pipeline.chunking.segments import segment
from pipeline.chunking.simple import Chunk, SimpleChunker
from pipeline.config import ChunkingSettings
from pipeline.ids import stable_id
from pipeline.ingest.text import decode_text
from pipeline.tokens import count_tokens

SETTINGS = ChunkingSettings()

WORDS = [
    "apple",
    "river",
    "stone",
    "light",
    "window",
    "garden",
    "silver",
    "morning",
    "quiet",
    "letter",
]
RU_WORDS = ["дом", "река", "камень", "свет", "окно", "сад", "серебро", "утро", "тишина", "письмо"]


def _sentences(n: int, words: list[str], seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
        out.append(f"{body[0].upper()}{body[1:]} number {i}{rng.choice('.!?')}")
    return out


def _paragraphs(sents: list[str], seed: int = 0) -> str:
    rng = random.Random(seed)
    paras, cur = [], []
    for s in sents:
        cur.append(s)
        if rng.random() < 0.15:
            paras.append(" ".join(cur))
            cur = []
    paras.append(" ".join(cur))
    return "\n\n".join(p for p in paras if p)


def _check_aligned(text: str, chunks: list[Chunk], sents: list[str]) -> None:
    """Every chunk is an exact slice made of whole sentences."""
    starts = {text.index(s) for s in sents}
    ends = {text.index(s) + len(s) for s in sents}
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert c.start in starts, c.text[:60]
        assert c.end in ends, c.text[-60:]


@pytest.fixture(scope="module")
def book(shared_data) -> str:
    return decode_text((shared_data / "christmas_carol" / "mock_data.txt").read_bytes())


def test_sentence_boundaries_and_token_limit():
    sents = _sentences(400, WORDS)
    text = _paragraphs(sents)
    chunks = SimpleChunker(SETTINGS).chunk(text)
    assert len(chunks) > 5
    _check_aligned(text, chunks, sents)
    for c in chunks:
        assert c.n_tokens == count_tokens(c.text) <= SETTINGS.chunk_size
    # Together the chunks cover every sentence.
    covered = "".join(c.text for c in chunks)
    assert all(s in covered for s in sents)


def test_min_size_and_small_limits():
    sents = _sentences(300, WORDS, seed=3)
    text = _paragraphs(sents, seed=3)
    s = ChunkingSettings(chunk_size=80, overlap=10, min_size=30, cut_divisor=2)
    chunks = SimpleChunker(s).chunk(text)
    _check_aligned(text, chunks, sents)
    assert max(c.n_tokens for c in chunks) <= 80
    # Bodies (without the overlap) are at least min_size tokens, save the last one.
    bodies = [
        count_tokens(text[max(c.start, p.end) : c.end])
        for p, c in zip(chunks, chunks[1:], strict=False)
    ]
    assert min(bodies[:-1]) >= 30 - 2


def test_overlap_is_trailing_whole_sentences():
    sents = _sentences(300, WORDS, seed=1)
    text = " ".join(sents)  # one paragraph: no structural boundary in the way
    chunks = SimpleChunker(SETTINGS).chunk(text)
    with_overlap = 0
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        assert cur.start > prev.start and cur.end > prev.end
        if cur.start < prev.end:
            with_overlap += 1
            shared = text[cur.start : prev.end]
            assert prev.text.endswith(shared) and cur.text.startswith(shared)
            assert count_tokens(shared) <= SETTINGS.overlap + 1
        else:
            assert cur.start > prev.end - 1
    # Sentences here are ~10-20 tokens, so every chunk has room for an overlap sentence.
    assert with_overlap == len(chunks) - 1


def test_no_overlap_when_disabled():
    sents = _sentences(300, WORDS, seed=2)
    text = " ".join(sents)
    chunks = SimpleChunker(ChunkingSettings(overlap=0)).chunk(text)
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        assert cur.start >= prev.end


def test_sentence_splitter_rules():
    text = (
        "Mr. Scrooge met Dr. Jones at St. Paul's, e.g. at noon. "
        '"Bah!" said Scrooge. "Humbug!" J. R. R. Tolkien wrote it. So did I. '
        "See Fig. 3 for details. It costs 3.5 pounds. Итак, т.е. всё. «Кто там?» — спросил он. "
        "Ёлка стоит. 1990 was a year."
    )
    _, ends, _ = segment(text)
    got = [text[:e].rsplit(" ", 1)[-1] for e in ends]
    assert got == [
        "noon.",
        "Scrooge.",
        '"Humbug!"',
        "it.",
        "I.",
        "details.",
        "pounds.",
        "всё.",
        "он.",
        "стоит.",
        "year.",
    ]


def test_structure_boundaries():
    text = (
        "Intro sentence one. Intro two\n\n# Heading A\n\nBody a. More body\n\n"
        "```python\n# comment. Not a heading\nx = 1\n```\n\nTail one\fPage two text. Last one."
    )
    starts, ends, levels = segment(text)
    segs = [text[a:b] for a, b in zip(starts, ends, strict=False)]
    assert segs == [
        "Intro sentence one.",
        "Intro two",
        "# Heading A",
        "Body a.",
        "More body",
        "```python\n# comment. Not a heading\nx = 1\n```",
        "Tail one",
        "Page two text.",
        "Last one.",
    ]
    assert levels[1] > levels[6] > levels[4] > levels[3] > levels[2]  # heading > page > para


def test_headings_start_chunks_not_end_them():
    sections = []
    for k in range(12):
        sections.append(f"## Section {k}\n\n" + _paragraphs(_sentences(25, WORDS, seed=k), k))
    text = "\n\n".join(sections)
    chunks = SimpleChunker(SETTINGS).chunk(text)
    for c in chunks:
        assert not c.text.rstrip().split("\n")[-1].startswith("## ")
    heads = [c for c in chunks if c.text.startswith("## Section")]
    assert len(heads) >= 8  # most sections start a fresh chunk


def test_long_sentence_fallback():
    words = [f"w{i % 97}" for i in range(3000)]
    text = "Start. Then " + " ".join(words) + " end. Final sentence here."
    assert len(segment(text)[0]) == 3
    chunks = SimpleChunker(SETTINGS).chunk(text)
    assert all(c.n_tokens <= SETTINGS.chunk_size for c in chunks)
    assert len(chunks) >= 3000 * 2 // SETTINGS.chunk_size // 2
    rebuilt = " ".join(c.text for c in chunks)
    for w in ("w0", "w96", "Final sentence here."):
        assert w in rebuilt
    # Pieces are cut at whitespace: no word is torn apart.
    for c in chunks:
        assert text[c.start - 1 : c.start] in ("", " ") and text[c.end : c.end + 1] in ("", " ")


def test_pages_from_form_feeds():
    pages = [_paragraphs(_sentences(60, WORDS, seed=p), p) for p in range(5)]
    text = "\f".join(pages)
    chunks = SimpleChunker(SETTINGS).chunk(text)
    for c in chunks:
        first = text.count("\f", 0, c.start) + 1
        last = text.count("\f", 0, c.end) + 1
        assert c.pages == list(range(first, last + 1))
    assert {p for c in chunks for p in c.pages} == {1, 2, 3, 4, 5}
    assert any(len(c.pages) == 1 for c in chunks)
    short = SimpleChunker(SETTINGS).chunk("One page.\fTwo page.\f\fFour.")
    assert len(short) == 1 and short[0].pages == [1, 2, 3, 4]


def test_russian_text():
    sents = _sentences(300, RU_WORDS, seed=5)
    text = _paragraphs(sents, seed=5)
    chunks = SimpleChunker(SETTINGS).chunk(text)
    assert len(chunks) > 3
    _check_aligned(text, chunks, sents)
    assert all(c.n_tokens <= SETTINGS.chunk_size for c in chunks)
    # Cyrillic capitals start sentences: one paragraph of many sentences still splits.
    assert len(segment(" ".join(sents[:50]))[0]) == 50


def test_deterministic(book):
    a = SimpleChunker(SETTINGS).chunk(book)
    b = SimpleChunker(SETTINGS).chunk(book)
    assert a == b


def test_book_stats_and_speed(book):
    chunker = SimpleChunker(SETTINGS)
    chunker.chunk("warm up the tokenizer.")
    t0 = time.perf_counter()
    chunks = chunker.chunk(book)
    elapsed = time.perf_counter() - t0
    toks = [c.n_tokens for c in chunks]
    print(f"\nbook: {len(chunks)} chunks, tokens min {min(toks)} mean {sum(toks) / len(toks):.0f}")
    print(f"max {max(toks)}, {elapsed * 1000:.0f} ms")
    assert elapsed < 1.0
    assert max(toks) <= SETTINGS.chunk_size
    assert 100 < len(chunks) < 600
    for c in chunks:
        assert book[c.start : c.end] == c.text


def _new_chunks(chunker: SimpleChunker, original: list[Chunk], edited_text: str) -> int:
    before = {c.text for c in original}
    return sum(1 for c in chunker.chunk(edited_text) if c.text not in before)


def _greedy(text: str, size: int) -> list[Chunk]:
    """A naive packer: fill sentences up to `size` tokens from the document start."""
    starts, ends, _ = segment(text)
    out, a, used = [], 0, 0
    for i in range(len(starts)):
        n = count_tokens(text[starts[i] : ends[i]])
        if used and used + n > size:
            out.append(Chunk(text[starts[a] : ends[i - 1]], used, [1], starts[a], ends[i - 1]))
            a, used = i, 0
        used += n
    out.append(Chunk(text[starts[a] : ends[-1]], used, [1], starts[a], ends[-1]))
    return out


def test_edit_locality(book):
    chunker = SimpleChunker(SETTINGS)
    original = chunker.chunk(book)
    first_line = book.split("\n", 1)[0]
    assert "Christmas Carol" in first_line
    edited = book.replace(first_line, first_line.replace("Carol", "Song"), 1)
    n_first = _new_chunks(chunker, original, edited)

    starts, ends, _ = segment(book)
    mid = next(i for i in range(len(starts)) if starts[i] > len(book) // 2)
    inserted = book[: ends[mid]] + " Nobody noticed the clock strike thirteen." + book[ends[mid] :]
    n_mid = _new_chunks(chunker, original, inserted)
    print(f"\nnew chunks: first-line edit {n_first}, middle insert {n_mid}")
    assert 1 <= n_first <= 2
    assert 1 <= n_mid <= 3


def _random_insertions(book: str, n: int, seed: int) -> list[str]:
    starts, ends, _ = segment(book)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        i = rng.randrange(len(starts))
        out.append(book[: ends[i]] + " Nobody noticed the clock strike thirteen." + book[ends[i] :])
    return out


def test_edit_locality_anywhere(book):
    """Not a lucky spot: insertions anywhere stay local (rarely 4 new chunks, when the edit
    changes which boundary splits an over-long span; never a cascade)."""
    chunker = SimpleChunker(SETTINGS)
    original = chunker.chunk(book)
    new = [_new_chunks(chunker, original, t) for t in _random_insertions(book, 40, seed=7)]
    print(f"\n40 random insertions, new chunks: {new}")
    assert max(new) <= 4
    assert sum(new) / len(new) <= 1.6
    assert sum(x <= 3 for x in new) >= 38


def test_naive_packer_lacks_locality(book):
    """The property is meaningful: a greedy packer (fill sentences up to chunk_size from the
    document start) often re-synchronises too, but some insertions re-chunk a long run."""
    chunker = SimpleChunker(SETTINGS)
    ours_before = {c.text for c in chunker.chunk(book)}
    greedy_before = {c.text for c in _greedy(book, SETTINGS.chunk_size)}
    ours, greedy = [], []
    for text in _random_insertions(book, 20, seed=1):
        ours.append(sum(c.text not in ours_before for c in chunker.chunk(text)))
        greedy.append(sum(c.text not in greedy_before for c in _greedy(text, SETTINGS.chunk_size)))
    print(f"\n20 random insertions, new chunks: ours {ours}, greedy {greedy}")
    assert max(ours) <= 4
    assert max(greedy) > 10 and sum(greedy) > 2 * sum(ours)


def test_chunk_documents_frame():
    docs = pl.DataFrame(
        {
            "id": ["docB", "docA", "docC"],
            "human_readable_id": [1, 0, 2],
            "text": [
                _paragraphs(_sentences(200, WORDS, seed=9), 9),
                "Short one. Tiny.",
                "Repeated boilerplate line.\f" * 3 + "Different.",
            ],
        }
    )
    tu = chunk_documents(docs, SETTINGS)
    assert tu.columns == schemas.TEXT_UNITS.names
    assert tu.schema == schemas.empty("text_units").schema
    assert tu["document_id"][0] == "docA"  # ordered by document human_readable_id
    assert tu["human_readable_id"].to_list() == list(range(tu.height))
    assert tu["id"].n_unique() == tu.height
    for row in tu.iter_rows(named=True):
        assert row["id"] == stable_id(row["document_id"], row["text"], "0")
        assert row["section_id"] is None
        assert row["content_node_ids"] == [] and row["entity_ids"] == []
    seqs = tu.group_by("document_id", maintain_order=True).agg("seq")
    assert all(s == list(range(len(s))) for s in seqs["seq"].to_list())
    assert tu.filter(pl.col("document_id") == "docC")["pages"].to_list() == [[1, 2, 3, 4]]
    assert chunk_documents(docs, SETTINGS).equals(tu)
    assert chunk_documents(docs.clear(), SETTINGS).height == 0


def test_many_short_documents_fast(shared_data):
    import json

    corpus = json.loads((shared_data / "musique" / "musique_train_corpus.json").read_text("utf-8"))
    docs = pl.DataFrame(
        {
            "id": [str(i) for i in range(len(corpus))],
            "human_readable_id": list(range(len(corpus))),
            "text": [c["title"] + "\n\n" + c["text"] for c in corpus],
        }
    )
    count_tokens("warm")
    t0 = time.perf_counter()
    tu = chunk_documents(docs, SETTINGS)
    elapsed = time.perf_counter() - t0
    print(f"\n{docs.height} documents -> {tu.height} units in {elapsed * 1000:.0f} ms")
    assert elapsed < 2.0
    assert tu["document_id"].n_unique() == docs.height

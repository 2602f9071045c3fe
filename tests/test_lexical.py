"""The lexical side of retrieval (pipeline/lexical): the analyser, the BM25 index, its mix with
the dense cosine, and both through the real index job and the query modes."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from app.run import run_index
from pipeline.config import load_settings
from pipeline.lexical.analysis import query_terms
from pipeline.lexical.bm25 import LexicalIndex, corpus_latin, index_dir
from pipeline.lexical.fusion import hybrid
from pipeline.query import GraphIndex
from pipeline.query.rerank import graph_trust


def test_russian_case_forms_share_a_term_and_stop_words_go():
    assert query_terms("Москвы") == query_terms("Москва") == query_terms("Москве")
    assert query_terms("и в на the of") == []
    assert query_terms("ёлка") == query_terms("елка")
    # each script through its own stemmer, whatever the text's language
    assert query_terms("Running в Москве") == ["run", *query_terms("Москва")]
    assert "113" in query_terms("the A-113 code")


def test_index_saves_loads_and_scores_the_rare_code_first(tmp_path):
    ids = ["a", "b", "c"]
    texts = pl.Series(
        [
            "The pump stops with fault code E-4471 when the inlet is blocked.",
            "The pump stops with a fault when the inlet is blocked.",
            "Clean the inlet filter of the pump every month.",
        ]
    )
    LexicalIndex.build(ids, texts).save(tmp_path / "units")
    lex = LexicalIndex.load(tmp_path / "units")
    assert lex is not None and lex.ids == ids
    scores = lex.scores("What does code 4471 mean?")
    assert int(np.argmax(scores)) == 0 and scores[1] == scores[2] == 0.0
    assert not lex.scores("zzzz qqqq").any()
    assert LexicalIndex.load(tmp_path / "missing") is None
    # aligned with another table's rows (a scoped index, a unit the index lacks: 0)
    rows = lex.rows_of(pl.Series(["c", "x", "a"]))
    assert rows.tolist() == [2, -1, 0]
    assert lex.scores("code 4471", rows).tolist() == [0.0, 0.0, scores.max()]


@pytest.mark.parametrize("texts", [[], ["и в на !!!"], ["😀 ...", ""]])
def test_a_corpus_without_a_term_indexes_and_scores_nothing(tmp_path, texts):
    # no unit, or units of stop words and symbols only: bm25s alone cannot index them
    ids = [f"u{i}" for i in range(len(texts))]
    LexicalIndex.build(ids, pl.Series(texts, dtype=pl.Utf8)).save(tmp_path / "units")
    lex = LexicalIndex.load(tmp_path / "units")
    assert lex is not None and lex.ids == ids and lex.vocabulary == 0
    rows = lex.rows_of(pl.Series(["u0", "other"]))
    assert rows.tolist() == ([0, -1] if texts else [-1, -1])
    assert not lex.scores("и hello", rows).any() and lex.scores("hello").size == len(texts)


@pytest.mark.parametrize("block", [None, 97])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_score_matrix_equals_bm25s_own_index_to_the_bit(seed, block, monkeypatch):
    """pipeline.lexical.bm25_scores builds on whole arrays what bm25s builds a document at a
    time: same data, indices and indptr (empty documents, repeats and unused ids too), scored
    in one block or in many (`block` entries each)."""
    import bm25s

    from pipeline.lexical import bm25_scores
    from pipeline.lexical.bm25 import K1, B
    from pipeline.lexical.bm25_scores import counts_of, score_matrix

    if block is not None:
        monkeypatch.setattr(bm25_scores, "SCORE_BLOCK", block)

    rng = np.random.default_rng(seed)
    n_vocab = 300
    docs = [
        rng.zipf(1.3, size=int(rng.integers(0, 80))).clip(max=n_vocab - 1).astype(np.int32)
        for _ in range(400)
    ]
    vocab = {f"t{i}": i for i in range(n_vocab)}
    ref = bm25s.BM25(k1=K1, b=B)
    ref.index(([d.tolist() for d in docs], dict(vocab)), show_progress=False)
    lengths = np.array([len(d) for d in docs])
    got = score_matrix(counts_of(np.concatenate(docs), lengths), n_vocab, K1, B)
    for key in ("data", "indices", "indptr"):
        want = np.asarray(ref.scores[key])
        assert got[key].dtype == want.dtype and np.array_equal(got[key], want), key
    assert got["num_docs"] == ref.scores["num_docs"]


def test_stable_order_is_numpys_stable_argsort():
    """bm25_scores.stable_order (16-bit radix passes) orders as a stable argsort does: one
    digit, two digits (ties kept in order), empty, and past 32 bits (the fallback)."""
    from pipeline.lexical.bm25_scores import stable_order

    rng = np.random.default_rng(3)
    for top in (1, 300, 2**16, 2**20, 2**33):
        values = rng.integers(0, top, size=5000, dtype=np.int64)
        assert np.array_equal(stable_order(values), np.argsort(values, kind="stable")), top
    assert len(stable_order(np.zeros(0, dtype=np.int64))) == 0


@pytest.mark.parametrize("batch", [1, 7])
def test_an_index_counted_in_batches_is_the_one_batch_build_file_for_file(
    tmp_path, batch, monkeypatch
):
    """LexicalIndex.build counts a batch of texts at a time (bm25_scores.Counts.concat): its
    files equal those of one batch, empty texts and texts of stop words only among them."""
    import filecmp

    from pipeline.lexical import bm25
    from pipeline.lexical.bm25 import LexicalIndex

    rng = np.random.default_rng(batch)
    words = [f"w{i}" for i in range(200)] + ["Москве", "the"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 25)))) for _ in range(60)] + [
        "",
        "the and",
    ]
    ids = [f"u{i}" for i in range(len(texts))]
    LexicalIndex.build(ids, pl.Series(texts)).save(tmp_path / "one")
    monkeypatch.setattr(bm25, "BUILD_BATCH", batch)
    LexicalIndex.build(ids, pl.Series(texts)).save(tmp_path / "batched")
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "batched").iterdir())
    for name in names:
        assert filecmp.cmp(tmp_path / "one" / name, tmp_path / "batched" / name, shallow=False)


def test_a_carried_index_is_the_whole_build_file_for_file(tmp_path):
    """pipeline.lexical.bm25_carry: after random edits, additions and deletions, the index
    built from the base's terms plus the changed units' analysis is the whole build's."""
    import filecmp
    import random
    import shutil

    from pipeline.lexical.bm25 import unit_index, unit_languages, unit_texts
    from pipeline.lexical.bm25_carry import carried_index, read_base

    rng = random.Random(4)
    words = [f"w{i}" for i in range(300)] + ["Москве", "the", "and"]
    weights = [1 / (i + 1) for i in range(len(words))]  # a few common terms, many rare ones

    def doc() -> tuple[str, list[tuple[str, str]]]:
        d = f"doc{rng.randrange(10**6):06d}"  # sorts anywhere among the others
        units = [
            (f"{d}-u{i}", " ".join(rng.choices(words, weights, k=rng.randrange(0, 30))))
            for i in range(rng.randrange(1, 4))
        ]
        return d, units

    corpus = dict(doc() for _ in range(30))

    def tables():
        """Units in document order (a new document anywhere among them), titles naming
        the document (terms only it has)."""
        units = pl.DataFrame(
            [(uid, text, d) for d, us in sorted(corpus.items()) for uid, text in us],
            schema=["id", "text", "document_id"],
            orient="row",
        )
        docs = pl.DataFrame(
            {
                "id": list(corpus),
                "title": [f"T {d}" for d in corpus],
                "language": ["en"] * len(corpus),
            }
        )
        return units, docs

    unit_index(*tables()).save(tmp_path / "base")
    for step in range(12):
        added = set()
        for _ in range(rng.randrange(1, 3)):
            victim = rng.choice(sorted(corpus))
            op = rng.choice(["edit", "add", "delete"])
            if op != "add":
                del corpus[victim]
            if op != "delete":
                d, us = doc()
                corpus[d] = us
                added.add(d)
        units, docs = tables()
        fresh = units["document_id"].is_in(list(added))
        base = read_base(tmp_path / "base", "en")
        assert not isinstance(base, str), base
        carried = carried_index(
            units["id"],
            fresh,
            unit_texts(units.filter(fresh), docs),
            base,
            "en",
            unit_languages(units, docs),
        )
        carried.save(tmp_path / "carried")
        unit_index(units, docs).save(tmp_path / "whole")
        names = sorted(p.name for p in (tmp_path / "whole").iterdir())
        assert names == sorted(p.name for p in (tmp_path / "carried").iterdir())
        for name in names:
            assert filecmp.cmp(
                tmp_path / "whole" / name, tmp_path / "carried" / name, shallow=False
            ), (step, name)
        shutil.rmtree(tmp_path / "base")
        (tmp_path / "carried").rename(tmp_path / "base")  # the next step's base


def test_corpus_latin_is_the_commonest_non_russian_language_with_a_stemmer():
    assert corpus_latin(pl.Series(["ru", "ru", "de", "en", "de"])) == "de"
    assert corpus_latin(pl.Series(["ru", "xx"])) == "en"


def test_hybrid_is_dense_at_weight_zero_and_puts_lexical_on_the_cosine_scale():
    dense, lex = np.array([0.6, 0.5, 0.1]), np.array([0.0, 2.0, 8.0])
    assert np.allclose(hybrid(dense, lex, 0.0), dense)
    assert np.allclose(hybrid(dense, None, 0.5), dense)
    assert np.allclose(hybrid(dense, np.zeros(3), 0.5), dense)  # no term matched
    mixed = hybrid(dense, lex, 0.5)
    assert np.allclose(mixed, 0.5 * dense + 0.5 * 0.6 * lex / 8.0)
    assert mixed.max() <= dense.max() + 1e-12  # the best unit is worth the best cosine


# Service notes that differ only in their fault codes: the dense model reads them as one text.
CODES = {
    "E-2204": "the inlet valve is stuck",
    "E-3187": "the outlet sensor is dirty",
    "E-4471": "the motor overheated",
    "E-5902": "the power supply dropped",
    "E-6630": "the control board lost its settings",
    "E-7315": "the filter is clogged",
    "E-8046": "the pressure is too low",
    "E-9158": "the water tank is empty",
}


@pytest.fixture(scope="module")
def fault_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    inp, out = root / "input", root / "output"
    inp.mkdir()
    for code, cause in CODES.items():
        (inp / f"{code}.md").write_text(
            f"# Pump fault {code}\n\nWhen the pump shows fault {code} on its display, {cause}. "
            "Switch the pump off, wait one minute and call the service line before restarting "
            "it.\n",
            encoding="utf-8",
        )
    result = run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR")
    assert result.success
    return out, result


@pytest.mark.slow
def test_hybrid_seeds_find_an_exact_code_the_dense_model_misses(fault_index):
    out, _ = fault_index
    query = "What does fault 7315 mean?"
    settings = load_settings(overrides={"output_dir": str(out)})
    dense_only = settings.model_copy(
        update={"query": settings.query.model_copy(update={"lexical_weight": 0.0})}
    )
    dense = GraphIndex.open(out, dense_only).naive_search(query, top_k=1)
    assert "7315" not in dense.records[0]["text"]  # what this test is about: dense misses it
    index = GraphIndex.open(out, settings)
    for mode in ("naive", "local", "expand", "flow"):
        result = getattr(index, f"{mode}_search")(query)
        first = index.text_units.filter(pl.col("id") == result.text_unit_ids[0])["text"][0]
        assert "7315" in first, (mode, first)
    assert any("hybrid search" in line for line in index.naive_search(query).trace)


@pytest.mark.slow
def test_lexical_index_metadata_records_the_languages(fault_index):
    _, result = fault_index
    [event] = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.path == ["lexical_index"]
    ]
    meta = event.materialization.metadata
    assert meta["rows"].value == len(CODES)
    assert meta["document_languages"].value == {"en": len(CODES)}
    assert meta["latin_stemmer"].value == "en"
    assert meta["corpus_language"].value == "en" and meta["embedding_reads_corpus"].value
    assert meta["unit_ranking"].value == "cosine 0.6 + BM25 0.4"


RUSSIAN = {
    "moscow.txt": "Московский метрополитен\n\nПервая линия метрополитена открылась в Москве "
    "в 1935 году. Сегодня метро Москвы перевозит миллионы пассажиров в день.",
    "kazan.txt": "Казанский кремль\n\nКремль в Казани построен в XVI веке. Его башни видны "
    "с берега Волги.",
    "novosibirsk.txt": "Новосибирский театр оперы и балета\n\nТеатр в Новосибирске открылся в "
    "1945 году и стал самым большим театром страны.",
}


@pytest.mark.slow
def test_russian_question_ranks_by_bm25_across_case_forms(tmp_path):
    inp, out = tmp_path / "input", tmp_path / "output"
    inp.mkdir()
    for name, text in RUSSIAN.items():
        (inp / name).write_text(text, encoding="utf-8")
    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    index = GraphIndex.open(out)
    # the decision, recorded in the index: a Russian corpus, which the packaged model cannot read
    lex = LexicalIndex.load(index_dir(index.root, "text_units"))
    assert lex.corpus_language == "ru" and lex.languages == {"ru": len(RUSSIAN)}
    # "Москве" and "Москвы" are one entity, titled by its nominative
    moscow = index.entities.filter(pl.col("title") == "Москва")
    assert moscow.height == 1 and moscow["type"][0] == "CITY"
    assert not index.entities["title"].is_in(["Москве", "Москвы"]).any()
    query = "Когда открылась первая линия метро в Москва?"  # "Москва": not the text's form
    assert not index.dense_reads(query)  # the packaged model reads English
    for mode in ("naive", "local", "expand", "flow"):
        result = getattr(index, f"{mode}_search")(query)
        first = index.text_units.filter(pl.col("id") == result.text_unit_ids[0])["text"][0]
        assert "1935" in first, (mode, first)
    assert "BM25" in index.naive_search(query).trace[1]


@pytest.mark.slow
def test_an_edit_and_a_deletion_reach_the_lexical_index(indexed_sample):
    inp, out = indexed_sample
    (inp / "nobel_prize.md").unlink()
    bohr = inp / "niels_bohr.md"
    bohr.write_text(bohr.read_text(encoding="utf-8") + "\nBohr kept a tortoise named Zyxomir.\n")
    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    index = GraphIndex.open(out)
    lex, _ = index.lexical_units
    assert not index.documents["source_path"].str.contains("nobel_prize").any()
    assert set(lex.ids) == set(index.text_units["id"])  # the new version's units, no other
    [top] = index.naive_search("Zyxomir", top_k=1).records
    assert "Zyxomir" in top["text"]


@pytest.mark.slow
def test_graph_weighs_nothing_where_titles_name_no_entity(fault_index, sample_run):
    out, _ = fault_index
    index = GraphIndex.open(out)
    assert graph_trust(index) == 0.0  # "Pump fault E-2204" names no entity of the index
    query = "Why does the pump stop when the tank is empty?"
    naive = index.naive_search(query).text_unit_ids
    assert index.local_search(query).text_unit_ids[:5] == naive[:5]
    assert index.expand_search(query).text_unit_ids[:5] == naive[:5]
    # the sample's articles are titled by the people and events they are about
    assert graph_trust(GraphIndex.open(sample_run[1])) == 1.0

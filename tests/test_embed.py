"""Embedder, embedding cache and Lance vector tables."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import lancedb
import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import PACKAGED_MODEL, EmbeddingSettings
from pipeline.storage import store
from pipeline.vectors.embed import (
    CachedEmbedder,
    Embedder,
    cache_key,
    get_embedder,
    resolve_model,
    token_batches,
)
from pipeline.vectors.embed_cache import USED_DIR, compact_cache, sweep_unused
from pipeline.vectors.lance import (
    build_vector_table,
    build_vector_tables,
    read_vectors,
)
from pipeline.vectors.texts import embedding_text


class FakeEmbedder:
    """Deterministic hash vectors; counts what reaches the 'model'."""

    def __init__(self, dim: int = 8, model_id: str = "fake-model"):
        self._dim = dim
        self._model_id = model_id
        self.calls: list[list[str]] = []

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256((self._model_id + t).encode()).digest()[:4])
            v = np.random.default_rng(seed).standard_normal(self._dim)
            out[i] = v / np.linalg.norm(v)
        return out


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return get_embedder(EmbeddingSettings())


def test_packaged_model_embeds_normalised_vectors(minilm: Embedder):
    assert minilm.model_id == resolve_model(PACKAGED_MODEL)
    assert isinstance(minilm.model_id, str) and minilm.model_id.endswith("model")
    vecs = minilm.embed(["The cat sat on the mat.", "Кошка сидела на коврике.", "Stock prices"])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert minilm.dim == 384
    # Related sentences are closer than unrelated ones.
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] - 0.5
    assert minilm.embed([]).shape == (0, 384)


def test_batches_follow_exact_token_lengths_within_the_budget(minilm: Embedder):
    # Four characters look like one token; a name in a script the vocabulary splits per
    # character is many. Batches sized by the real lengths stay within the padded budget.
    texts = ["Paris", "Αλέξανδρος ο Μέγας", "a sentence about the river banks " * 3, "Oslo"]
    lengths = minilm.token_lengths(texts)
    assert lengths[0] == 3 and lengths[1] > 2 * (len(texts[1]) // 4 + 2)
    assert lengths[2] == len(minilm.model.tokenizer(texts[2])["input_ids"])
    assert minilm.token_lengths(["word " * 2000])[0] == minilm.model.max_seq_length

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 300, size=500)
    batches = token_batches(lengths, batch_tokens=1024, max_texts=64)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(500))  # every row once
    assert list(lengths[rows]) == sorted(lengths, reverse=True)  # longest first
    for batch in batches:
        assert len(batch) <= 64
        assert len(batch) == 1 or len(batch) * lengths[batch].max() <= 1024
    assert [len(b) for b in token_batches(np.array([2000, 5, 5]), 1024, 64)] == [1, 2]


def test_get_embedder_is_one_per_model_and_device(minilm: Embedder):
    assert get_embedder(EmbeddingSettings()) is minilm
    other = get_embedder(EmbeddingSettings(model="/nonexistent/model", device="cpu"))
    assert other is not minilm and other.model_id == "/nonexistent/model"


def test_cache_skips_seen_texts_and_keeps_order(tmp_path):
    fake = FakeEmbedder()
    cached = CachedEmbedder(fake, tmp_path / "cache")
    first = cached.embed(["a", "b", "a", "c"])
    assert fake.calls == [["a", "b", "c"]]  # duplicates embedded once
    np.testing.assert_array_equal(first[0], first[2])

    # A new CachedEmbedder (a new run) reads the shards: only "d" reaches the model.
    again = CachedEmbedder(fake, tmp_path / "cache")
    second = again.embed(["c", "d", "a"])
    assert fake.calls[-1] == ["d"]
    np.testing.assert_array_equal(second[0], first[3])
    np.testing.assert_array_equal(second[2], first[0])
    np.testing.assert_array_equal(second[1], fake.embed(["d"])[0])
    assert (again.hits, again.misses) == (2, 1)
    assert again.embed([]).shape == (0, 8)

    # No temp files left behind; another model's vectors never serve this one.
    assert not list((tmp_path / "cache").rglob("*.tmp"))
    other = FakeEmbedder(dim=4, model_id="other")
    out = CachedEmbedder(other, tmp_path / "cache").embed(["a"])
    assert out.shape == (1, 4) and other.calls == [["a"]]


def _frames() -> dict[str, pl.DataFrame]:
    tu = pl.DataFrame(
        {"id": ["u1", "u2"], "text": ["Cats purr softly.", "Ёжики живут в лесу."]}
    ).with_columns(document_id=pl.lit("d1"))
    ents = pl.DataFrame(
        {
            "id": ["e1"],
            "title": ["CAT"],
            "type": ["ANIMAL"],
            "description": ["a small domesticated feline " * 80],
            "text_unit_ids": [["u1"]],
            "frequency": [1],
        }
    )
    rels = pl.DataFrame(
        {
            "id": ["r1"],
            "source": ["CAT"],
            "target": ["MOUSE"],
            "source_id": ["e1"],
            "target_id": ["e-unknown"],
            "description": ["chases"],
            "text_unit_ids": [["u1", "u2"]],
        }
    )
    reps = pl.DataFrame(
        {
            "id": ["c1"],
            "title": ["Animals"],
            "summary": ["Cats and hedgehogs."],
            "full_content": [""],
            "community": [3],
            "level": [0],
        }
    )
    return {"text_units": tu, "entities": ents, "relationships": rels, "community_reports": reps}


def test_a_lookup_reads_only_the_cache_files_that_hold_its_keys(tmp_path, monkeypatch):
    """A nightly run asks the cache for a few texts: only the files holding them are read
    (each file's keys are known once per process), and their vectors are the ones cached."""
    fake = FakeEmbedder()
    cached = CachedEmbedder(fake, tmp_path)
    first = {t: cached.embed([t])[0] for t in ("a", "b", "c")}  # one file each
    files = cached._shards()
    read: list[list[str]] = []
    scan = pl.scan_parquet

    def recording(source, *args, **kwargs):
        read.append(sorted(Path(p).name for p in source))
        return scan(source, *args, **kwargs)

    monkeypatch.setattr(pl, "scan_parquet", recording)
    again = CachedEmbedder(fake, tmp_path)
    out = again.embed(["b", "new"])
    np.testing.assert_array_equal(out[0], first["b"])
    assert fake.calls[-1] == ["new"] and (again.hits, again.misses) == (1, 1)
    assert read == [[files[1].name]]  # the files are named in the order they were written
    read.clear()
    again.embed(["nothing cached"])  # no file holds it: none is read
    assert read == []


def test_compaction_bounds_the_cache_files_and_keeps_every_vector(tmp_path):
    fake = FakeEmbedder()
    cached = CachedEmbedder(fake, tmp_path)
    texts = [f"text {i}" for i in range(70)]
    for text in texts:  # one file per call that met a new text, as nightly runs add them
        cached.embed([text])
    before = cached.embed(texts)
    assert len(cached._shards()) == 70 and len(fake.calls) == 70
    assert compact_cache(tmp_path, max_files=64) == 39  # the 39 smallest -> one file
    assert len(cached._shards()) == 32
    assert compact_cache(tmp_path, max_files=64) == 0  # under the bound: nothing to do
    again = CachedEmbedder(fake, tmp_path)
    np.testing.assert_array_equal(again.embed(texts), before)
    assert len(fake.calls) == 70 and again.hits == 70  # every vector still there


def test_the_sweep_keeps_the_vectors_used_since_and_nothing_else(tmp_path):
    fake = FakeEmbedder()
    CachedEmbedder(fake, tmp_path).embed(["old", "kept", "other"])  # a run no longer kept
    CachedEmbedder(FakeEmbedder(model_id="gone"), tmp_path).embed(["kept"])  # another model
    time.sleep(0.05)
    since = time.time()
    time.sleep(0.05)
    later = CachedEmbedder(fake, tmp_path)
    later.embed(["kept", "new"])  # a kept version's run: one hit, one new vector
    assert sweep_unused(tmp_path, None) == 0  # a kept version's start unknown: nothing goes
    assert sweep_unused(tmp_path, since) == 3  # "old", "other", the other model's "kept"
    held = pl.read_parquet(list(later.model_dir.glob("*.parquet")))["key"]
    assert set(held) == {cache_key(fake.model_id, t) for t in ("kept", "new")}
    assert len(list((later.model_dir / USED_DIR).iterdir())) == 1  # older records went too
    gone = CachedEmbedder(FakeEmbedder(model_id="gone"), tmp_path).model_dir
    assert not list(gone.glob("*.parquet")) and not list((gone / USED_DIR).iterdir())
    assert sweep_unused(tmp_path, since) == 0
    again = CachedEmbedder(fake, tmp_path)
    again.embed(["kept", "new"])
    assert (again.hits, again.misses) == (2, 0)


def test_titles_embedded_by_type_and_the_units_they_are_in():
    from pipeline.vectors.derive_vectors import embedded_titles

    entities = pl.DataFrame(
        {
            "title": ["Ada Quill", "Tallinn", "silt levels", "river survey", "1911", None],
            "type": ["PERSON", "CITY", "CONCEPT", "CONCEPT", "DATE", "PERSON"],
            "frequency": [1, 3, 1, 2, 4, 2],
        }
    )
    rows, titles = embedded_titles(entities)  # named, and keyphrases of 2+ units; no dates
    assert rows.tolist() == [0, 1, 3, 5] and titles == ["Ada Quill", "Tallinn", "river survey", ""]
    rows, _ = embedded_titles(entities, min_units=2)  # embedding.title_min_units
    assert rows.tolist() == [1, 3, 5]
    assert EmbeddingSettings(title_min_units=2).title_min_units == 2
    for bad in ({"title_min_units": 0}, {"batch_tokens": 0}, {"batch_size": -1}):
        with pytest.raises(ValueError):
            EmbeddingSettings(**bad)


def test_embedding_text_renders_and_truncates():
    f = _frames()
    ent = embedding_text("entities", f["entities"])[0]
    assert ent.startswith("CAT (ANIMAL): a small domesticated feline")
    assert len(ent.split()) < 120  # the 400-word description is cut to ~100 tokens
    assert embedding_text("relationships", f["relationships"]) == ["CAT -> MOUSE: chases"]
    # An empty full_content falls back to title + summary.
    assert embedding_text("community_reports", f["community_reports"]) == [
        "Animals\nCats and hedgehogs."
    ]
    with pytest.raises(ValueError):
        embedding_text("documents", f["text_units"])


@pytest.mark.parametrize("mode", ["name+context", "text"])
def test_lance_tables_store_the_whole_rendering_and_the_model_reads_it_cut(tmp_path, mode):
    """The token cap bounds what the model reads; the stored, full-text indexed text is the
    whole rendering, so the last words of a long description are searchable."""
    fake = FakeEmbedder(dim=8)
    f = _frames()
    settings = EmbeddingSettings(entity_vectors=mode)
    build_vector_table(tmp_path, "text_units", f["text_units"], fake, settings)
    fake.calls.clear()
    entities = f["entities"].with_columns(pl.col("description") + "in Zanzibar")
    build_vector_table(tmp_path, "entities", entities, fake, settings)
    table = store.lance_db(tmp_path).open_table("entities")
    whole = "CAT (ANIMAL): " + entities["description"][0]
    assert table.to_arrow()["text"].to_pylist() == [whole]
    hits = table.search("zanzibar", query_type="fts").limit(1).to_arrow()
    assert hits["id"].to_pylist() == ["e1"]
    read = [t for call in fake.calls for t in call]
    if mode == "text":  # the model read the description cut to ENTITY_TOKENS
        assert read == embedding_text("entities", entities) and "Zanzibar" not in read[0]
    else:  # derived: the model read the title only
        assert read == ["CAT"]


def test_text_units_are_cut_by_their_known_token_count(monkeypatch):
    """A unit's n_tokens (the chunker's exact o200k count) says whether it needs cutting:
    one within the cap is not encoded again, one over it is cut to TEXT_UNIT_TOKENS."""
    from pipeline.tokens import count_tokens
    from pipeline.vectors import texts

    long = " ".join(f"word{i}" for i in range(800))
    short = "a short unit " * 60  # more characters than the cap, far fewer tokens
    units = pl.DataFrame({"text": [short, long], "n_tokens": [count_tokens(short), 1600]})
    cut = embedding_text("text_units", units)
    assert cut[0] == short and long.startswith(cut[1])
    assert count_tokens(cut[1]) == texts.TEXT_UNIT_TOKENS
    encoded: list[str] = []
    real = texts.truncate_tokens
    monkeypatch.setattr(texts, "truncate_tokens", lambda t, n: encoded.append(t) or real(t, n))
    embedding_text("text_units", units)
    assert encoded == [long]  # without the counts, both are encoded
    embedding_text("text_units", units.drop("n_tokens"))
    assert encoded == [long, short, long]


def test_vector_tables_have_explicit_schema_fts_and_roundtrip(tmp_path):
    fake = FakeEmbedder(dim=8)
    f = _frames()
    counts = build_vector_tables(
        tmp_path, f["text_units"], f["entities"], f["relationships"], f["community_reports"], fake
    )
    assert counts == {"text_units": 2, "entities": 1, "relationships": 1, "community_reports": 1}
    db = lancedb.connect(str(tmp_path / store.LANCE_DIR))
    for name in counts:
        tbl = db.open_table(name)
        extra = schemas.VECTOR_TABLES[name] + schemas.VECTOR_PROVENANCE
        assert tbl.schema == schemas.vector_schema(8, extra)
        assert set(tbl.to_arrow()["embedding_model"].to_pylist()) == {"fake-model"}
    hits = db.open_table("text_units").search("purr", query_type="fts").limit(3).to_arrow()
    assert hits["id"].to_pylist() == ["u1"]
    ids, mat = read_vectors(tmp_path, "text_units")
    assert ids == ["u1", "u2"] and mat.shape == (2, 8)
    np.testing.assert_allclose(mat, fake.embed(["Cats purr softly.", "Ёжики живут в лесу."]))

    # An empty frame still makes a (typed, empty) table; a missing table reads as empty.
    # Derived vectors (the default): entity = its title + its units; relationship = its
    # known endpoint's title + its units; report = the mean of its members.
    def unit(v: np.ndarray) -> np.ndarray:
        return v / np.linalg.norm(v, axis=-1, keepdims=True)

    units = fake.embed(["Cats purr softly.", "Ёжики живут в лесу."])
    entity = unit(fake.embed(["CAT"])[0] + units[0])
    np.testing.assert_allclose(read_vectors(tmp_path, "entities")[1][0], entity, atol=1e-6)
    rel = unit(fake.embed(["CAT"])[0] + unit(units[0] + units[1]))
    np.testing.assert_allclose(read_vectors(tmp_path, "relationships")[1][0], rel, atol=1e-6)
    # relationship_vectors "context": its known endpoint's whole vector + its units
    context = EmbeddingSettings(relationship_vectors="context")
    build_vector_table(tmp_path, "relationships", f["relationships"], fake, context)
    rel = unit(entity + unit(units[0] + units[1]))
    np.testing.assert_allclose(read_vectors(tmp_path, "relationships")[1][0], rel, atol=1e-6)
    communities = pl.DataFrame({"community": [3], "entity_ids": [["e1"]]})
    build_vector_table(
        tmp_path, "community_reports", f["community_reports"], fake, None, communities
    )
    np.testing.assert_allclose(read_vectors(tmp_path, "community_reports")[1][0], entity, atol=1e-6)

    assert build_vector_table(tmp_path, "entities", f["entities"].clear(), fake) == 0
    assert db.open_table("entities").count_rows() == 0
    assert read_vectors(tmp_path, "nope")[0] == []

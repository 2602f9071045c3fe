"""LLM extractor: entities and relations as prompted JSON from an OpenAI-compatible endpoint.

Cost: units are packed per document (`pipeline.extract.llm_packing`) to share the prompt, and
answer tokens dominate the bill. Units are addressed in the prompt by short keys ("1", "2",
...) and the answer is keyed by them; how an answer becomes rows (types mapped to NEREL,
endpoints resolved) is `pipeline.extract.llm_answer`.

Pack size: the answer must fit in `llm.max_tokens`, and a JSON graph answer is longer than its
text: one short sentence per entity and per relationship, ~30-40 tokens each. So a pack holds
at most max_tokens / `llm_answer_ratio` text tokens (and at most `llm_pack_tokens` /
`llm_pack_max_units`): with the defaults 4,096 / 4.0, 1,024. An answer cut at the limit
(finish_reason "length") is never used; the pack is split in halves and each half asked again,
down to one unit, and the cut is remembered in the cache so a re-run splits without paying for
it again (`llm_truncations` in the metadata, `n_splits` here). The ratio is measured, not
guessed: the fake server's model-sized answers run 3.1 answer tokens per text token on A
Christmas Carol (prose) on average, 10-14 on dense encyclopedic text (MuSiQue passages, the
sample corpus). On the Carol (263 units, max_tokens 4,096), ratio 3 made 73 calls with 17 packs
cut, 4 made 69 calls with 8 cut and 17% fewer completion tokens, 6 made 90 calls with 3 cut:
4 is the fewest calls at near the fewest tokens. Sizing for dense text would send prose one
unit per call; dense packs instead rely on the split.

Failure policy: a pack whose call fails after the client's retries (or a single unit whose
answer is still cut), or whose answer lacks a unit, is extracted offline by `NlpExtractor` for
those units (rows keep extractor "nlp") and recorded in `.failures` as {text_unit_id, reason}.
Nothing per-unit is raised; a fatal error (a wrong API key: `.fatal`) stops the extraction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline import schemas
from pipeline.config import ExtractionSettings
from pipeline.extract.llm_answer import (
    ExtractionAnswer,
    UnitGraph,
    merge_graphs,
    parse_answer,
    unit_rows,
)
from pipeline.extract.llm_packing import pack_units
from pipeline.extract.nlp import NlpExtractor
from pipeline.llm.batches import ask_in_halves
from pipeline.llm.prompts import Prompt, data_block, load_prompt
from pipeline.tokens import count_tokens_batch

__all__ = ["LlmExtractor"]

STAGE = "extract"
MISSING = "missing from the LLM answer"


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
            from pipeline.ids import sha256_hex

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

    async def _ask(self, texts: list[str]) -> dict[str, UnitGraph]:
        """One pack's graphs by unit key: the call, then the gleaning rounds."""
        msgs = self.messages(texts)
        # a pack of several units will be split when cut: remember the cut, not to pay it again
        cut = len(texts) > 1
        answer = await self.llm.chat_json(msgs, ExtractionAnswer, stage=STAGE, remember_cut=cut)
        graphs = parse_answer(answer)
        for _ in range(self.settings.gleanings):
            msgs = [
                *msgs,
                {"role": "assistant", "content": answer.model_dump_json()},
                *self.gleaning_prompt.render(),
            ]
            answer = await self.llm.chat_json(msgs, ExtractionAnswer, stage=STAGE, remember_cut=cut)
            for k, g in parse_answer(answer).items():
                if k in graphs:
                    graphs[k] = merge_graphs(graphs[k], g)
        return graphs

    async def _extract_pack(self, texts: list[str]) -> list[UnitGraph | str]:
        """Per unit of the pack: its graph, or the reason it has none. A pack whose answer is
        cut at the token limit is split and asked again (`ask_in_halves`); an error comes back
        as a reason (not raised) so the batch of calls finishes, unless it is fatal."""

        def split() -> None:
            self.n_splits += 1

        out: list[UnitGraph | str] = []
        for part, res in await ask_in_halves(texts, self._ask, split):
            if isinstance(res, BaseException):
                reason = f"{type(res).__name__}: {getattr(res, 'reason', None) or res}"
                out += [reason] * len(part)
            else:
                out += [res.get(str(k), MISSING) for k in range(1, len(part) + 1)]
        return out

    def pack_tokens(self) -> int:
        """Text tokens a pack may hold so that its answer fits the client's max_tokens (see
        the module docstring), within `llm_pack_tokens`."""
        cap = self.settings.llm_pack_tokens
        max_tokens = getattr(getattr(self.llm, "settings", None), "max_tokens", None)
        if not isinstance(max_tokens, int) or self.settings.llm_answer_ratio <= 0:
            return cap
        return max(1, min(cap, int(max_tokens / self.settings.llm_answer_ratio)))

    def extract(self, text_units: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(extracted_entities, extracted_relationships) with the schemas' exact columns;
        `self.failures` lists the units that fell back to the offline extractor."""
        self.failures = []
        self.n_splits = 0
        units = text_units.filter(pl.col("text").is_not_null() & (pl.col("text") != ""))
        ids = units.get_column("id").to_list()
        texts = units.get_column("text").to_list()
        groups = (
            units.get_column("document_id").cast(pl.Utf8).fill_null("").to_list()
            if "document_id" in units.columns
            else None
        )
        packs = pack_units(
            ids,
            count_tokens_batch(texts),
            groups,
            self.pack_tokens(),
            self.settings.llm_pack_max_units,
        )
        results = (
            self.llm.run_many([self._extract_pack([texts[i] for i in p]) for p in packs])
            if packs
            else []
        )
        self.n_calls = (len(packs) + 2 * self.n_splits) * (1 + self.settings.gleanings)

        ents: dict[str, list] = {c: [] for c in ("text_unit_id", "title", "type", "description")}
        rels: dict[str, list] = {
            c: [] for c in ("text_unit_id", "source", "target", "type", "description", "weight")
        }
        fallback: list[int] = []
        for pack, res in zip(packs, results, strict=True):
            for i, graph in zip(pack, res, strict=True):
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

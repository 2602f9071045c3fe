"""LLM description summaries for the entities and relationships with many raw descriptions.

Why only those: the extractive merge (pipeline.graph.merge) is fine for an item described a few
times; one described by many text units is where a model's rewrite pays for its call. Items
above `GraphSettings.llm_summary_min_descriptions` distinct raw descriptions are summarised
(stage "summarize"); the rest keep the extractive description.

Cost: items are packed several per call (`summarize_descriptions_batch.txt`, answer keyed
"1".."n") up to PACK_TOKENS of descriptions / PACK_ITEMS items; an item is sent with at most
ITEM_TOKENS of its descriptions (most repeated first). Packs are formed in id order, so an
unchanged graph re-runs from the client's disk cache.

Incremental: every summary is also remembered per item (pipeline.llm.cache.memo_store, next
to the call cache), keyed by a hash of what the item's summary reads (model, prompt, name,
descriptions sent, token cap). On a re-run only the items whose input changed are packed, so a small
addition costs one call instead of re-sending every pack that a shifted pack boundary touched.
(Pack-level cache entries still make a re-run after a crash repeat no completed call.)

Answer size: a pack holds at most as many items as their answers (each at most
`description_max_tokens`, plus its JSON key) fit in `llm.max_tokens`; a pack whose answer is
cut at the limit anyway (a model overshooting the asked length) is split in halves and asked
again (`pipeline.llm.batches.ask_in_halves`).

Failure policy: a failed pack, or an item missing/empty in its answer, keeps the extractive
description and is recorded as {id, reason}; nothing is raised but a fatal error (a wrong key).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import RootModel, field_validator

from pipeline.config import GraphSettings
from pipeline.graph.encode_mentions import SYMMETRIC_TYPES
from pipeline.graph.titles import key_map
from pipeline.ids import sha256_hex, stable_id_expr
from pipeline.llm.batches import ask_in_halves
from pipeline.llm.cache import memo_store
from pipeline.llm.prompts import data_block, load_prompt
from pipeline.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:  # openai's import (~0.45 s) waits until a run calls a model
    from pipeline.llm.client import LlmClient

__all__ = ["STAGE", "SummaryAnswer", "summarize_descriptions"]

STAGE = "summarize"
PACK_TOKENS = 1500
PACK_ITEMS = 8
ANSWER_ITEM_OVERHEAD = 8  # tokens of one item's key and quotes in the JSON answer
ITEM_TOKENS = 250
PROMPT_NAME = "summarize_descriptions_batch"
MEMO_KIND = "summary-item-v1"


class SummaryAnswer(RootModel[dict[str, str]]):
    """item key -> merged description."""

    @field_validator("root", mode="before")
    @classmethod
    def _strings(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): "" if x is None else str(x) for k, x in v.items()}
        return v


def _raw_entities(extracted: pl.DataFrame) -> pl.DataFrame:
    """(id, description, units) of the raw entity descriptions, ids as merge_graph makes them."""
    ee = extracted.select(
        pl.col("title").cast(pl.Utf8),
        pl.col("description").cast(pl.Utf8),
        pl.col("text_unit_id").cast(pl.Utf8),
    ).filter(pl.col("title").is_not_null())
    km = key_map(ee["title"]).filter(pl.col("key") != "")
    return (
        ee.join(km, left_on="title", right_on="surface")
        .with_columns(id=stable_id_expr("key"))
        .select("id", "description", "text_unit_id")
    )


def _raw_relationships(extracted: pl.DataFrame) -> pl.DataFrame:
    er = extracted.select(
        pl.col("source").cast(pl.Utf8),
        pl.col("target").cast(pl.Utf8),
        pl.col("type").cast(pl.Utf8).fill_null("RELATED_TO"),
        pl.col("description").cast(pl.Utf8),
        pl.col("text_unit_id").cast(pl.Utf8),
    ).filter(pl.col("source").is_not_null() & pl.col("target").is_not_null())
    km = key_map(pl.concat([er["source"], er["target"]])).select("surface", "key")
    er = er.join(km.rename({"key": "skey"}), left_on="source", right_on="surface").join(
        km.rename({"key": "tkey"}), left_on="target", right_on="surface"
    )
    sym = pl.col("type").is_in(list(SYMMETRIC_TYPES)) & (pl.col("skey") > pl.col("tkey"))
    return er.with_columns(
        pl.when(sym).then(pl.col("tkey")).otherwise(pl.col("skey")).alias("a"),
        pl.when(sym).then(pl.col("skey")).otherwise(pl.col("tkey")).alias("b"),
    ).select(stable_id_expr("a", "b", "type").alias("id"), "description", "text_unit_id")


def _candidates(raw: pl.DataFrame, names: pl.DataFrame, threshold: int) -> pl.DataFrame:
    """(id, name, descriptions) of the items with more than `threshold` distinct descriptions;
    descriptions most repeated first, then alphabetical (deterministic)."""
    ev = (
        raw.filter(pl.col("description").is_not_null() & (pl.col("description") != ""))
        .group_by("id", "description")
        .agg(pl.col("text_unit_id").n_unique().alias("units"))
        .sort(["id", "units", "description"], descending=[False, True, False])
        .group_by("id", maintain_order=True)
        .agg(pl.col("description").alias("descriptions"))
        .filter(pl.col("descriptions").list.len() > threshold)
    )
    return ev.join(names, on="id").sort("id")


def _item_text(descriptions: list[str]) -> str:
    """Descriptions one per line, within ITEM_TOKENS."""
    out, used = [], 0
    for d in descriptions:
        n = count_tokens(d) + 1
        if out and used + n > ITEM_TOKENS:
            break
        out.append(d if n <= ITEM_TOKENS else truncate_tokens(d, ITEM_TOKENS))
        used += n
    return "\n".join(out)


def _memo_key(llm: LlmClient, prompt_hash: str, name: str, text: str, max_tok: int) -> str:
    """Disk-cache key of one item's summary: everything its answer depends on but its
    pack-mates (a different pack gives an equally valid summary)."""
    cfg = llm.settings
    parts = [MEMO_KIND, cfg.chat_model, str(cfg.temperature), prompt_hash, str(max_tok), name, text]
    return sha256_hex("\x1f".join(parts).encode("utf-8"))


def _packs(sizes: list[int], max_items: int = PACK_ITEMS) -> list[list[int]]:
    packs: list[list[int]] = []
    cur, cur_tok = [], 0
    for i, n in enumerate(sizes):
        if cur and (cur_tok + n > PACK_TOKENS or len(cur) >= max_items):
            packs.append(cur)
            cur, cur_tok = [], 0
        cur.append(i)
        cur_tok += n
    if cur:
        packs.append(cur)
    return packs


def summarize_descriptions(
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    extracted_entities: pl.DataFrame,
    extracted_relationships: pl.DataFrame,
    llm: LlmClient,
    settings: GraphSettings,
) -> tuple[pl.DataFrame, pl.DataFrame, list[dict]]:
    """(entities, relationships, failures): items with more than
    `settings.llm_summary_min_descriptions` distinct raw descriptions get an LLM summary; the
    others (and failed ones, recorded as {id, reason}) keep the extractive merge. Same schemas."""
    threshold = settings.llm_summary_min_descriptions
    ent_names = entities.select(
        "id", pl.format("{} ({})", pl.col("title"), pl.col("type").fill_null("")).alias("name")
    )
    rel_names = relationships.select(
        "id",
        pl.format(
            "{} -> {} ({})", pl.col("source"), pl.col("target"), pl.col("type").fill_null("")
        ).alias("name"),
    )
    cands = pl.concat(
        [
            _candidates(_raw_entities(extracted_entities), ent_names, threshold),
            _candidates(_raw_relationships(extracted_relationships), rel_names, threshold),
        ]
    )
    if cands.is_empty():
        return entities, relationships, []

    ids = cands["id"].to_list()
    names = cands["name"].to_list()
    texts = [_item_text(d) for d in cands["descriptions"].to_list()]
    prompt = load_prompt(PROMPT_NAME)
    max_tok = settings.description_max_tokens

    def messages(pack: list[int]) -> list[dict[str, str]]:
        blocks = "\n\n".join(
            data_block(texts[i], "item", id=k, name=names[i]) for k, i in enumerate(pack, 1)
        )
        return prompt.render(
            items=blocks,
            n_items=len(pack),
            item_ids=", ".join(str(k) for k in range(1, len(pack) + 1)),
            max_tokens=max_tok,
        )

    keys = [_memo_key(llm, prompt.hash, names[i], texts[i], max_tok) for i in range(len(ids))]
    memo = memo_store(llm.cache)
    new: dict[str, str] = {}
    todo: list[int] = []
    for i, key in enumerate(keys):
        hit = memo.get(key) if memo is not None else None
        if hit is not None and hit.get("kind") == MEMO_KIND and hit["text"]:
            new[ids[i]] = hit["text"]
        else:
            todo.append(i)
    fit = llm.settings.max_tokens // (max_tok + ANSWER_ITEM_OVERHEAD)
    sizes = [count_tokens(texts[i]) for i in todo]
    packs = [[todo[j] for j in p] for p in _packs(sizes, max(1, min(PACK_ITEMS, fit)))]

    async def ask(pack: list[int]) -> SummaryAnswer:
        return await llm.chat_json(
            messages(pack), SummaryAnswer, stage=STAGE, remember_cut=len(pack) > 1
        )

    answered = llm.run_many([ask_in_halves(p, ask) for p in packs])
    failures: list[dict] = []
    for pack, res in (part for parts in answered for part in parts):
        if isinstance(res, BaseException):
            reason = f"{type(res).__name__}: {getattr(res, 'reason', None) or res}"
            failures += [{"id": ids[i], "reason": reason} for i in pack]
            continue
        answer = res.root
        for k, i in enumerate(pack, 1):
            text = " ".join(answer.get(str(k), "").split())
            if not text:
                failures.append({"id": ids[i], "reason": "missing from the LLM answer"})
                continue
            new[ids[i]] = text if count_tokens(text) <= max_tok else truncate_tokens(text, max_tok)
            if memo is not None:
                memo.put(keys[i], {"kind": MEMO_KIND, "stage": STAGE, "text": new[ids[i]]})

    upd = pl.DataFrame(
        {"id": list(new), "__new": list(new.values())}, schema={"id": pl.Utf8, "__new": pl.Utf8}
    )

    def apply(frame: pl.DataFrame) -> pl.DataFrame:
        return (
            frame.join(upd, on="id", how="left", maintain_order="left")
            .with_columns(pl.coalesce("__new", "description").alias("description"))
            .select(frame.columns)
        )

    return apply(entities), apply(relationships), sorted(failures, key=lambda f: f["id"])

"""Semantic layer: chunks -> triplets (per document shard) -> entities/relationships ->
communities -> reports (over the whole corpus)."""

import json
import time
from pathlib import Path

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetIn,
    AssetOut,
    MetadataValue,
    Output,
    asset,
    multi_asset,
)

from assets.metadata import (
    PARQUET_KINDS,
    community_sizes,
    counts_table,
    degree_summary,
    frame_metadata,
)
from assets.shards import SHARD_POLICY, run_shards, shard_partitions, specs
from assets.structure import failures_md
from pipeline.chunking.chunkers import chunk_structured
from pipeline.communities.leiden import INPUT_COLUMNS as COMMUNITY_INPUTS
from pipeline.communities.leiden import hierarchical_leiden, next_state, plan_communities
from pipeline.communities.reports import INPUT_COLUMNS as REPORT_INPUTS
from pipeline.communities.reports import build_reports
from pipeline.communities.reports_llm import build_reports_llm
from pipeline.compat.columns import stamp_period, with_text_unit_ids
from pipeline.extract import extract_resilient, get_extractor
from pipeline.failures import failures_frame
from pipeline.graph.mentions import read_mentions
from pipeline.graph.merge import merge_graph
from pipeline.graph.summarize_llm import summarize_descriptions
from pipeline.storage import store
from pipeline.storage.files import atomic_write_text
from resources import DocgraphConfig, EmbedderResource, LlmResource
from resources.output import run_dir

CHUNK_TABLES = {
    "chunks": "Token-sized chunks inside sections, content-anchored, citing nodes and pages.",
    "chunk_failures": "Documents whose chunking failed: reason, and the fallback they got.",
}
EXTRACTION_TABLES = {
    "extracted_entities": "Raw entity mentions per text unit.",
    "extracted_relationships": "Raw relations per text unit.",
    "extraction_failures": "Text units whose extraction failed, and why.",
}


def chunks_asset(n_shards: int):
    @multi_asset(
        name="chunks",
        specs=specs("semantic", CHUNK_TABLES, ["documents", "sections", "content_nodes"]),
        partitions_def=shard_partitions(n_shards),
        backfill_policy=SHARD_POLICY,
    )
    def chunks(
        context: AssetExecutionContext, docgraph: DocgraphConfig, embedder: EmbedderResource
    ):
        settings = docgraph.settings().chunking
        folder = run_dir(docgraph, context)
        emb = embedder.get() if settings.method == "semantic" else None
        tokens = {"tokens_total": 0, "tokens_max": 0}
        failed: list[pl.DataFrame] = []

        def chunk(key: str) -> dict[str, pl.DataFrame]:
            rows: list[dict] = []
            docs = store.read_shard(folder, "documents", key)
            df = chunk_structured(
                docs,
                store.read_shard(folder, "sections", key),
                store.read_shard(folder, "content_nodes", key),
                settings,
                emb,
                rows,
            )
            # GraphRAG's documents.text_unit_ids is known only now: the shard's documents
            # file is written again with it (pipeline.compat.columns)
            store.write_shard(folder, "documents", key, with_text_unit_ids(docs, df))
            n_tokens = df.get_column("n_tokens")
            tokens["tokens_total"] += int(n_tokens.sum() or 0)
            tokens["tokens_max"] = max(tokens["tokens_max"], int(n_tokens.max() or 0))
            failed.append(failures_frame(rows, "chunk_failures"))
            return {"chunks": df, "chunk_failures": failed[-1]}

        def metadata() -> dict:
            fails = pl.concat(failed) if failed else failures_frame([], "chunk_failures")
            return {**tokens, "method": settings.method, "failures": failures_md(fails)}

        yield from run_shards(context, folder, CHUNK_TABLES, chunk, metadata)

    return chunks


def extraction_asset(n_shards: int):
    @multi_asset(
        name="extracted_graph",
        specs=specs("semantic", EXTRACTION_TABLES, ["chunks"]),
        partitions_def=shard_partitions(n_shards),
        backfill_policy=SHARD_POLICY,
    )
    def extracted_graph(context: AssetExecutionContext, docgraph: DocgraphConfig, llm: LlmResource):
        settings = docgraph.settings()
        folder = run_dir(docgraph, context)
        client = llm.get() if llm_mode(settings) else None
        if client is not None:
            extraction = settings.extraction.model_copy(update={"extractor": "llm"})
            extractor = get_extractor(extraction, llm=client)
        else:
            extractor = get_extractor(settings.extraction)
        before = client.metadata() if client is not None else {}
        by_type: dict[str, int] = {}
        reasons: dict[str, str] = {}

        cache = client.cache if client is not None else None

        def extract(key: str) -> dict[str, pl.DataFrame]:
            first = len(cache.used) if cache is not None else 0
            ents, rels, failures = extract_resilient(
                extractor, store.read_shard(folder, "chunks", key)
            )
            if cache is not None:  # kept by the cache sweep while this shard's rows are
                store.record_cache_keys(folder, key, cache.used[first:])
            context.log.info(f"shard {key}: {ents.height} mentions, {rels.height} relations")
            for row in failures.iter_rows(named=True):
                context.log.warning(
                    f"extraction failed for unit {row['text_unit_id']}: {row['reason']}"
                )
                reasons[row["text_unit_id"]] = row["reason"]
            for kind, count in ents.group_by("type").len().iter_rows():
                by_type[kind] = by_type.get(kind, 0) + count
            return {
                "extracted_entities": ents,
                "extracted_relationships": rels,
                "extraction_failures": failures,
            }

        def metadata() -> dict:
            llm_meta = _llm_delta(before, client.metadata()) if client is not None else {}
            return {
                "extractor": extractor.name,
                "by_type": counts_table(
                    dict(sorted(by_type.items(), key=lambda kv: -kv[1])), ("type", "mentions")
                ),
                "failures": counts_table(dict(list(reasons.items())[:100]), ("unit", "reason")),
                **llm_meta,
            }

        yield from run_shards(context, folder, EXTRACTION_TABLES, extract, metadata)

    return extracted_graph


@multi_asset(
    deps=["chunks", "extracted_entities", "extracted_relationships"],
    outs={
        "entities": AssetOut(
            description="Merged entities: normalised titles, aliases, summaries.",
            kinds=set(PARQUET_KINDS),
        ),
        "relationships": AssetOut(
            description="Merged relationships between entities.", kinds=set(PARQUET_KINDS)
        ),
        "text_units": AssetOut(
            description="Chunks with the entity and relationship ids they hold.",
            kinds=set(PARQUET_KINDS),
        ),
        "summary_failures": AssetOut(
            description="LLM mode: summaries that failed, and why.", kinds=set(PARQUET_KINDS)
        ),
    },
    group_name="semantic",
)
def graph(context: AssetExecutionContext, docgraph: DocgraphConfig, llm: LlmResource):
    started = time.perf_counter()
    settings = docgraph.settings()
    folder = run_dir(docgraph, context)
    # in path order, as one shard would hold them: what follows (numbering, ties broken by
    # row order) does not depend on the shard count
    paths = store.read_table(folder, "documents", ["id", "source_path"])
    chunks = (
        store.read_table(folder, "chunks")
        .join(paths, left_on="document_id", right_on="id", how="left", maintain_order="left")
        .sort("source_path", maintain_order=True)
        .drop("source_path")
    )
    extracted_entities, extracted_relationships = read_mentions(folder)
    ents, rels, units = merge_graph(
        extracted_entities, extracted_relationships, chunks, settings.graph
    )
    # chunks are numbered within their shard; a text unit's short id (cited in query
    # contexts as [n]) is numbered over the corpus, in path then chunk order
    units = units.with_columns(human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64))
    failures, llm_meta = [], {}
    if llm_mode(settings):
        client = llm.get()
        before = client.metadata()
        ents, rels, failures = summarize_descriptions(
            ents, rels, extracted_entities, extracted_relationships, client, settings.graph
        )
        llm_meta = _llm_delta(before, client.metadata())
    by_type = dict(ents.group_by("type").len().sort("len", descending=True).iter_rows())
    degrees = degree_summary(ents, rels)
    by_type_table = counts_table(by_type, ("type", "entities"))
    yield Output(
        ents,
        output_name="entities",
        metadata=frame_metadata(ents, started, "entities", by_type=by_type_table, **degrees),
    )
    yield Output(
        rels,
        output_name="relationships",
        metadata=frame_metadata(rels, started, "relationships", **degrees, **llm_meta),
    )
    yield Output(
        units, output_name="text_units", metadata=frame_metadata(units, started, "text_units")
    )
    fails = _failures_frame("summarize", [(f["id"], f["reason"]) for f in failures])
    yield Output(
        fails,
        output_name="summary_failures",
        metadata=frame_metadata(fails, started, "summary_failures"),
    )


def _columns(columns: dict[str, list[str]]) -> dict[str, AssetIn]:
    """Inputs that load only the columns the stage reads (resources.parquet_io)."""
    return {name: AssetIn(metadata={"columns": cols}) for name, cols in columns.items()}


@asset(
    group_name="communities",
    description="Hierarchical Leiden communities of the entity graph.",
    ins=_columns(COMMUNITY_INPUTS),
    kinds=set(PARQUET_KINDS),
)
def communities(
    context: AssetExecutionContext,
    docgraph: DocgraphConfig,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
) -> Output[pl.DataFrame]:
    started = time.perf_counter()
    settings = docgraph.settings()
    # the last run's table (if any; the run's folder starts as the last version): a small
    # graph change keeps its communities (and so their cached LLM reports), a change
    # accumulated since the last full recompute (counted in the state sidecar) or new
    # partition settings recompute; see pipeline.communities.leiden
    folder = run_dir(docgraph, context)
    previous = store.read_table(folder, "communities")
    state_path = folder / COMMUNITIES_STATE
    plan = plan_communities(
        entities, relationships, settings.graph, previous, _read_state(state_path)
    )
    df = hierarchical_leiden(
        entities, relationships, settings.graph, previous=previous if plan["carry_over"] else None
    )
    df = stamp_period(df, previous)  # GraphRAG's period: the run's date, kept when unchanged
    # written before the IO manager writes the table: the state names the table it describes
    # (table_hash), so if that write never happens the next run sees a stale state and recomputes
    _write_state(state_path, next_state(plan, df))
    return Output(
        df,
        metadata=frame_metadata(
            df,
            started,
            "communities",
            **community_sizes(df),
            incremental="carried_over" if plan["carry_over"] else "recomputed",
            incremental_reason=plan["reason"],
            cumulative_change=round(float(plan["change"]), 6),
            run_change=round(float(plan["run_change"]), 6),
        ),
    )


COMMUNITIES_STATE = "communities_state.json"


def _read_state(path: Path) -> dict | None:
    """None when there is no sidecar (an index from before it: carried over once, then
    counted); {} when it cannot be read (pipeline.communities.leiden then recomputes)."""
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _write_state(path: Path, state: dict) -> None:
    """Atomically, like pipeline.storage.store tables: a crash leaves the old sidecar whole."""
    atomic_write_text(path, json.dumps(state, sort_keys=True, indent=1) + "\n")


@multi_asset(
    outs={
        "community_reports": AssetOut(
            description="One report per community (title, summary, rating, findings).",
            kinds=set(PARQUET_KINDS),
        ),
        "report_failures": AssetOut(
            description="LLM mode: reports that stayed extractive.", kinds=set(PARQUET_KINDS)
        ),
    },
    ins=_columns(REPORT_INPUTS),
    group_name="communities",
)
def community_reports(
    docgraph: DocgraphConfig,
    llm: LlmResource,
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
):
    started = time.perf_counter()
    settings = docgraph.settings()
    df = build_reports(communities, entities, relationships, text_units, settings.reports)
    failures, llm_meta = [], {}
    if llm_mode(settings):  # bottom-up LLM reports; a failed one keeps its extractive report
        client = llm.get()
        before = client.metadata()
        df, failures, counts = build_reports_llm(
            communities, entities, relationships, text_units, df, client, settings.reports
        )
        llm_meta = _llm_delta(before, client.metadata())
        # sent: a call or the exact-prompt cache; kept: a small context change, no call
        llm_meta["reports_sent_to_llm"] = counts["sent"]
        llm_meta["reports_kept_from_memo"] = counts["reused"]
        llm_meta["reports_failed_kept_previous"] = counts["failed_kept"]
    yield Output(
        df,
        output_name="community_reports",
        metadata=frame_metadata(df, started, "community_reports", **llm_meta),
    )
    fails = _failures_frame("report", [(str(f["community"]), f["reason"]) for f in failures])
    yield Output(
        fails,
        output_name="report_failures",
        metadata=frame_metadata(fails, started, "report_failures"),
    )


def llm_mode(settings) -> bool:
    return settings.llm.enabled or settings.extraction.extractor == "llm"


def _failures_frame(stage: str, rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "stage": [stage] * len(rows),
            "item_id": [r[0] for r in rows],
            "reason": [r[1] for r in rows],
        },
        schema={"stage": pl.Utf8, "item_id": pl.Utf8, "reason": pl.Utf8},
    )


def _llm_delta(before: dict, after: dict) -> dict:
    """This step's LLM counters (the client may be shared by several steps of a process)."""
    out = {}
    for key, value in after.items():
        if key == "llm_by_stage":
            old = before.get(key, {})
            delta = {
                stage: {
                    k: v - old.get(stage, {}).get(k, 0) if isinstance(v, int | float) else v
                    for k, v in counts.items()
                }
                for stage, counts in value.items()
            }
            out[key] = MetadataValue.json(
                {stage: c for stage, c in delta.items() if any(c.values())}
            )
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value - before.get(key, 0)
        else:
            out[key] = value
    return out

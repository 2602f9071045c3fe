"""Semantic layer: chunks -> triplets -> entities/relationships -> communities -> reports."""

import json
import time
from pathlib import Path

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetOut,
    MetadataValue,
    Output,
    asset,
    multi_asset,
)

from assets.metadata import counts_md, frame_metadata
from assets.structure import failures_md
from pipeline import store
from pipeline.chunking import chunk_structured
from pipeline.communities import hierarchical_leiden, next_state, plan_communities
from pipeline.extract import extract_resilient, get_extractor
from pipeline.failures import failures_frame
from pipeline.files import atomic_write_text
from pipeline.graph import merge_graph
from pipeline.reports import build_reports
from pipeline.reports_llm import build_reports_llm
from pipeline.summarize_llm import summarize_descriptions
from resources import DocgraphConfig, EmbedderResource, LlmResource
from resources.output import run_dir


@multi_asset(
    outs={
        "chunks": AssetOut(
            description="Token-sized chunks inside sections, content-anchored, citing nodes "
            "and pages."
        ),
        "chunk_failures": AssetOut(
            description="Documents whose chunking failed: reason, and the fallback they got."
        ),
    },
    group_name="semantic",
)
def chunks(
    docgraph: DocgraphConfig,
    embedder: EmbedderResource,
    documents: pl.DataFrame,
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
):
    started = time.perf_counter()
    settings = docgraph.settings().chunking
    emb = embedder.get() if settings.method == "semantic" else None
    rows: list[dict] = []
    df = chunk_structured(documents, sections, content_nodes, settings, emb, rows)
    failures = failures_frame(rows, "chunk_failures")
    tokens = df.get_column("n_tokens")
    yield Output(
        df,
        output_name="chunks",
        metadata=frame_metadata(
            df,
            started,
            tokens_total=int(tokens.sum() or 0),
            tokens_mean=float(tokens.mean() or 0.0),
            tokens_max=int(tokens.max() or 0),
            method=settings.method,
            failures=failures.height,
        ),
    )
    yield Output(
        failures,
        output_name="chunk_failures",
        metadata=frame_metadata(failures, started, failures=failures_md(failures)),
    )


@multi_asset(
    outs={
        "extracted_entities": AssetOut(description="Raw entity mentions per text unit."),
        "extracted_relationships": AssetOut(description="Raw relations per text unit."),
        "extraction_failures": AssetOut(description="Text units whose extraction failed, and why."),
    },
    group_name="semantic",
)
def extracted_graph(
    context: AssetExecutionContext, docgraph: DocgraphConfig, llm: LlmResource, chunks: pl.DataFrame
):
    started = time.perf_counter()
    settings = docgraph.settings()
    client = llm.get() if llm_mode(settings) else None
    if client is not None:
        extraction = settings.extraction.model_copy(update={"extractor": "llm"})
        extractor = get_extractor(extraction, llm=client)
    else:
        extractor = get_extractor(settings.extraction)
    llm_meta = client.metadata() if client is not None else {}
    ents, rels, failures = extract_resilient(extractor, chunks)
    if client is not None:
        llm_meta = _llm_delta(llm_meta, client.metadata())
    context.log.info(f"{extractor.name}: {ents.height} mentions, {rels.height} relations")
    for row in failures.iter_rows(named=True):
        context.log.warning(f"extraction failed for unit {row['text_unit_id']}: {row['reason']}")
    by_type = dict(ents.group_by("type").len().sort("len", descending=True).iter_rows())
    yield Output(
        ents,
        output_name="extracted_entities",
        metadata=frame_metadata(
            ents,
            started,
            extractor=extractor.name,
            by_type=counts_md(by_type, ("type", "mentions")),
            **llm_meta,
        ),
    )
    yield Output(
        rels, output_name="extracted_relationships", metadata=frame_metadata(rels, started)
    )
    yield Output(
        failures,
        output_name="extraction_failures",
        metadata=frame_metadata(
            failures,
            started,
            reasons=counts_md(
                dict(failures.select("text_unit_id", "reason").iter_rows()), ("unit", "reason")
            ),
        ),
    )


@multi_asset(
    outs={
        "entities": AssetOut(description="Merged entities: normalised titles, aliases, summaries."),
        "relationships": AssetOut(description="Merged relationships between entities."),
        "text_units": AssetOut(
            description="Chunks with the entity and relationship ids they hold."
        ),
        "summary_failures": AssetOut(description="LLM mode: summaries that failed, and why."),
    },
    group_name="semantic",
)
def graph(
    docgraph: DocgraphConfig,
    llm: LlmResource,
    chunks: pl.DataFrame,
    extracted_entities: pl.DataFrame,
    extracted_relationships: pl.DataFrame,
):
    started = time.perf_counter()
    settings = docgraph.settings()
    ents, rels, units = merge_graph(
        extracted_entities, extracted_relationships, chunks, settings.graph
    )
    failures, llm_meta = [], {}
    if llm_mode(settings):
        client = llm.get()
        before = client.metadata()
        ents, rels, failures = summarize_descriptions(
            ents, rels, extracted_entities, extracted_relationships, client, settings.graph
        )
        llm_meta = _llm_delta(before, client.metadata())
    by_type = dict(ents.group_by("type").len().sort("len", descending=True).iter_rows())
    yield Output(
        ents,
        output_name="entities",
        metadata=frame_metadata(ents, started, by_type=counts_md(by_type, ("type", "entities"))),
    )
    yield Output(
        rels, output_name="relationships", metadata=frame_metadata(rels, started, **llm_meta)
    )
    yield Output(units, output_name="text_units", metadata=frame_metadata(units, started))
    fails = _failures_frame("summarize", [(f["id"], f["reason"]) for f in failures])
    yield Output(fails, output_name="summary_failures", metadata=frame_metadata(fails, started))


@asset(group_name="communities", description="Hierarchical Leiden communities of the entity graph.")
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
    # partition settings recompute; see pipeline.communities
    folder = run_dir(docgraph, context)
    previous = store.read_table(folder, "communities")
    state_path = folder / COMMUNITIES_STATE
    plan = plan_communities(
        entities, relationships, settings.graph, previous, _read_state(state_path)
    )
    df = hierarchical_leiden(
        entities, relationships, settings.graph, previous=previous if plan["carry_over"] else None
    )
    # written before the IO manager writes the table: the state names the table it describes
    # (table_hash), so if that write never happens the next run sees a stale state and recomputes
    _write_state(state_path, next_state(plan, df))
    levels = dict(df.group_by("level").len().sort("level").iter_rows())
    return Output(
        df,
        metadata=frame_metadata(
            df,
            started,
            levels=counts_md({str(k): v for k, v in levels.items()}, ("level", "n")),
            incremental="carried_over" if plan["carry_over"] else "recomputed",
            incremental_reason=plan["reason"],
            cumulative_change=round(float(plan["change"]), 6),
            run_change=round(float(plan["run_change"]), 6),
        ),
    )


COMMUNITIES_STATE = "communities_state.json"


def _read_state(path: Path) -> dict | None:
    """None when there is no sidecar (an index from before it: carried over once, then
    counted); {} when it cannot be read (pipeline.communities then recomputes)."""
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _write_state(path: Path, state: dict) -> None:
    """Atomically, like pipeline.store tables: a crash leaves the old sidecar whole."""
    atomic_write_text(path, json.dumps(state, sort_keys=True, indent=1) + "\n")


@multi_asset(
    outs={
        "community_reports": AssetOut(
            description="One report per community (title, summary, rating, findings)."
        ),
        "report_failures": AssetOut(description="LLM mode: reports that stayed extractive."),
    },
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
        df, output_name="community_reports", metadata=frame_metadata(df, started, **llm_meta)
    )
    fails = _failures_frame("report", [(str(f["community"]), f["reason"]) for f in failures])
    yield Output(fails, output_name="report_failures", metadata=frame_metadata(fails, started))


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

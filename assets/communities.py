"""Communities and their reports over the whole corpus: hierarchical Leiden communities of
the entity graph (carried over from the last run when the graph barely changed, with the
state sidecar that counts the change), then one report per community (pipeline.communities),
written bottom-up by the LLM in LLM mode."""

import json
import time
from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, AssetIn, AssetOut, Output, asset, multi_asset

from assets.metadata import PARQUET_KINDS, community_sizes, frame_metadata, llm_delta
from assets.shards import tail_changes
from pipeline import schemas
from pipeline.communities.leiden import INPUT_COLUMNS as COMMUNITY_INPUTS
from pipeline.communities.leiden import (
    PREVIOUS_COLUMNS,
    graph_arrays,
    hierarchical_leiden,
    next_state,
    plan_communities,
)
from pipeline.communities.reports.carry_digests import ROWS, read_rows, write_rows
from pipeline.communities.reports.evidence_cache import read_evidence, write_evidence
from pipeline.communities.reports.offline import INPUT_COLUMNS as REPORT_INPUTS
from pipeline.communities.reports.offline import report_table
from pipeline.communities.reports.reuse_unchanged import read_sidecar, write_sidecar
from pipeline.communities.reports.with_llm import build_reports_llm
from pipeline.communities.table import Reuse, reuse_from
from pipeline.compat.columns import stamp_period
from pipeline.config import Settings
from pipeline.failures import stage_failures_frame
from pipeline.storage import changed_rows, store
from pipeline.storage.files import atomic_write_text
from pipeline.storage.run_changes import base_version, same_file
from resources import DocgraphConfig, LlmResource
from resources.llm import llm_mode
from resources.output import run_dir


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
    previous = store.read_table(folder, "communities", PREVIOUS_COLUMNS)
    state_path = folder / COMMUNITIES_STATE
    arrays = graph_arrays(entities, relationships, previous)
    plan = plan_communities(
        entities, relationships, settings.graph, previous, _read_state(state_path), arrays
    )
    reuse, lists_reason = None, "hierarchy recomputed"
    if plan["carry_over"]:
        reuse, lists_reason = _reuse(context, settings, folder, entities, relationships)
    df = hierarchical_leiden(
        entities,
        relationships,
        settings.graph,
        previous=previous if plan["carry_over"] else None,
        reuse=reuse,
        arrays=arrays,
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
            **_rows_carried(df, previous),
            cumulative_change=round(float(plan["change"]), 6),
            run_change=round(float(plan["run_change"]), 6),
            # communities whose relationship and text unit lists were kept from the last table
            lists_carried=reuse.kept if reuse is not None else 0,
            lists_reason=lists_reason,
        ),
    )


COMMUNITIES_STATE = "communities_state.json"


def _reuse(
    context: AssetExecutionContext,
    settings: Settings,
    folder: Path,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
) -> tuple[Reuse | None, str]:
    """The last version's lists a carried-over hierarchy keeps for its unchanged communities
    (pipeline.communities.table), or why none are kept: the run's communities table must be
    the base version's, built from the base's entities and relationships it is diffed with."""
    changes = tail_changes(context, settings, folder)
    if changes.whole is not None:
        return None, changes.whole
    assert changes.base is not None
    if not changes.unchanged("communities"):
        return None, "the run's communities table is not the base version's"
    listed = changed_rows.read(folder, context.run.run_id, changes.base)
    reuse = reuse_from(changes.base, entities, relationships, folder, listed)
    return reuse, "members unchanged"


def _rows_carried(df: pl.DataFrame, previous: pl.DataFrame) -> dict[str, int]:
    """Communities as the last version had them (their id hashes their members) and the
    others; the same keys as every incremental tail stage's metadata."""
    carried = df.get_column("id").is_in(previous.get_column("id").implode()).sum()
    return {"rows_carried": int(carried), "rows_recomputed": df.height - int(carried)}


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


def _listed(
    context: AssetExecutionContext, settings: Settings, folder: Path
) -> dict[str, pl.Series] | None:
    """The rows the graph step merged again (pipeline.storage.changed_rows), when the last
    run's input rows (carry_digests.ROWS) are those of the version that list is against
    (a run that carries nothing over has no list: the graph step removed it)."""
    base = base_version(settings.output_dir)
    if base is None or not same_file(folder / ROWS, base / ROWS):
        return None
    return changed_rows.read(folder, context.run.run_id, base)


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
    context: AssetExecutionContext,
    docgraph: DocgraphConfig,
    llm: LlmResource,
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
):
    started = time.perf_counter()
    settings = docgraph.settings()
    # the last run's extractive reports whose inputs did not change are kept (the run's
    # folder starts as the last version; pipeline.communities.reports.reuse_unchanged)
    folder = run_dir(docgraph, context)
    sidecar = read_sidecar(folder)
    previous = store.read_table(folder, "community_reports") if sidecar is not None else None
    evidence = read_evidence(folder)
    listed = _listed(context, settings, folder) if sidecar is not None else None
    built = report_table(
        communities,
        entities,
        relationships,
        text_units,
        settings.reports,
        previous,
        sidecar,
        evidence,
        read_rows(folder) if sidecar is not None else None,
        listed,
    )
    df = built.reports
    failures, llm_meta = [], {"reports_kept_unchanged": built.kept}
    llm_meta["input_rows"] = "listed by the graph step hashed" if listed else "all hashed"
    llm_meta |= {"rows_carried": built.kept, "rows_recomputed": df.height - built.kept}
    llm_meta["report_digests_carried"] = built.digests_carried
    llm_meta["evidence_sources_split"] = built.sources_split
    llm_meta["evidence_sources_kept"] = built.sources_kept
    llm_meta["incremental"] = "carried" if built.kept else "whole"
    llm_meta["incremental_reason"] = (
        "reports whose inputs did not change kept"
        if built.kept
        else "no report of the last run kept (none, LLM mode, other polars, or all changed)"
    )
    if llm_mode(settings):  # bottom-up LLM reports; a failed one keeps its extractive report
        client = llm.get()
        before = client.metadata()
        df, failures, counts = build_reports_llm(
            communities, entities, relationships, text_units, df, client, settings.reports
        )
        llm_meta = llm_delta(before, client.metadata())
        # sent: a call or the exact-prompt cache; kept: a small context change, no call
        llm_meta["reports_sent_to_llm"] = counts["sent"]
        llm_meta["reports_kept_from_memo"] = counts["reused"]
        llm_meta["reports_failed_kept_previous"] = counts["failed_kept"]
    # before the table is written: the sidecar names the rows it describes by their hash,
    # so a table never written leaves nothing to keep; LLM reports are never kept as
    # extractive ones (no digests: the sidecar goes)
    write_sidecar(folder, df, None if llm_mode(settings) else built.digests)
    write_evidence(folder, built.evidence)  # what it says holds in LLM mode too
    write_rows(folder, None if llm_mode(settings) else built.rows)
    yield Output(
        _unless_kept(folder, df, previous),
        output_name="community_reports",
        metadata=frame_metadata(df, started, "community_reports", **llm_meta),
    )
    fails = stage_failures_frame("report", [(str(f["community"]), f["reason"]) for f in failures])
    yield Output(
        fails,
        output_name="report_failures",
        metadata=frame_metadata(fails, started, "report_failures"),
    )


def _unless_kept(
    folder: Path, df: pl.DataFrame, previous: pl.DataFrame | None
) -> pl.DataFrame | Path:
    """`df` to write, or the folder's table when it holds exactly these rows already (an edit
    that changed no report: at 40k documents its 15 MB were written again, and every later
    reader read a new file): the file stays, after an edit the base version's hard link."""
    if previous is None:
        return df
    same = pl.from_arrow(schemas.conform(df, "community_reports")).equals(previous)
    return store.table_path(folder, "community_reports") if same else df

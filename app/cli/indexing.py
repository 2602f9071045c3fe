"""`docgraph index` and `docgraph check`: build an output folder through the Dagster asset
graph (under the output lock, pulling an object store's current version first), then check
its tables' schemas and references."""

from __future__ import annotations

import argparse
import sys

from app.cli.args import folder_overrides
from pipeline.config import load_settings
from pipeline.storage import lock, mirror, remote


def cmd_index(args: argparse.Namespace) -> int:
    """Index the input folder; a missing or empty one is an error (exit 2) before any run."""
    from pipeline.ingest import check_input_folder, own_folders

    settings = load_settings(args.config, folder_overrides(args))
    check_input_folder(settings.input_dir, own_folders(settings.output_dir))
    # the output lock first: a second writer stops here (exit 2, naming the holder) before
    # Dagster starts; the run's steps take it again, re-entrantly, in this process
    wait_s = settings.storage.lock_wait_s if args.wait is None else args.wait
    url = mirror.url_of(settings.output_dir)  # s3://…: output_dir is its local mirror
    if url is not None:  # the store's current version decides which shards are stale
        remote.refresh(settings.output_dir, force=True)
    _take_lock(settings.output_dir, wait_s)
    from app.run import run_index
    from pipeline import progress
    from pipeline.ingest.find_stale import input_entries, plan_run

    try:
        entries = input_entries(settings)  # the one walk of the input folder this run makes
        if not args.full and (plan := plan_run(settings, entries)).up_to_date:
            # no run and no new version: a nightly run over an unchanged folder costs a walk
            print(f"index up to date: {plan.reason}; nothing to run (--full rebuilds it)")
            return 0
        with progress.for_terminal():  # rich bars on a terminal, else the log's n/total lines
            result = run_index(
                args.config,
                settings.input_dir,
                settings.output_dir,
                raise_on_error=False,
                log_level=args.log_level,
                full=args.full,
                entries=entries,
                plan=None if args.full else plan,
            )
    finally:
        lock.release(settings.output_dir)
    failed_checks = [
        f"{e.check_name} on {e.asset_key.to_user_string()}"
        for e in result.get_asset_check_evaluations()
        if not e.passed
    ]
    print(_summary(settings.output_dir))
    if not result.success:
        print(f"docgraph: index run FAILED: {_failure(result)}", file=sys.stderr)
        print("nothing was published: the index in the output folder is unchanged", file=sys.stderr)
        return 1
    if failed_checks:
        print("asset checks failed: " + ", ".join(failed_checks), file=sys.stderr)
        return 1
    print(f"index written to {url or settings.output_dir}")
    _prepare_queries(settings)
    return 0


def _take_lock(output_dir: str, wait_s: float) -> None:
    """The output lock for this run. When another run holds it and we may wait, say so once
    on stderr, naming the holder, before waiting (silence looks like a hang)."""
    try:
        lock.acquire(output_dir, "docgraph-index", 0)
        return
    except lock.OutputLocked:
        if wait_s <= 0:
            raise
    holder = lock.holder(output_dir)
    who = lock.describe(holder) if holder else "another run"
    print(
        f"docgraph: output folder {output_dir} is being written by {who}; "
        f"waiting up to {wait_s:g} s for it",
        file=sys.stderr,
        flush=True,
    )
    lock.acquire(output_dir, "docgraph-index", wait_s)


def _prepare_queries(settings) -> None:
    """Make the next cold `docgraph query` fast (issue 13): copy the vectors out of Lance
    (pipeline.vectors.vector_copies) and export the query embedder to ONNX
    (pipeline.vectors.embed_onnx; once per model, ~10 s). Best effort: a query without them is only
    slower."""
    from pipeline.storage import store
    from pipeline.vectors import vector_copies as vector_cache
    from pipeline.vectors.embed_onnx import ensure_exported

    version = store.resolve(settings.output_dir)
    for name in ("text_units", "entities", "community_reports", "content_nodes"):
        vector_cache.copy_table(version, name)
    try:
        ensure_exported(settings.embedding)
    except Exception as exc:  # an optional speed-up must not fail the index
        print(f"docgraph: warning: query embedder not exported to ONNX: {exc}", file=sys.stderr)


def _failure(result) -> str:
    """The first failed step and the innermost error message (the cause the user can act on),
    one line; the full log is above."""
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            message = (error.message or error.cls_name or "").strip().splitlines()
            return f"{event.step_key}: {message[0] if message else error.cls_name}"
    return "see the log above"


def _summary(output_dir: str) -> str:
    from pipeline.schemas import TABLES
    from pipeline.storage import store

    rows = []
    for name in TABLES:
        path = store.table_path(output_dir, name)
        if path.exists():
            rows.append(f"  {name:<24} {store.table_rows(output_dir, name):>8} rows")
    return "tables:\n" + "\n".join(rows)


def cmd_check(args: argparse.Namespace) -> int:
    from pipeline.schemas import SEMANTIC_TABLES, TABLES
    from pipeline.storage import store, validate

    settings = load_settings(args.config, folder_overrides(args))
    if not store.is_index(settings.output_dir):
        raise FileNotFoundError(f"{settings.output_dir} holds no docgraph index")
    manifest = store.read_manifest(settings.output_dir)
    print(f"version: {manifest['version'] if manifest else '(unversioned layout)'}")
    bad = 0
    for name in TABLES:
        if name not in SEMANTIC_TABLES and not store.table_path(settings.output_dir, name).exists():
            print(f"{name}: absent")
            continue
        problems = validate.schema_problems(settings.output_dir, name)
        problems = problems or validate.integrity_problems(settings.output_dir, name)
        bad += bool(problems)
        print(f"{name}: {'; '.join(problems) or 'ok'}")
    problems = validate.lance_problems(settings.output_dir)
    bad += bool(problems)
    print(f"lancedb: {'; '.join(problems) or 'ok (every vector table holds its table ids)'}")
    return 1 if bad else 0

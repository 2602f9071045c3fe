"""The repo's Dagster instance keeps its event log's database engines (one per file, not one per
statement: resources/event_log_storage.py), and what it stores is Dagster's own SQLite layout."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from dagster import AssetCheckResult, DagsterInstance, asset, asset_check, materialize
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

import resources.event_log_storage as kept

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.ui_launch import repo_instance_config  # noqa: E402


@asset
def words() -> list[str]:
    return ["graph", "rag"]


@asset
def letters(words: list[str]) -> int:
    return sum(len(w) for w in words)


@asset_check(asset=letters)
def letters_positive(letters: int) -> AssetCheckResult:
    return AssetCheckResult(passed=letters > 0)


def test_the_repo_instance_stores_events_through_kept_engines(tmp_path, monkeypatch) -> None:
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(repo_instance_config(tmp_path)))
    made = []
    real = kept.create_engine

    def counted(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(kept, "create_engine", counted)
    instance = DagsterInstance.from_config(str(tmp_path))
    storage = instance.event_log_storage
    assert type(storage) is kept.KeptEngineSqliteEventLogStorage
    runs = [materialize([words, letters, letters_positive], instance=instance) for _ in range(2)]
    assert all(run.success for run in runs)
    stored = sum(len(instance.all_logs(run.run_id)) for run in runs)
    # one engine for the index database and one per run's, however many statements
    assert stored >= 20 and len(made) == 3, (stored, made)
    instance.dispose()
    assert not storage._engines

    # Dagster's own storage reads what it wrote: both runs' events and materializations
    stock = SqliteEventLogStorage(storage._base_dir)
    for run in runs:
        assert len(stock.get_logs_for_run(run.run_id)) == len(instance.all_logs(run.run_id))
    key = letters.key
    assert stock.get_asset_records([key])[0].asset_entry.last_materialization.run_id == (
        runs[1].run_id
    )
    stock.dispose()


def test_the_kept_engines_are_bounded(tmp_path, monkeypatch) -> None:
    """A long-lived process (the webserver shows run after run) keeps KEPT_ENGINES at most."""
    monkeypatch.setattr(kept, "KEPT_ENGINES", 2)
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(repo_instance_config(tmp_path)))
    instance = DagsterInstance.from_config(str(tmp_path))
    runs = [materialize([words], instance=instance) for _ in range(3)]
    storage = instance.event_log_storage
    assert len(storage._engines) == 2
    for run in runs:  # an engine let go is made again when its database is read
        assert len(instance.all_logs(run.run_id)) >= 5
    instance.dispose()

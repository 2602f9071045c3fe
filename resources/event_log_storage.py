"""Dagster's SQLite event log, with one database engine per file kept for the process.

Why: Dagster's `SqliteEventLogStorage` makes a new SQLAlchemy engine for every statement
(create, connect, commit, dispose; closing a WAL database's last connection also checkpoints
it). A one-file edit at 40k documents stores 264 events and reads asset records 43 times:
2.2-2.4 s of event storage and 0.6-0.8 s of record reads in its ~28 s, against 0.82-0.85 s
and 0.24-0.33 s with the engine kept (measured in real runs on the 2-core machine, session
28). Everything else (schema, files, the WAL index shard, the UI's file watchers) is
Dagster's: a stock `SqliteEventLogStorage` reads what this one wrote.

The repo's `dagster.yaml` names this class for `event_log_storage`. Engines are kept per
process id (a forked child never shares its parent's connections) and per shard (the index
database, one database per run; KEPT_ENGINES at most), behind Dagster's own lock, so one
connection serves the process's statements one at a time. `docgraph index` disposes of its
instance after the run (app.run), which closes them. Written against dagster 1.13.27, which
pyproject pins: `_connect` is Dagster's private method, and tests/test_event_log_storage.py
checks it.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine

# Engines kept at most: the index database's and those of the runs last used. A run writes
# two; a webserver showing run after run would otherwise hold a connection to every run's file.
KEPT_ENGINES = 8


class KeptEngineSqliteEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` whose engines outlive a statement (see the module's doc)."""

    def __init__(self, base_dir: str, inst_data=None):
        # before Dagster's set-up connects; the least recently used first
        self._engines: OrderedDict[tuple[int, str], Engine] = OrderedDict()
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data, config_value):  # Dagster's names its own class
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            key = (os.getpid(), shard)
            engine = self._engines.get(key)
            if engine is None:
                engine = create_engine(
                    self.conn_string_for_shard(shard),
                    connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
                )
                if shard not in self._initialized_dbs:
                    self._initdb(engine)
                    self._initialized_dbs.add(shard)
                self._engines[key] = engine
                while len(self._engines) > KEPT_ENGINES:
                    self._engines.popitem(last=False)[1].dispose()
            self._engines.move_to_end(key)
            with engine.connect() as conn, conn.begin():
                yield conn

    def dispose(self) -> None:
        for key in [key for key in self._engines if key[0] == os.getpid()]:
            self._engines.pop(key).dispose()
        super().dispose()

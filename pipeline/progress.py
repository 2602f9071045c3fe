"""Progress of the long stages (loading, embedding, extraction, LLM calls, reports).

Why: 2,000 documents took ~5 minutes with one console line (issue 13). A loop reports
`(stage, done, total)` here and never knows who listens:

    with progress.track("embedding", len(texts)) as bar:
        for batch in batches:
            ...
            bar.advance(len(batch))

The listener is the reporter in force: one set for a block with `use` (the CLI: `rich` bars
on a terminal, `for_terminal`), else the process default (`set_default`; the Dagster code
location installs a `LogReporter` on the step's log, so a run in the UI shows
`embedding 1200/4000 (85.3/s)` every 10 s), else nobody: a loop with no listener costs a
lock and a clock read per advance. This module never imports dagster, and rich only when a
terminal asks for bars.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Protocol, TypeVar

T = TypeVar("T")
LOG_INTERVAL_S = 10.0


class Reporter(Protocol):
    """Told of every change of a tracker (one run of a stage), then of its end."""

    def update(self, tracker: Tracker) -> None: ...

    def finish(self, tracker: Tracker) -> None: ...


_default: Reporter | None = None
_override: Reporter | None = None  # set for a block by `use`


def set_default(reporter: Reporter | None) -> None:
    """The reporter when no block set one with `use`."""
    global _default
    _default = reporter


def current() -> Reporter | None:
    return _override or _default


@contextmanager
def use(reporter: Reporter | None) -> Iterator[Reporter | None]:
    """`reporter` for the block, process-wide: stages run in worker threads too (None: the
    default)."""
    global _override
    before, _override = _override, reporter
    try:
        yield reporter
    finally:
        _override = before


class Tracker:
    """One run of a stage (`done` of `total` items, total None when unknown). Runs of one
    stage may overlap (document shards in threads): reporters key them by tracker."""

    def __init__(self, stage: str, total: int | None, reporter: Reporter | None):
        self.stage, self.total, self.done = stage, total, 0
        self._reporter = reporter
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        if self._reporter is None:
            return
        with self._lock:
            self.done += n
        self._reporter.update(self)

    def finish(self) -> None:
        if self._reporter is not None:
            self._reporter.finish(self)


def start(stage: str, total: int | None = None) -> Tracker:
    """A tracker for `total` items of `stage`, reported to the current reporter (any thread
    may advance it); call `finish` at the end (or use `track`)."""
    tracker = Tracker(stage, total, current())
    if tracker._reporter is not None:
        tracker._reporter.update(tracker)
    return tracker


@contextmanager
def track(stage: str, total: int | None = None) -> Iterator[Tracker]:
    """`start` for a block; its end finishes the tracker."""
    tracker = start(stage, total)
    try:
        yield tracker
    finally:
        tracker.finish()


def iterate(
    stage: str,
    items: Iterable[T],
    total: int | None = None,
    size: Callable[[T], int] | None = None,
) -> Iterator[T]:
    """`items`, each advancing the stage by `size(item)` (1) once its loop body is done;
    total: len(items) when it has one and no `size` is given."""
    if total is None and size is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with track(stage, total) as bar:
        for item in items:
            yield item
            bar.advance(size(item) if size is not None else 1)


def _rate(done: int, elapsed: float) -> str:
    return f"{done / elapsed:,.1f}/s" if elapsed > 0 else "-"


def _count(tracker: Tracker, final: bool = False) -> str:
    """`done/total`; an unknown total is `?` while running, left out at the end."""
    if tracker.total is None:
        return str(tracker.done) if final else f"{tracker.done}/?"
    return f"{tracker.done}/{tracker.total}"


class LogReporter:
    """`stage done/total (rate/s)` through `log` at most every `interval_s` per tracker, and
    one line when a run ends: steady lines for a log (Dagster's, a file, a CI job)."""

    def __init__(
        self,
        log: Callable[[str], object],
        interval_s: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.log, self.interval_s, self.clock = log, interval_s, clock
        self._times: dict[int, list[float]] = {}  # id(tracker) -> [started, last line]
        self._lock = threading.Lock()

    def update(self, tracker: Tracker) -> None:
        now = self.clock()
        with self._lock:
            times = self._times.setdefault(id(tracker), [now, now])
            if now - times[1] < self.interval_s:
                return
            times[1] = now
            elapsed = now - times[0]
        self.log(f"{tracker.stage} {_count(tracker)} ({_rate(tracker.done, elapsed)})")

    def finish(self, tracker: Tracker) -> None:
        now = self.clock()
        with self._lock:
            started = self._times.pop(id(tracker), [now])[0]
        if tracker.done:
            elapsed = now - started
            self.log(
                f"{tracker.stage} {_count(tracker, final=True)} done in {elapsed:.1f} s "
                f"({_rate(tracker.done, elapsed)})"
            )


class RichReporter:
    """A `rich` bar per stage on a terminal: count, rate, elapsed and remaining time."""

    def __init__(self, stream: IO[str] | None = None):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class Rate(ProgressColumn):  # items a second (rich's own moving estimate)
            def render(self, task) -> Text:
                speed = f"{task.speed:,.1f}/s" if task.speed else ""
                return Text(speed, style="progress.data.speed")

        console = Console(file=stream or sys.stderr)
        self.progress = Progress(
            TextColumn("{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            Rate(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self._tasks: dict[int, int] = {}  # id(tracker) -> rich task
        self._lock = threading.Lock()
        self._running = False

    def update(self, tracker: Tracker) -> None:
        if tracker.total == 0:  # an empty run (a shard with nothing to do): no bar
            return
        with self._lock:
            key = id(tracker)
            if key not in self._tasks:
                if not self._running:
                    self.progress.start()
                    self._running = True
                self._tasks[key] = self.progress.add_task(tracker.stage, total=tracker.total)
            self.progress.update(self._tasks[key], completed=tracker.done, total=tracker.total)

    def finish(self, tracker: Tracker) -> None:
        """The bar goes; one line above the bars says what the run did."""
        with self._lock:
            task = self._tasks.pop(id(tracker), None)
            if task is None:
                return
            elapsed = self.progress.tasks[self.progress.task_ids.index(task)].elapsed or 0.0
            self.progress.remove_task(task)
            if tracker.done:
                self.progress.console.print(
                    f"{tracker.stage}: {_count(tracker, final=True)} in {elapsed:.1f} s "
                    f"({_rate(tracker.done, elapsed)})",
                    highlight=False,
                )

    def close(self) -> None:
        with self._lock:
            if self._running:
                self.progress.stop()
                self._running = False


@contextmanager
def for_terminal(stream: IO[str] | None = None) -> Iterator[Reporter | None]:
    """`rich` bars for the block when `stream` (stderr) is a terminal; else nothing changes
    (a pipe or a CI log gets no bar output, only the default's lines)."""
    stream = stream or sys.stderr
    if not (hasattr(stream, "isatty") and stream.isatty()):
        yield None
        return
    reporter = RichReporter(stream)
    try:
        with use(reporter):
            yield reporter
    finally:
        reporter.close()

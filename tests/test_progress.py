"""Progress reporting: steady n/total log lines (Dagster's run log included), rich bars only
on a terminal, and the pipeline's loops report through it."""

from __future__ import annotations

import io

import polars as pl
from dagster import DagsterInstance, asset, materialize

from pipeline import progress
from pipeline.config import ExtractionSettings
from pipeline.extract import extract_resilient, get_extractor
from pipeline.ingest.loader import load_folder


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A reporter that keeps every (stage, done, total, finished) it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int | None, bool]] = []

    def update(self, t: progress.Tracker) -> None:
        self.calls.append((t.stage, t.done, t.total, False))

    def finish(self, t: progress.Tracker) -> None:
        self.calls.append((t.stage, t.done, t.total, True))


def test_log_reporter_writes_n_of_total_at_a_steady_interval():
    clock, lines = FakeClock(), []
    reporter = progress.LogReporter(lines.append, interval_s=10.0, clock=clock)
    with progress.use(reporter), progress.track("embedding", 100) as bar:
        for _ in range(100):
            clock.now += 0.5  # 2 items a second: a line every 20 items
            bar.advance()
    assert lines[:2] == ["embedding 20/100 (2.0/s)", "embedding 40/100 (2.0/s)"]
    assert len(lines) == 6 and lines[-1] == "embedding 100/100 done in 50.0 s (2.0/s)"
    # an unknown total and an empty stage
    with progress.use(reporter), progress.track("LLM calls") as bar:
        clock.now += 11
        bar.advance(3)
    with progress.use(reporter), progress.track("reports", 0):
        pass
    assert lines[6:] == ["LLM calls 3/? (0.3/s)", "LLM calls 3 done in 11.0 s (0.3/s)"]


def test_iterate_advances_by_size_and_runs_with_nobody_listening():
    rec, default = Recorder(), progress.current()  # the Dagster one once `assets` is imported
    with progress.use(rec):
        seen = list(progress.iterate("reports", range(0, 25, 10), 25, lambda at: min(10, 25 - at)))
    assert seen == [0, 10, 20]
    assert [c[1] for c in rec.calls] == [0, 10, 20, 25, 25] and rec.calls[-1][3]
    assert progress.current() is default  # `use` ends with its block
    with progress.use(None):
        progress.set_default(None)
        try:
            assert list(progress.iterate("loading", "abc")) == ["a", "b", "c"]  # no listener
        finally:
            progress.set_default(default)


def test_rich_bars_only_on_a_terminal():
    default = progress.current()
    pipe = io.StringIO()  # not a TTY: no bar, not a byte written
    with progress.for_terminal(pipe) as reporter:
        assert reporter is None and progress.current() is default
        for _ in progress.iterate("embedding", range(50)):
            pass
    assert pipe.getvalue() == ""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    with progress.for_terminal(tty) as reporter:
        assert isinstance(reporter, progress.RichReporter)
        for _ in progress.iterate("embedding", range(50)):
            pass
    assert "embedding: 50/50 in" in tty.getvalue()
    assert progress.current() is default


def test_the_pipeline_loops_report(tmp_path):
    rec = Recorder()
    units = pl.DataFrame(
        {
            "id": [f"u{i}" for i in range(5)],
            "text": ["Albert Einstein worked with Marcel Grossmann in Zurich."] * 5,
            "document_id": ["d"] * 5,
        }
    )
    for i in range(3):
        (tmp_path / f"{i}.md").write_text(f"# Doc {i}\n\nNiels Bohr visited Copenhagen.\n")
    with progress.use(rec):
        extract_resilient(get_extractor(ExtractionSettings()), units, batch_size=2)
        load_folder(tmp_path)
    ends = {(s, d, t) for s, d, t, finished in rec.calls if finished}
    assert ("extraction", 5, 5) in ends and ("loading", 3, 3) in ends


def test_llm_calls_report_each_answer(tmp_path):
    from pipeline.config import LlmSettings
    from pipeline.llm.client import LlmClient
    from pipeline.llm.fake_server import FakeLlm

    rec = Recorder()
    with FakeLlm() as server, progress.use(rec):
        settings = LlmSettings(base_url=server.base_url, api_key="sk-test", timeout_s=5.0)
        llm = LlmClient(settings, tmp_path, backoff_base_s=0.01)
        asks = [[{"role": "user", "content": f"question {i}"}] for i in range(4)]
        answers = llm.run_many([llm.chat(m, stage="test") for m in asks])
    assert len(answers) == 4 and all(isinstance(a, str) for a in answers)
    assert [c[1] for c in rec.calls if c[0] == "LLM calls"] == [0, 1, 2, 3, 4, 4]
    assert rec.calls[-1] == ("LLM calls", 4, 4, True)


def test_a_dagster_run_logs_progress_lines():
    import assets  # noqa: F401 - the code location installs the run-log reporter

    @asset
    def counted() -> int:
        return sum(1 for _ in progress.iterate("extraction", range(7)))

    instance = DagsterInstance.ephemeral()
    result = materialize([counted], instance=instance)
    assert result.success
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any(m.startswith("extraction 7/7 done in") for m in messages), messages

"""What a run launched from the webserver costs next to the CLI, on the sample corpus.

    python benchmarks/ui_launch.py [--modes dev,dg,webserver] [--repeat N] [--work DIR]

In one script run, each run into a fresh output folder, after one untimed warm-up run.
For each UI mode a server is started on a temporary DAGSTER_HOME (a copy of the repo's
dagster.yaml, storage under it), then CLI and UI runs alternate with it up (same
background load; the CLI records its run in the same instance, as with DAGSTER_HOME=$PWD):

  cli        `docgraph index --input IN --output OUT`: process start to exit;
  dev        `dagster dev` (webserver + daemon, the repo's QueuedRunCoordinator: the daemon
             dequeues the run), `index_job` submitted through GraphQL with a run-config
             override of `resources.docgraph.config.output_dir`: submit to RUN_SUCCESS;
  dg         `dg dev` (dagster-dg-cli): the same as dev, the location from [tool.dg];
  webserver  `dagster-webserver` alone with DefaultRunCoordinator (the run launches at
             submit, no queue): the same submission, submit to RUN_SUCCESS.

Prints the median wall times, the ratio of each UI mode to the CLI (target <= 1.5), where the time
of each run went (queue, run-worker start, steps, end) from its event log, and the slowest
steps side by side.

The server helpers (DagsterServer, instance_home, free_port) are shared with
tests/test_ui_launch.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
JOB = "index_job"
LOCATION_QUERY = """
query {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repo_instance_config(folder: Path) -> dict:
    """The repo's dagster.yaml with its storage folders made absolute under `folder` (relative
    ones would resolve against the server's working directory, the repo, and write into the
    repo's own instance)."""
    config = yaml.safe_load((ROOT / "dagster.yaml").read_text(encoding="utf-8"))

    def absolute(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "base_dir" and isinstance(value, str) and not Path(value).is_absolute():
                    node[key] = str(folder / value)
                else:
                    absolute(value)

    absolute(config)
    return config


def instance_home(folder: Path, queued: bool = True) -> Path:
    """A DAGSTER_HOME in `folder` (repo_instance_config). queued=False adds
    DefaultRunCoordinator: a submitted run launches at once, no daemon needed."""
    folder.mkdir(parents=True, exist_ok=True)
    config = repo_instance_config(folder)
    if not queued:
        config["run_coordinator"] = {
            "module": "dagster._core.run_coordinator",
            "class": "DefaultRunCoordinator",
        }
    (folder / "dagster.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return folder


def docgraph_env(home: Path, input_dir: Path, output_dir: Path) -> dict[str, str]:
    """The environment of every process: no DOCGRAPH_ variable but the two folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCGRAPH_")}
    env.update(
        DAGSTER_HOME=str(home),
        DOCGRAPH_INPUT_DIR=str(input_dir),
        DOCGRAPH_OUTPUT_DIR=str(output_dir),
    )
    return env


def _default_sigint() -> None:
    # A shell that starts a job in the background hands it SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: `dagster dev` would never shut down on Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class DagsterServer:
    """`dagster dev` (daemon=True: webserver + daemon), `dg dev` (cli="dg", webserver +
    daemon) or `dagster-webserver` alone, on a free 127.0.0.1 port, in its own process group
    (stopped by SIGINT, then SIGKILL to the group). Each finds the code location where a user
    running it in the repo does: pyproject.toml's [tool.dg] block, no -w."""

    def __init__(
        self, env: dict[str, str], log_path: Path, daemon: bool = True, cli: str = "dagster"
    ):
        self.env, self.log_path, self.daemon, self.cli = env, log_path, daemon, cli
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> DagsterServer:
        if self.cli == "dg":
            exe = [str(BIN / "dg"), "dev"]
        else:
            exe = [str(BIN / "dagster"), "dev"] if self.daemon else [str(BIN / "dagster-webserver")]
        args = [*exe, "-h", "127.0.0.1", "-p", str(self.port)]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_default_sigint,
        )
        try:
            self.wait_loaded()
        except BaseException:
            self.stop()
            raise
        # ready before any timed submit: the GraphQL client and the partition tags
        self.shard_tags = every_shard(self.env)
        self.gql = self.client()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # dagster dev's Ctrl-C: stops its children
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):  # what is left: code server, run worker
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        self._log.close()

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def wait_loaded(self, timeout_s: float = 240) -> None:
        """Until the code location is loaded (an error in loading it is raised at once)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dagster exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                answer = self.graphql(LOCATION_QUERY)["data"]["workspaceOrError"]
            except (OSError, KeyError, ValueError):
                time.sleep(0.5)
                continue
            entries = answer.get("locationEntries") or []
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                errors = [
                    e["locationOrLoadError"].get("message", "")
                    for e in entries
                    if e["locationOrLoadError"]["__typename"] == "PythonError"
                ]
                if errors:
                    raise RuntimeError("code location failed to load:\n" + "\n".join(errors))
                return
            time.sleep(0.5)
        raise TimeoutError(f"code location not loaded in {timeout_s} s:\n{self.log_tail()}")

    def client(self):
        from dagster_graphql import DagsterGraphQLClient

        return DagsterGraphQLClient("127.0.0.1", port_number=self.port, timeout=60)

    def submit(self, run_config: dict[str, Any], tags: dict[str, str] | None = None) -> str:
        """Submit the index job over every shard (plus `tags`)."""
        tags = {**self.shard_tags, **(tags or {})}
        return self.gql.submit_job_execution(JOB, run_config=run_config, tags=tags)

    def wait_run(self, run_id: str, timeout_s: float = 600) -> str:
        """The run's final status name (SUCCESS, FAILURE, CANCELED)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = self.gql.get_run_status(run_id).value
            if status in ("SUCCESS", "FAILURE", "CANCELED"):
                return status
            if self.proc.poll() is not None:
                raise RuntimeError(f"dagster exited ({self.proc.returncode}):\n{self.log_tail()}")
            time.sleep(0.25)
        raise TimeoutError(f"run {run_id} not finished in {timeout_s} s")


def override(output_dir: Path) -> dict[str, Any]:
    """Run config moving the run's output folder (what a Launchpad override sends)."""
    return {"resources": {"docgraph": {"config": {"output_dir": str(output_dir)}}}}


def every_shard(env: dict[str, str]) -> dict[str, str]:
    """Run tags covering every document shard (the partitions of the per-document stages),
    what the Launchpad's partition picker sends for "all": a fresh output folder needs them
    all, as `docgraph index` runs them."""
    from assets.shards import range_tags
    from pipeline.config import load_settings
    from pipeline.ingest.shards import shard_keys

    return range_tags(shard_keys(load_settings(environ=env).storage.shards))


def run_events(home: Path, run_id: str) -> list[tuple[float, str, str | None, float | None]]:
    """(timestamp, event type, step key, step seconds) of every Dagster event of the run."""
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        out = []
        for entry in instance.all_logs(run_id):
            event = entry.dagster_event
            if event is None:
                continue
            kind = event.event_type.name  # RUN_SUCCESS (its stored value is PIPELINE_SUCCESS)
            seconds = None
            if kind == "STEP_SUCCESS":
                seconds = event.event_specific_data.duration_ms / 1000
            out.append((entry.timestamp, kind, event.step_key, seconds))
        return out


def last_run_id(home: Path) -> str:
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        return instance.get_runs(limit=1)[0].run_id


def phases(events, t0: float, t_end: float) -> dict[str, float]:
    """Where a run's wall time went, from its event log: submit to RUN_ENQUEUED (UI), the
    queue (to RUN_STARTING: the daemon dequeued it and launched the run worker), worker
    start (process start and imports, code location, instance: to RUN_START; for the CLI
    from the process start), to the first step (resources), the steps, and after the last
    step (the run's end; for the CLI also its summary and process exit)."""
    first: dict[str, float] = {}
    for ts, kind, _, _ in events:
        first.setdefault(kind, ts)
    step_ts = [ts for ts, kind, _, _ in events if kind.startswith("STEP_")]
    enqueued = first.get("RUN_ENQUEUED", t0)
    starting = first.get("RUN_STARTING", enqueued)
    start = first.get("RUN_START", starting)
    first_step = min(step_ts) if step_ts else start
    last_step = max(step_ts) if step_ts else start
    return {
        "submit to enqueued": enqueued - t0,
        "queued": starting - enqueued,
        "worker start": start - starting,
        "to first step": first_step - start,
        "steps": last_step - first_step,
        "after last step": t_end - last_step,
    }


def step_seconds(events) -> dict[str, float]:
    return {key: s for _, kind, key, s in events if kind == "STEP_SUCCESS"}


def event_counts(events) -> dict[str, int]:
    """Events the run wrote to the instance's event log (each one a SQLite write)."""
    planned = sum(kind == "ASSET_MATERIALIZATION_PLANNED" for _, kind, _, _ in events)
    done = sum(kind == "ASSET_MATERIALIZATION" for _, kind, _, _ in events)
    return {"events": len(events), "planned": planned, "materializations": done}


def check_outputs(output_dir: Path) -> None:
    if not (output_dir / "index.json").is_file():
        raise RuntimeError(f"no index.json in {output_dir}")


def time_cli(home: Path, inp: Path, out: Path, log: Path) -> tuple[float, list]:
    env = docgraph_env(home, inp, out)
    t0 = time.time()
    with open(log, "wb") as fh:
        subprocess.run(
            [str(BIN / "docgraph"), "index", "--input", str(inp), "--output", str(out)],
            cwd=ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            check=True,
        )
    t1 = time.time()
    check_outputs(out)
    events = run_events(home, last_run_id(home))
    return t1 - t0, [phases(events, t0, t1), step_seconds(events), event_counts(events)]


def time_ui(server: DagsterServer, home: Path, out: Path) -> tuple[float, list]:
    t0 = time.time()
    run_id = server.submit(override(out))
    status = server.wait_run(run_id)
    if status != "SUCCESS":
        raise RuntimeError(f"run {run_id} ended {status}:\n{server.log_tail()}")
    check_outputs(out)
    events = run_events(home, run_id)
    t1 = next(ts for ts, kind, _, _ in events if kind == "RUN_SUCCESS")
    return t1 - t0, [phases(events, t0, t1), step_seconds(events), event_counts(events)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="dev,webserver", help="UI modes: dev, dg, webserver")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs per mode (median)")
    parser.add_argument("--work", help="work folder (default: a temp folder, removed)")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    work = Path(args.work or tempfile.mkdtemp(prefix="ui_launch_"))
    inp = work / "input"
    subprocess.run([str(BIN / "docgraph"), "sample", str(inp)], check=True, capture_output=True)
    times: dict[str, dict[str, list[float]]] = {}
    detail: dict[str, list] = {}
    n = 0

    def fresh() -> Path:
        nonlocal n
        n += 1
        return work / f"out{n}"

    try:
        # untimed: the first run of a session pays cold file caches (torch, the model)
        time_cli(instance_home(work / "home_warmup"), inp, fresh(), work / "warmup.log")
        for mode in modes:
            home = instance_home(work / f"home_{mode}", queued=mode != "webserver")
            env = docgraph_env(home, inp, work / "default_out")
            times[mode] = {"cli": [], "ui": []}
            cli = "dg" if mode == "dg" else "dagster"
            log = work / f"{mode}.log"
            with DagsterServer(env, log, daemon=mode != "webserver", cli=cli) as server:
                # CLI and UI runs alternate with the same server up: same background load
                for _ in range(args.repeat):
                    seconds, detail["cli"] = time_cli(home, inp, fresh(), work / "cli.log")
                    times[mode]["cli"].append(seconds)
                    seconds, detail[mode] = time_ui(server, home, fresh())
                    times[mode]["ui"].append(seconds)
            if (work / "default_out").exists():
                raise RuntimeError("a UI run wrote into the default output folder")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    report(times, detail)
    return 0


LABELS = {
    "cli": "docgraph index (CLI)",
    "dev": "GraphQL on dagster dev (queued)",
    "dg": "GraphQL on dg dev (queued)",
    "webserver": "GraphQL on dagster-webserver (direct)",
}


def report(times: dict[str, dict[str, list[float]]], detail: dict[str, list]) -> None:
    print(f"{'launch':<40} {'CLI s':>7} {'UI s':>7} {'UI/CLI':>7}   runs (CLI / UI)")
    for mode, pair in times.items():
        cli, ui = statistics.median(pair["cli"]), statistics.median(pair["ui"])
        runs = " ".join(f"{c:.1f}/{u:.1f}" for c, u in zip(pair["cli"], pair["ui"], strict=True))
        print(f"{LABELS[mode]:<40} {cli:>7.1f} {ui:>7.1f} {ui / cli:>6.2f}x   {runs}")
    print("target: UI/CLI <= 1.5")
    print("\nwhere the time went (last run of each, s)")
    names = list(detail["cli"][0])
    print(f"{'':<24}" + "".join(f"{m:>12}" for m in detail))
    for name in names:
        print(f"{name:<24}" + "".join(f"{detail[m][0][name]:>12.2f}" for m in detail))
    steps = detail["cli"][1]
    slow = sorted(steps, key=steps.get, reverse=True)[:8]
    print("\nslowest steps (STEP_SUCCESS duration, s)")
    print(f"{'':<40}" + "".join(f"{m:>12}" for m in detail))
    for key in slow:
        row = "".join(f"{detail[m][1].get(key, float('nan')):>12.2f}" for m in detail)
        print(f"{key:<40}{row}")
    total = {m: sum(detail[m][1].values()) for m in detail}
    print(f"{'sum of steps':<40}" + "".join(f"{total[m]:>12.2f}" for m in detail))
    print("\nevent log writes per run")
    for name in detail["cli"][2]:
        print(f"{name:<40}" + "".join(f"{detail[m][2][name]:>12d}" for m in detail))


if __name__ == "__main__":
    sys.exit(main())

"""`docgraph` command line: index a folder (through the Dagster asset graph), query, check.

Heavy imports (dagster, torch) happen inside the commands so `docgraph --help` is instant.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import warnings
from importlib import resources
from pathlib import Path

from pipeline.config import load_settings
from pipeline.serve.request import QUERY_MODES
from pipeline.storage import lock, mirror, remote
from pipeline.storage.object_store import RemoteError


def write_sample_corpus(target: str | Path) -> list[Path]:
    """Copy the bundled sample corpus (a few linked documents) into `target`."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for item in sorted((resources.files("pipeline") / "sample_corpus").iterdir(), key=str):
        if item.name.endswith((".md", ".txt")):
            dest = target / item.name
            with resources.as_file(item) as src:
                shutil.copyfile(src, dest)
            written.append(dest)
    return written


def cmd_index(args: argparse.Namespace) -> int:
    """Index the input folder; a missing or empty one is an error (exit 2) before any run."""
    from pipeline.ingest import check_input_folder, own_folders

    settings = load_settings(args.config, _folder_overrides(args))
    check_input_folder(settings.input_dir, own_folders(settings.output_dir))
    # the output lock first: a second writer stops here (exit 2, naming the holder) before
    # Dagster starts; the run's steps take it again, re-entrantly, in this process
    wait_s = settings.storage.lock_wait_s if args.wait is None else args.wait
    url = mirror.url_of(settings.output_dir)  # s3://…: output_dir is its local mirror
    if url is not None:  # the store's current version decides which shards are stale
        remote.refresh(settings.output_dir, force=True)
    lock.acquire(settings.output_dir, "docgraph-index", wait_s)
    from assets.run import run_index
    from pipeline import progress

    try:
        with progress.for_terminal():  # rich bars on a terminal, else the log's n/total lines
            result = run_index(
                args.config,
                settings.input_dir,
                settings.output_dir,
                raise_on_error=False,
                log_level=args.log_level,
                full=args.full,
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


def _prepare_queries(settings) -> None:
    """Make the next cold `docgraph query` fast (issue 13): copy the vectors out of Lance
    (pipeline.vectors.cache) and export the query embedder to ONNX
    (pipeline.vectors.embed_onnx; once per model, ~10 s). Best effort: a query without them is only
    slower."""
    from pipeline.vectors import lance as vectors
    from pipeline.vectors.embed_onnx import ensure_exported

    for name in ("text_units", "entities", "community_reports", "content_nodes"):
        vectors.read_vectors(settings.output_dir, name)
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
            rows.append(f"  {name:<24} {store.read_table(output_dir, name).height:>8} rows")
    return "tables:\n" + "\n".join(rows)


def cmd_query(args: argparse.Namespace) -> int:
    """Run one query. An LLM answer that fails exits 1, unless --offline-fallback keeps the
    extractive answer; every fallback is a `docgraph: warning:` line on stderr."""
    from pipeline.query import GraphIndex

    settings = load_settings(args.config, _folder_overrides(args))
    index = GraphIndex.open(
        settings.output_dir,
        settings,
        llm_fallback=args.offline_fallback,
        publication_id=args.publication or None,
    )
    if index.llm is None:  # offline: nothing imports openai (~1 s of a cold query)
        _print_query(index, args)
        return 0
    from pipeline.query.answer import LlmAnswerError, LlmFallbackWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LlmFallbackWarning)
        try:
            _print_query(index, args)
        except LlmAnswerError as exc:
            print(
                f"docgraph: {exc}; check llm.base_url, llm.api_key and the server, or pass "
                "--offline-fallback to print the extractive answer instead",
                file=sys.stderr,
            )
            return 1
        finally:
            _show_warnings(caught, LlmFallbackWarning)
    return 0


def _show_warnings(caught: list[warnings.WarningMessage], fallback: type[Warning]) -> None:
    """Fallback warnings as one `docgraph: warning:` line each; any other as Python shows it."""
    for w in caught:
        if issubclass(w.category, fallback):
            print(f"docgraph: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _print_query(index, args: argparse.Namespace) -> None:
    from pipeline.serve.request import STREAM_MODES, QueryRequest, run_query

    stream = args.stream and index.llm is not None and not args.json
    request = QueryRequest(
        query=args.query,
        top_k=args.top_k,
        level=args.level,
        max_hops=args.max_hops,
        max_nodes=args.max_nodes,
        edge_types=args.edge_types.split(",") if args.edge_types else None,
        budget=args.budget,
        question=args.question,
        quick=args.quick,
    )
    result = run_query(index, args.mode, request, llm_answer=not stream)
    if args.json:  # the same text `docgraph serve` answers
        print(result.to_json(indent=2))
    elif args.mode == "focus" and not args.question:
        print(result.context_text)
    elif stream and args.mode in STREAM_MODES:
        _print_stream(index.stream_answer(result))
    else:
        print(result.answer)
        if args.show_context:
            print("\n" + result.context_text)


def _print_stream(pieces) -> None:
    """Print pieces as they come; a stream that breaks off midway still ends its line."""
    started = False
    try:
        for piece in pieces:
            started = True
            print(piece, end="", flush=True)
    finally:
        if started:
            print()


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the query modes over HTTP until Ctrl-C (pipeline/serve/server.py)."""
    from pipeline.serve.server import open_index, serve

    settings = load_settings(args.config, _folder_overrides(args))
    index = open_index(settings.output_dir, settings, llm_fallback=args.offline_fallback)
    serve(index, host=args.host, port=args.port)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from pipeline.schemas import SEMANTIC_TABLES, TABLES
    from pipeline.storage import store, validate

    settings = load_settings(args.config, _folder_overrides(args))
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


def cmd_sample(args: argparse.Namespace) -> int:
    for path in write_sample_corpus(args.target):
        print(path)
    return 0


def cmd_fake_llm(args: argparse.Namespace) -> int:
    """Serve the fake OpenAI-compatible server until Ctrl-C (LLM mode without a key)."""
    import os
    import time

    from pipeline.llm.fake_server import FakeLlm, default_stall_s

    key = os.environ.get("OPENAI_API_KEY") if args.require_key else None
    if args.require_key and not key:
        raise ValueError("fake-llm --require-key: set OPENAI_API_KEY to the key to require")
    server = FakeLlm(
        fault_rate=args.fault_rate,
        faults=[f.strip() for f in args.faults.split(",") if f.strip()],
        seed=args.seed,
        host=args.host,
        port=args.port,
        stall_s=default_stall_s() if args.stall_s is None else args.stall_s,
        require_key=key,
        quiet=False,
    )
    with server:
        print(f"fake OpenAI-compatible server at {server.base_url}", flush=True)
        print(
            f"  try: OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=any "
            "DOCGRAPH_LLM__ENABLED=true docgraph index   (Ctrl-C stops)",
            file=sys.stderr,
            flush=True,
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write the entity graph as GraphML or as one offline HTML page (pipeline.export)."""
    from pipeline import export

    settings = load_settings(args.config, _folder_overrides(args))
    target = Path(args.to or f"entity_graph.{args.format}")
    if args.format == "graphml":
        nodes, edges = export.export_graphml(settings.output_dir, target)
        print(f"{target}: {nodes} entities, {edges} relationships")
    else:
        limit = args.max_nodes or export.DEFAULT_MAX_NODES
        shown, total = export.export_html(settings.output_dir, target, limit)
        print(f"{target}: {shown} of {total} entities (the highest degree first)")
    return 0


def _folder_overrides(args: argparse.Namespace) -> dict[str, str]:
    pairs = (("input_dir", getattr(args, "input", None)), ("output_dir", args.output))
    return {k: v for k, v in pairs if v}


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a count, a hop limit, a budget)."""
    return _int_at_least(text, 1, "a positive integer")


def _non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a community level)."""
    return _int_at_least(text, 0, "an integer >= 0")


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def _seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="docgraph", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="YAML settings file (default: $DOCGRAPH_CONFIG)")
        p.add_argument("--output", help="output folder (default: settings output_dir)")

    p = sub.add_parser("index", help="index the input folder (runs the Dagster asset graph)")
    common(p)
    p.add_argument("--input", help="input folder (default: settings input_dir)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument(
        "--wait",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="when another run writes the output folder, wait this long for it "
        "(default: settings storage.lock_wait_s, 0: stop at once)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="run every document shard, not only those whose files changed",
    )
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("query", help="query an index")
    common(p)
    p.add_argument("mode", choices=QUERY_MODES)
    p.add_argument("query", help="the question (focus: the uri of a note or section)")
    p.add_argument("--top-k", type=_positive_int, default=None, help="results kept")
    p.add_argument("--level", type=_non_negative_int, default=None, help="community level (global)")
    p.add_argument("--max-hops", type=_positive_int, default=None, help="expand: graph hops")
    p.add_argument("--max-nodes", type=_positive_int, default=None, help="expand: nodes kept")
    p.add_argument("--edge-types", default=None, help="expand: comma-separated edge types")
    p.add_argument("--budget", type=_positive_int, default=None, help="focus: token budget")
    p.add_argument("--question", default=None, help="focus, LLM mode: a question to answer")
    p.add_argument("--quick", action="store_true", help="flow: semantic search + graph growth")
    p.add_argument(
        "--publication",
        action="append",
        metavar="ID",
        help="search only the documents of this publication (repeat for several)",
    )
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.add_argument("--show-context", action="store_true", help="print the context too")
    p.add_argument("--stream", action="store_true", help="LLM mode: stream the answer")
    p.add_argument(
        "--offline-fallback",
        action="store_true",
        help="LLM mode: when the LLM answer fails, print the extractive answer (with a warning) "
        "instead of failing with exit 1",
    )
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("serve", help="serve the query modes over HTTP (FastAPI, Ctrl-C stops)")
    common(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (no authentication)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--offline-fallback",
        action="store_true",
        help="LLM mode: answer the extractive answer (said in `fallback`) when the LLM fails",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("check", help="check schemas and references of an index")
    common(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("export", help="write the entity graph as GraphML or an offline HTML page")
    p.add_argument("format", choices=["graphml", "html"])
    common(p)
    p.add_argument("--to", help="file to write (default: ./entity_graph.FORMAT)")
    p.add_argument(
        "--max-nodes", type=_positive_int, default=None, help="html: entities shown (2000)"
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("sample", help="write the sample corpus to a folder")
    p.add_argument("target")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("fake-llm", help="serve a fake OpenAI-compatible LLM (Ctrl-C stops)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765, help="0: any free port")
    p.add_argument("--fault-rate", type=float, default=0.0, help="share of requests to fail")
    p.add_argument("--seed", type=int, default=0, help="fault RNG seed")
    p.add_argument("--faults", default="429,500,timeout,malformed", help="faults drawn from")
    p.add_argument(
        "--stall-s",
        type=float,
        default=None,
        help="a 'timeout' fault stalls this long (default: the client's default timeout + 5 s)",
    )
    p.add_argument(
        "--require-key", action="store_true", help="answer 401 unless given $OPENAI_API_KEY"
    )
    p.set_defaults(func=cmd_fake_llm)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, lock.OutputLocked, RemoteError) as exc:
        print(f"docgraph: {exc}", file=sys.stderr)
        return 2

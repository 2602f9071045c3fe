"""`docgraph` command line: index a folder (through the Dagster asset graph), query, check.

Heavy imports (dagster, torch) happen inside the commands so `docgraph --help` is instant.
"""

from __future__ import annotations

import argparse
import gc
import sys

from app.cli.args import comma_list, non_negative_int, positive_int, seconds
from app.cli.demo import cmd_fake_llm, cmd_sample
from app.cli.export import cmd_export
from app.cli.indexing import cmd_check, cmd_index
from app.cli.querying import cmd_query, cmd_serve
from pipeline.query.modes import OPTIONS, QUERY_MODES
from pipeline.storage import lock
from pipeline.storage.object_store import RemoteError


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
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="when another run writes the output folder, wait this long for it "
        "(default: settings storage.lock_wait_s, 0: stop at once)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="run every document shard and the tail, not only what changed (also when the index "
        "is up to date)",
    )
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("query", help="query an index")
    common(p)
    p.add_argument("mode", choices=QUERY_MODES)
    p.add_argument("query", help="the question (focus: the uri of a note or section)")
    add_mode_options(p)
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
    p.add_argument(
        "--input", help="input folder the page shows cited PDF pages from (settings input_dir)"
    )
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
        "--max-nodes", type=positive_int, default=None, help="html: entities shown (2000)"
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("sample", help="write the sample corpus to a folder")
    p.add_argument("target")
    p.set_defaults(func=cmd_sample)

    _add_fake_llm(sub)
    return parser


def _add_fake_llm(sub) -> None:
    """`docgraph fake-llm`: the fake OpenAI-compatible server tests and benchmarks use."""
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
    p.add_argument(
        "--answers",
        choices=["model", "verbose"],
        default="model",
        help="extraction answers as long as a real model's (default), or the whole offline "
        "graph (verbose: answers cut at max_tokens, split and asked again)",
    )
    p.set_defaults(func=cmd_fake_llm)


def add_mode_options(p: argparse.ArgumentParser) -> None:
    """One --flag per exposed option of the query modes (pipeline/query/modes.py)."""
    for name, option in OPTIONS.items():
        if not option.exposed:
            continue
        flag = "--" + name.replace("_", "-")
        if option.annotation is bool:
            p.add_argument(flag, action="store_true", help=option.help)
        elif option.annotation is int:
            kind = positive_int if option.minimum == 1 else non_negative_int
            p.add_argument(flag, type=kind, default=None, help=option.help)
        elif option.annotation is str:
            p.add_argument(flag, default=None, help=option.help)
        else:  # a list of names
            p.add_argument(flag, type=comma_list, default=None, help=f"{option.help} (a,b,...)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, lock.OutputLocked, RemoteError) as exc:
        print(f"docgraph: {exc}", file=sys.stderr)
        return 2


def cli() -> int:
    """The `docgraph` process's entry (`python -m app.cli`, the console script): `main`, then
    every object left out of the interpreter's last collection. The process ends right
    after, nothing in it needs collecting, and that full walk of every tracked object (the
    models', Dagster's and the run's) took ~1 s of a 40k-document edit's wall time."""
    code = main()
    gc.freeze()
    return code

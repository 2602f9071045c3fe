"""`docgraph query` and `docgraph serve`: one query printed (answer, context, JSON or a
streamed LLM answer, with fallback warnings on stderr), or the query modes over HTTP."""

from __future__ import annotations

import argparse
import sys
import warnings

from app.cli.args import folder_overrides
from pipeline.config import load_settings


def cmd_query(args: argparse.Namespace) -> int:
    """Run one query. An LLM answer that fails exits 1, unless --offline-fallback keeps the
    extractive answer; every fallback is a `docgraph: warning:` line on stderr."""
    from pipeline.query import GraphIndex

    settings = load_settings(args.config, folder_overrides(args))
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
    from pipeline.query.modes import OPTIONS, STREAM_MODES, get_mode

    stream = args.stream and index.llm is not None and not args.json
    given = {name: getattr(args, name) for name, o in OPTIONS.items() if o.exposed}
    options = get_mode(args.mode).from_request(given)  # as `docgraph serve` reads a body
    result = index.search(args.mode, args.query, llm_answer=not stream, **options)
    if args.json:  # the same text `docgraph serve` answers
        print(result.to_json(indent=2))
    elif args.mode == "focus" and not args.question:
        print(result.context_text)
    elif stream and args.mode in STREAM_MODES:
        _print_stream(index.stream_answer(result))
    else:
        print(cited_text(result))
        if args.show_context:
            print("\n" + result.context_text)


def cited_text(result) -> str:
    """The answer with each sentence's citation: "sentence [n]", then one line per source
    ("[n] document > section path, p. 3"); the answer alone when it has no citations."""
    cites = result.citations
    if not cites:
        return result.answer
    lines = [" ".join(f"{c['sentence']} [{c['n']}]" for c in cites), ""]
    for c in cites:
        parts = [c.get("document_title") or c.get("source_path") or "?"]
        parts += [p for p in c.get("section_path") or [] if p != parts[-1]]
        pages = sorted(set(c.get("pages") or []))
        page = f", p. {'-'.join(map(str, sorted({pages[0], pages[-1]})))}" if pages else ""
        lines.append(f"[{c['n']}] {' > '.join(parts)}{page}")
    return "\n".join(lines)


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
    """Serve the query modes over HTTP until Ctrl-C (app/serve/server.py)."""
    from app.serve.server import open_index, serve

    settings = load_settings(args.config, folder_overrides(args))
    index = open_index(settings.output_dir, settings, llm_fallback=args.offline_fallback)
    serve(index, host=args.host, port=args.port)
    return 0

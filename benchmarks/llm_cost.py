"""LLM-mode cost: chat calls and prompt / completion tokens per stage and per 1,000 corpus tokens
for A Christmas Carol, next to the peers' published figures; then the incremental cost of adding
a small document and of editing the book's first line — against both behaviours of the fake.

    python benchmarks/llm_cost.py [--work DIR] [--answers model,verbose] [--no-heading-prefix]

The real Dagster asset graph runs in LLM mode against the in-process fake OpenAI-compatible
server (`pipeline.llm.fake_server.FakeLlm`), whose prompts and answers have realistic sizes.
`--answers model` (the default of `docgraph fake-llm`): extraction answers as long as a real
extractor's (2.4 answer tokens per text token on dense text, as HippoRAG 2 reports; 0.5 on
this book); `verbose`: the offline extractor's whole graph (2.6 on this book), whose answers
are cut at max_tokens, split and asked again. Calls are counted twice: by the client
(`llm_by_stage` metadata on each step's materialization: real calls, cache hits excluded) and
by the server (its X-Docgraph-Stage header counter); both are printed when they differ. The
answer ratio is the one the run's packs were sized by (`answer_tokens` / `text_tokens` of
stage "extract").

The full index runs into `<work>/<answers>/full/output` with a fresh LLM cache. Each
incremental run starts from a copy of that output folder (so from its LLM cache) with a changed
input folder, and counts only the calls the server receives during the re-run. Besides the
first line (the document's title), one line of the body is edited too, to tell the prefix's
effect from the chunker's and the packer's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import polars as pl

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
BOOK = SHARED / "christmas_carol" / "mock_data.txt"
BOOK_NAME = "christmas_carol.txt"
BODY_LINE = ("Marley was dead, to begin with.", "Marley was dead: to begin with.")
# issue 46, with model-like answers (issue 4's were 1.5 and 4,000)
TARGET_CALLS_PER_1K = 1.0
TARGET_PROMPT_PER_1K = 2000
TARGET_ADD_CALLS = 5
TARGET_EDIT_UNITS = 2

# Peers on the same book (chat calls, prompt tokens, completion tokens), as published/measured
# in the issue.
PEERS = [
    ("GraphRAG 3.3.0", 234, 441_700, 86_500),
    ("LightRAG 1.5.7", 94, 330_000, 56_000),
    ("nano-graphrag", 120, 430_000, 66_000),
]

SMALL_DOC = """Fezziwig's Warehouse Ledger

Mr. Fezziwig kept his warehouse ledger in a tall green book that stood beside the counting-house
window in London. Dick Wilkins, his apprentice, copied every entry twice and read it aloud to
Ebenezer Scrooge on Saturday evenings.

Mrs. Fezziwig settled the accounts of the Christmas ball each year: the fiddler, the cold roast,
the mince-pies and the negus. She paid the fiddler from her own purse and wrote his name in the
ledger as a friend of the house.

When the warehouse closed, the ledger passed to Belle, who gave it to the Cratchit family, and
Bob Cratchit kept it on the shelf above the fire in Camden Town.
"""


def _config(path: Path, base_url: str, heading_prefix: bool) -> str:
    path.write_text(
        ("" if heading_prefix else "chunking:\n  heading_prefix: false\n") + "llm:\n"
        "  enabled: true\n"
        f"  base_url: {base_url}\n"
        "  chat_model: fake-model\n"
        "  timeout_s: 60.0\n"
        "  max_retries: 2\n",
        encoding="utf-8",
    )
    return str(path)


def _client_stages(result) -> dict[str, dict[str, int]]:
    """Per-stage counters summed over the steps' materializations (one record per step)."""
    seen: set[str] = set()
    totals: dict[str, Counter] = {}
    for event in result.get_asset_materialization_events():
        meta = event.materialization.metadata
        if "llm_by_stage" not in meta or event.step_key in seen:
            continue
        seen.add(event.step_key)
        for stage, counters in meta["llm_by_stage"].value.items():
            totals.setdefault(stage, Counter()).update(
                {k: v for k, v in counters.items() if isinstance(v, int)}
            )
    return {stage: dict(c) for stage, c in sorted(totals.items())}


def _index(server, config: str, inp: Path, out: Path) -> dict:
    from app.run import run_index

    server.reset_counters()
    started = time.perf_counter()
    result = run_index(
        config_path=config, input_dir=str(inp), output_dir=str(out), log_level="ERROR"
    )
    assert result.success
    return {
        "seconds": time.perf_counter() - started,
        "server_requests": server.requests,
        "server_by_stage": dict(sorted(server.by_stage.items())),
        "client": _client_stages(result),
    }


def _prepare(work: Path, name: str, book_text: str, extra: dict[str, str], base: Path | None):
    """Input folder with the book (and extra files); output folder copied from `base`."""
    inp, out = work / name / "input", work / name / "output"
    shutil.rmtree(work / name, ignore_errors=True)
    inp.mkdir(parents=True)
    (inp / BOOK_NAME).write_text(book_text, encoding="utf-8")
    for fname, text in extra.items():
        (inp / fname).write_text(text, encoding="utf-8")
    if base is not None:
        shutil.copytree(base, out)
    return inp, out


def _community_keys(out: Path, columns: tuple[str, ...]) -> set[tuple]:
    """Communities by content (level and the given id lists): what a report reads."""
    from pipeline.storage import store

    df = store.read_table(out, "communities")
    return {
        (r["level"], *(tuple(sorted(r[c] or [])) for c in columns))
        for r in df.select("level", *columns).iter_rows(named=True)
    }


def _changed_communities(full_out: Path, out: Path, columns: tuple[str, ...]) -> int:
    return len(_community_keys(out, columns) - _community_keys(full_out, columns))


def _stability(full_out: Path, out: Path) -> str:
    """How many of the full run's communities kept their number (and id: same members)."""
    from pipeline.storage import store

    old = store.read_table(full_out, "communities").select("community", "id")
    new = store.read_table(out, "communities").select("community", "id")
    both = old.join(new, on="community", suffix="_new")
    same_id = both.filter(pl.col("id") == pl.col("id_new")).height
    return (
        f"communities of the full run kept (same number): {both.height} of {old.height}, "
        f"with the same members (same id): {same_id}; new: {new.height - both.height}"
    )


def _unit_texts(out: Path) -> set[str]:
    from pipeline.storage import store

    return set(store.read_table(out, "text_units")["text"].to_list())


def _stage_rows(run: dict) -> list[tuple[str, int, int, int, int, int]]:
    """(stage, client calls, server calls, cache hits, prompt tokens, completion tokens)."""
    stages = sorted(set(run["client"]) | set(run["server_by_stage"]))
    rows = []
    for stage in stages:
        c = run["client"].get(stage, {})
        rows.append(
            (
                stage,
                c.get("calls", 0),
                run["server_by_stage"].get(stage, 0),
                c.get("cache_hits", 0),
                c.get("prompt_tokens", 0),
                c.get("completion_tokens", 0),
            )
        )
    return rows


def _print_stages(run: dict, corpus_tokens: int) -> tuple[int, int, int]:
    rows = _stage_rows(run)
    differ = any(client != server for _, client, server, *_ in rows)
    k = corpus_tokens / 1000
    head = f"| {'stage':<10} | {'calls':>6} |"
    head += f" {'server':>6} |" if differ else ""
    head += (
        f" {'prompt tok':>10} | {'compl. tok':>10} | {'calls/1k':>8} | {'prompt/1k':>9} |"
        f" {'compl./1k':>9} |"
    )
    print(head)
    print("|" + "|".join("-" * (len(c) + 0) for c in head.split("|")[1:-1]) + "|")
    tot = [0, 0, 0, 0]
    for stage, calls, srv, _hits, p, c in rows:
        line = f"| {stage:<10} | {calls:>6} |" + (f" {srv:>6} |" if differ else "")
        line += f" {p:>10,} | {c:>10,} | {calls / k:>8.2f} | {p / k:>9,.0f} | {c / k:>9,.0f} |"
        print(line)
        tot = [tot[0] + calls, tot[1] + srv, tot[2] + p, tot[3] + c]
    calls, srv, p, c = tot
    line = f"| {'total':<10} | {calls:>6} |" + (f" {srv:>6} |" if differ else "")
    line += f" {p:>10,} | {c:>10,} | {calls / k:>8.2f} | {p / k:>9,.0f} | {c / k:>9,.0f} |"
    print(line)
    if differ:
        print("(calls: client metadata, real calls only; server: requests received incl. retries)")
    return calls, p, c


def _print_edit(
    what: str, full: dict, run: dict, full_out: Path, out: Path, corpus_tokens: int
) -> None:
    from pipeline.storage import store

    print(f"\n### incremental: {what} (re-run on the full run's output)")
    _print_stages(run, corpus_tokens)
    new_units = len(_unit_texts(out) - _unit_texts(full_out))
    n_extract = run["server_by_stage"].get("extract", 0)
    members = _changed_communities(full_out, out, ("entity_ids", "relationship_ids"))
    changed = _changed_communities(
        full_out, out, ("entity_ids", "relationship_ids", "text_unit_ids")
    )
    n_report = run["server_by_stage"].get("report", 0)
    print(f"text units whose text is new: {new_units}; extraction requests: {n_extract}")
    worst = max(new_units, n_extract)
    print(
        f"re-extracted units target <= {TARGET_EDIT_UNITS}: "
        f"{'OK' if worst <= TARGET_EDIT_UNITS else 'MISSED'}"
    )
    total = store.read_table(out, "communities").height
    print(
        f"communities (of {total}) whose entities or relationships changed: {members}; "
        f"whose entities, relationships or text units changed: {changed}"
    )
    if "report" in full["server_by_stage"]:
        print(
            f"report requests: {n_report} (only changed communities re-reported: "
            f"{'OK' if n_report <= changed else 'MISSED'})"
        )
    else:
        print("reports: offline (no 'report' stage calls in LLM mode: LLM reports not wired)")
    print(f"server requests of the re-run: {run['server_requests']}")


def _extraction_health(run: dict, out: Path) -> str:
    """Cut answers, the packs split for them, and units whose answer stayed cut (alone)."""
    from pipeline.storage import store

    c = run["client"].get("extract", {})
    failures = store.read_table(out, "extraction_failures")
    left_cut = failures.filter(pl.col("reason").str.contains("token limit")).height
    ratio = c.get("answer_tokens", 0) / max(1, c.get("text_tokens", 0))
    return (
        f"extraction: answer ratio {ratio:.2f} answer tokens per text token (packs sized by "
        f"it); cut answers {c.get('truncations', 0)} (each split and asked again); units left "
        f"with a cut answer {left_cut}; units fallen back offline {failures.height}"
    )


def _measure(server, work: Path, heading_prefix: bool, book: str) -> dict:
    """The full index and the three incremental re-runs, against `server`."""
    edited = book.split("\n", 1)[0].rstrip() + " (edited first line)\n" + book.split("\n", 1)[1]
    body_edited = book.replace(*BODY_LINE)
    work.mkdir(parents=True, exist_ok=True)
    config = _config(work / "llm.yaml", server.base_url, heading_prefix)
    runs: dict = {}
    inp, runs["full_out"] = _prepare(work, "full", book, {}, None)
    runs["full"] = _index(server, config, inp, runs["full_out"])
    for name, text, extra in (
        ("add", book, {"fezziwig_ledger.txt": SMALL_DOC}),
        ("edit", edited, {}),
        ("edit_body", body_edited, {}),
    ):
        inp, runs[f"{name}_out"] = _prepare(work, name, text, extra, runs["full_out"])
        runs[name] = _index(server, config, inp, runs[f"{name}_out"])
    return runs


def _print_full(runs: dict, corpus_tokens: int) -> None:
    full = runs["full"]
    print(f"full index in LLM mode against the fake server: {full['seconds']:.1f} s\n")
    calls, prompt, completion = _print_stages(full, corpus_tokens)
    print(_extraction_health(full, runs["full_out"]))

    print("\n### peers on the same book (reference figures)")
    head = (
        f"| {'system':<22} | {'calls':>6} | {'prompt tok':>10} | {'compl. tok':>10} |"
        f" {'calls/1k':>8} | {'prompt/1k':>9} |"
    )
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    k = corpus_tokens / 1000
    for name, n, p, c in [*PEERS, ("docgraph (this run)", calls, prompt, completion)]:
        print(f"| {name:<22} | {n:>6} | {p:>10,} | {c:>10,} | {n / k:>8.2f} | {p / k:>9,.0f} |")
    ok_calls = calls / k <= TARGET_CALLS_PER_1K
    ok_prompt = prompt / k <= TARGET_PROMPT_PER_1K
    print(
        f"target <= {TARGET_CALLS_PER_1K} calls and <= {TARGET_PROMPT_PER_1K:,} prompt tokens per "
        f"1k corpus tokens: calls {'OK' if ok_calls else 'MISSED'}, "
        f"prompt tokens {'OK' if ok_prompt else 'MISSED'}"
    )


def _print_incremental(runs: dict, corpus_tokens: int) -> None:
    from pipeline.tokens import count_tokens

    full, full_out = runs["full"], runs["full_out"]
    print("\n### incremental: add one small document (re-run on the full run's output)")
    print(f"small document: {count_tokens(SMALL_DOC)} tokens")
    _print_stages(runs["add"], corpus_tokens)
    n_add = runs["add"]["server_requests"]
    print(_stability(full_out, runs["add_out"]))
    print(
        f"server requests of the re-run: {n_add} (target <= {TARGET_ADD_CALLS}: "
        f"{'OK' if n_add <= TARGET_ADD_CALLS else 'MISSED'})"
    )
    for name, what in (
        ("edit", "edit the first line of the book (the title)"),
        ("edit_body", f"edit one body line ({BODY_LINE[0]!r})"),
    ):
        _print_edit(what, full, runs[name], full_out, runs[f"{name}_out"], corpus_tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp dir)")
    parser.add_argument(
        "--answers",
        default="model,verbose",
        help="the fake's extraction answers to measure against: model, verbose or both",
    )
    parser.add_argument(
        "--no-heading-prefix",
        action="store_true",
        help="chunking.heading_prefix: false (units do not repeat the section path)",
    )
    args = parser.parse_args()
    if not BOOK.is_file():
        raise SystemExit(f"this benchmark needs {BOOK}")
    work = Path(args.work or tempfile.mkdtemp(prefix="docgraph-llm-cost-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OPENAI_API_KEY", "fake-key")
    os.environ.pop("DAGSTER_HOME", None)  # an ephemeral instance: no UI runs for a benchmark

    from pipeline.llm.fake_server import FakeLlm
    from pipeline.tokens import count_tokens

    book = BOOK.read_text(encoding="utf-8")
    corpus_tokens = count_tokens(book)
    assert book.count(BODY_LINE[0]) == 1
    for answers in [a.strip() for a in args.answers.split(",") if a.strip()]:
        with FakeLlm(answers=answers) as server:
            runs = _measure(server, work / answers, not args.no_heading_prefix, book)
        print(
            f"\n## LLM cost, {answers} answers: A Christmas Carol, {corpus_tokens:,} corpus "
            f"tokens (o200k), work {work / answers}"
        )
        print(f"chunking.heading_prefix: {'off' if args.no_heading_prefix else 'on'}")
        _print_full(runs, corpus_tokens)
        _print_incremental(runs, corpus_tokens)


if __name__ == "__main__":
    main()

"""Incremental runs over documents docgraph was never fitted to equal a full index of the same
input (issue 49's equality, on held-out data).

    python benchmarks/unseen_equality.py --work /tmp/unseen

Why: tests/test_incremental_equality.py checks a seeded sequence on a synthetic corpus built
for it; this runs the same comparisons on other people's documents, of the kinds the card
serves: Node.js's API pages (Markdown: headings, code, links; Debian's `nodejs` package puts
them in /usr/share/doc/nodejs/api), Debian packages' NEWS files (plain text, lists, dates;
/usr/share/doc/*/NEWS*.gz) and Russian news articles (NEREL's dev texts, ../shared/data).
It indexes them (four shards), then runs `docgraph`'s incremental index after each of: two
edits (an appended sentence, a Russian text's punctuation changed), six added pages, two
deleted files, a file moved to another folder and a page cut in half; then indexes the final
input into a fresh folder. Every table but communities and reports must equal the full
index's, and so must the Lance tables (the test's allowed differences: its EXCLUDED,
TOLERANCE, LANCE_EXCLUDED, VECTOR_TOLERANCE); communities and reports are checked against
the carry-over policy (every listed id exists, every report names members of its community).
Prints each run's seconds and the differences; exits 1 when there are any.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_incremental_equality import (  # noqa: E402  (tests/ is not a package)
    POLICY_TABLES,
    TOLERANCE,
    UNORDERED,
    _without,
    community_problems,
    lance_difference,
    lance_table,
    report_problems,
    table_difference,
)

from app.run import run_index  # noqa: E402
from pipeline.schemas import TABLES, VECTOR_TABLES  # noqa: E402
from pipeline.storage import store  # noqa: E402

NODE_API = Path("/usr/share/doc/nodejs/api")
DEBIAN_DOCS = Path("/usr/share/doc")
NEREL = ROOT.parent / "shared" / "data" / "nerel" / "dev"
CONFIG = "storage:\n  shards: 4\n"
ADDED = 6  # Node.js pages added by the third run


def write_corpus(inp: Path, per_source: int) -> list[Path]:
    """The first input (`per_source` files of each kind); returns the Node.js pages left
    for the run that adds some."""
    node = sorted(NODE_API.glob("*.md"))
    news = sorted(DEBIAN_DOCS.glob("*/NEWS*.gz"))
    russian = sorted(NEREL.glob("*.txt"))
    for label, found in (("Node.js pages", node), ("NEWS files", news), ("NEREL texts", russian)):
        if len(found) < per_source + (ADDED if found is node else 0):
            raise SystemExit(f"too few {label} ({len(found)}): see the module's doc for where")
    for folder in ("node", "news", "ru"):
        (inp / folder).mkdir(parents=True)
    for page in node[:per_source]:
        shutil.copy(page, inp / "node" / page.name)
    for path in news[:per_source]:
        text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        (inp / "news" / f"{path.parent.name}.txt").write_text(text, encoding="utf-8")
    for path in russian[:per_source]:
        shutil.copy(path, inp / "ru" / path.name)
    return node[per_source : per_source + ADDED]


def _nth(folder: Path, pattern: str, n: int) -> Path:
    return sorted(folder.glob(pattern))[n]


def operations(inp: Path, spare: list[Path]) -> list[tuple[str, Callable[[], None]]]:
    """(label, change) for each incremental run, in order."""

    def edits() -> None:
        page = _nth(inp / "node", "*.md", 3)
        page.write_text(page.read_text() + "\n\nThe stream module was rewritten in Berlin.\n")
        text = _nth(inp / "ru", "*.txt", 2)
        text.write_text(text.read_text().replace(".", ";", 3))

    def add() -> None:
        for page in spare:
            shutil.copy(page, inp / "node" / page.name)

    def delete() -> None:
        _nth(inp / "news", "*.txt", 5).unlink()
        _nth(inp / "ru", "*.txt", 7).unlink()

    def move_and_cut() -> None:
        moved = _nth(inp / "news", "*.txt", 1)
        moved.rename(inp / "node" / moved.name)
        page = _nth(inp / "node", "*.md", 10)
        text = page.read_text()
        page.write_text(text[: len(text) // 2])

    return [
        ("two edits", edits),
        (f"{len(spare)} added", add),
        ("two deleted", delete),
        ("a move and a cut", move_and_cut),
    ]


def differences(inc: Path, full: Path) -> list[str]:
    """What differs between the incremental index and the full one, and what breaks the
    carry-over policy in either (tests/test_incremental_equality.py's comparisons)."""
    problems = []
    for name in TABLES:
        if name in POLICY_TABLES:
            continue
        a = _without(name, store.read_table(inc, name))
        b = _without(name, store.read_table(full, name))
        problems.append(table_difference(name, a, b, name not in UNORDERED, TOLERANCE.get(name)))
    for name in VECTOR_TABLES:
        if name != "community_reports":  # follow the reports (the policy)
            problems.append(lance_difference(name, lance_table(inc, name), lance_table(full, name)))
    for out in (inc, full):
        problems += community_problems(out) + report_problems(out, set())
    return [p for p in problems if p]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (emptied first)")
    ap.add_argument("--per-source", type=int, default=25, help="files of each kind at first")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    inp, inc, full = args.work / "input", args.work / "inc", args.work / "full"
    spare = write_corpus(inp, args.per_source)
    config = args.work / "config.yaml"
    config.write_text(CONFIG)

    def index(out: Path) -> float:
        start = time.perf_counter()
        if not run_index(str(config), str(inp), str(out), log_level="ERROR").success:
            raise SystemExit(f"the index run into {out} failed")
        return time.perf_counter() - start

    print(f"| run | s |\n|---|---:|\n| first index | {index(inc):.1f} |")
    for label, change in operations(inp, spare):
        change()
        print(f"| {label} | {index(inc):.1f} |")
    print(f"| full index of the final input | {index(full):.1f} |")
    rows = {n: store.table_rows(inc, n) for n in ("documents", "text_units", "entities")}
    print(f"\nfinal rows: {rows}")
    problems = differences(inc, full)
    print("\n\n".join(problems) if problems else "every table equals the full index's")
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()

"""What the last run of an output folder changed, and what it had to write (issue 49).

    python benchmarks/edit_footprint.py DIR [DIR ...]

DIR is a kept `benchmarks/scale.py` folder (`--keep`: `input/` and `output/`, two versions
kept) after a nightly run. For each, three tables:
- rows: per GraphRAG table, the rows of the newest version that differ from the version
  before (joined on `id`; each column compared by its hash), gone and new, and which
  columns differ;
- files: the bytes the run wrote anew, by top-level entry of the version folder (a file
  that is still a hard link of the version before's was not written);
- forced: the seconds to read and write again, once, as one Parquet file each (GraphRAG's
  readers take one file per table), the GraphRAG tables the run changed, and to walk the
  input folder with a `stat` of every file: what a run that changed them does at any size.

Why: an edit's cost can only follow the change where the change is small in rows and where
what must be rewritten is small in bytes; this tells the two apart at 2k and 40k documents
(docs/scale.md, "What an edit must rewrite").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.storage import store  # noqa: E402

TABLES = ("entities", "relationships", "text_units", "communities", "community_reports")


def changed_rows(old: Path, new: Path, name: str) -> dict:
    """Rows of table `name` changed, gone and new between two versions, and per column."""
    before, after = (
        pl.read_parquet(old / f"{name}.parquet"),
        pl.read_parquet(new / f"{name}.parquet"),
    )
    columns = [c for c in before.columns if c in after.columns and c != "id"]
    both = before.join(after, on="id", suffix="_now")
    differs = {c: pl.col(c).hash() != pl.col(f"{c}_now").hash() for c in columns}
    per = {c: both.filter(e).height for c, e in differs.items()}
    changed = both.filter(pl.any_horizontal(list(differs.values()))).height if columns else 0
    return {
        "rows": before.height,
        "changed": changed,
        "gone": before.height - both.height,
        "new": after.height - both.height,
        "columns": ", ".join(f"{c} {n}" for c, n in per.items() if n),
    }


def written(old: Path, new: Path) -> tuple[Counter, Counter]:
    """Bytes written anew by the run, and all bytes, by top-level entry of `new`."""

    def inodes(root: Path) -> dict[str, tuple[int, int]]:
        out = {}
        for folder, _, files in os.walk(root):
            for f in files:
                st = os.stat(os.path.join(folder, f))
                out[os.path.relpath(os.path.join(folder, f), root)] = (st.st_ino, st.st_size)
        return out

    before, after = inodes(old), inodes(new)
    fresh, total = Counter(), Counter()
    for rel, (ino, size) in after.items():
        parts = rel.split(os.sep)
        top = os.sep.join(parts[:2]) if parts[0] == "lancedb" and len(parts) > 1 else parts[0]
        total[top] += size
        if before.get(rel, (None, 0))[0] != ino:
            fresh[top] += size
    return fresh, total


def forced(work: Path, new: Path, names: list[str]) -> dict[str, float]:
    """Seconds to walk the input and to read and write each of `names` whole, once."""
    out = {}
    start = time.perf_counter()
    for folder, _, files in os.walk(work / "input"):
        for f in files:
            os.stat(os.path.join(folder, f))
    out["input walk"] = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            start = time.perf_counter()
            store.write_table(tmp, name, pl.read_parquet(new / f"{name}.parquet"))
            out[name] = time.perf_counter() - start
    return out


def report(work: Path) -> None:
    versions = sorted((work / "output" / "versions").iterdir())
    if len(versions) < 2:
        raise SystemExit(f"{work}: fewer than two kept versions")
    old, new = versions[-2], versions[-1]
    print(f"\n## {work} ({old.name} -> {new.name})\n")
    print(
        "| table | rows | changed | gone | new | columns changed |\n|---|---:|---:|---:|---:|---|"
    )
    touched = []
    for name in TABLES:
        r = changed_rows(old, new, name)
        cells = [name, f"{r['rows']:,}", f"{r['changed']:,}", r["gone"], r["new"], r["columns"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
        if r["changed"] or r["gone"] or r["new"]:
            touched.append(name)
    fresh, total = written(old, new)
    mb = 2**20
    print(f"\nwritten anew: {sum(fresh.values()) / mb:.1f} MB of {sum(total.values()) / mb:.1f} MB")
    print("\n| entry | MB written | MB in all |\n|---|---:|---:|")
    for top, size in fresh.most_common(12):
        print(f"| {top} | {size / mb:.2f} | {total[top] / mb:.1f} |")
    times = forced(work, new, touched)
    print("\n| forced | s |\n|---|---:|")
    for what, seconds in times.items():
        print(f"| {what} | {seconds:.2f} |")
    print(f"| all | {sum(times.values()):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", nargs="+", type=Path, help="kept benchmarks/scale.py folders")
    for work in parser.parse_args().work:
        report(work)


if __name__ == "__main__":
    main()

"""One huge file: the memory of indexing a single document of a given size.

    python benchmarks/huge_file.py --mb 151 [--work DIR]     # the issue's 151 MB text
    python benchmarks/huge_file.py --mb 15                   # a quick look

Sharding bounds memory by the documents of a shard; one file is one shard whatever its
size, so every per-document stage must also bound its memory within a document. The file is
the MuSiQue passages (title, blank line, text, blank line), repeated until it holds `--mb`
megabytes, written to `<work>/input/huge.txt` and indexed by `docgraph index` in a child
process (benchmarks/scale.py's `run_index`: RSS of the process tree sampled every 50 ms).
Printed: wall and CPU s, peak RSS of the largest process and of the tree, the rows of
documents, text units and entities, and per stage its wall s and the index process's peak.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale import MUSIQUE, TABLES, current_version, run_index, table_rows  # noqa: E402


def write_huge(path: Path, mb: float) -> int:
    """MuSiQue's passages repeated into one text file of `mb` MB; its size in bytes."""
    passages = json.loads(MUSIQUE.read_text(encoding="utf-8"))
    block = "".join(f"{p['title']}\n\n{p['text']}\n\n" for p in passages).encode("utf-8")
    target = int(mb * 1e6)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        written = 0
        while written < target:
            piece = block[: target - written]
            fh.write(piece)
            written += len(piece)
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mb", type=float, default=151.0, help="size of the file (default 151)")
    ap.add_argument("--work", type=Path, help="keep the input and index here")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="docgraph-huge-"))
    shutil.rmtree(work / "output", ignore_errors=True)
    size = write_huge(work / "input" / "huge.txt", args.mb)
    res = run_index(work / "input", work / "output", work / "index.log")
    version = current_version(work / "output")
    rows = {name: table_rows(version, name) for name in TABLES}
    print(f"one file of {size / 1e6:,.1f} MB -> {work / 'output'}")
    print(
        f"wall {res['wall_s']:,.0f} s, CPU {res['cpu_s']:,.0f} s, peak RSS one process "
        f"{res['one_mb']:,.0f} MB, tree {res['tree_mb']:,.0f} MB ({res['peaks']})"
    )
    print(", ".join(f"{name} {n:,}" for name, n in rows.items()))
    print("\n| stage | wall s | index process peak MB |\n|---|---:|---:|")
    for step, (wall, mb) in res["stages"].items():
        print(f"| {step} | {wall:,.1f} | {mb:,.0f} |")


if __name__ == "__main__":
    main()

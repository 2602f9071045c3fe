"""What changing a Lance vector table in place costs against writing it whole (issue 49):
where pipeline.vectors.carry_over's WHOLE_SHARE and PATCH_WEIGHT come from.

    python benchmarks/lance_carry.py --index /tmp/scale/n2000/output [--table relationships]
        [--copies 4] [--shares 0.05 0.1 0.25 0.5 0.75] [--fragment-rows 16384]

The table's rows (ids, texts, vectors, from the index's current version) are repeated
`--copies` times under new ids, so that it spans several fragments, and written whole
(pipeline.vectors.lance_write.write_whole: the time a whole write takes). Then, for each
share s of its fragments, a hard-linked copy of it is changed as a run changes it:
- rewrite: one row deleted in each of s of the fragments (each fragment compacted, its
  index segment re-mapped) and appended again;
- append: s of the table's rows appended again under new ids (a fragment and an index
  segment each per FRAGMENT_ROWS).
Each time is printed beside the whole write's, per row of the fragments touched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.storage import store  # noqa: E402
from pipeline.vectors import lance_write  # noqa: E402


def _rows(index: Path, table: str, copies: int) -> pa.Table:
    import lancedb

    data = lancedb.connect(str(store.resolve(index) / store.LANCE_DIR)).open_table(table)
    rows = data.to_arrow()
    parts = []
    for c in range(copies):
        ids = pa.array([f"{i}-{c}" for i in rows["id"].to_pylist()], pa.string())
        parts.append(rows.set_column(rows.schema.get_field_index("id"), "id", ids))
    return pa.concat_tables(parts)


def _link_copy(src: Path, dst: Path) -> None:
    for dirpath, _, names in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in names:
            os.link(Path(dirpath) / name, dst / rel / name)


def _change(base: Path, work: Path, rows: pa.Table, mode: str, chosen, first) -> float:
    """Seconds `lance_write.update` takes on a hard-linked copy of `base`: `rewrite` deletes
    (and appends again) the first row of each chosen fragment, `append` appends the chosen
    fragments' rows again under new ids."""
    import lance

    copy = work / mode
    _link_copy(base.parent, copy)
    path = lance_write.table_dir(copy, "t")
    delete = first.to_list() if mode == "rewrite" else []
    wanted = delete if mode == "rewrite" else chosen["id"].to_list()
    append = rows.filter(pa.compute.is_in(rows["id"], pa.array(wanted)))
    if mode == "append":
        fresh = pa.array([f"{i}-again" for i in append["id"].to_pylist()], pa.string())
        append = append.set_column(append.schema.get_field_index("id"), "id", fresh)
    started = time.perf_counter()
    lance_write.update(path, rows.schema, delete, append.to_batches())
    took = time.perf_counter() - started
    expected = rows.num_rows + (append.num_rows if mode == "append" else 0)
    assert lance.dataset(str(path)).count_rows() == expected
    shutil.rmtree(copy)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", required=True)
    parser.add_argument("--table", default="relationships")
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.05, 0.1, 0.25, 0.5, 0.75])
    parser.add_argument("--fragment-rows", type=int, default=lance_write.FRAGMENT_ROWS)
    args = parser.parse_args()
    lance_write.FRAGMENT_ROWS = args.fragment_rows
    rows = _rows(Path(args.index), args.table, args.copies)
    n = rows.num_rows
    work = Path(tempfile.mkdtemp(prefix="lance_carry_"))
    try:
        started = time.perf_counter()
        lance_write.write_whole(work / "base", "t", rows.to_batches(), rows.schema)
        whole = time.perf_counter() - started
        base = lance_write.table_dir(work / "base", "t")
        fragments = lance_write.fragments_of(base)
        names = sorted(set(fragments["fragment"].to_list()))
        print(f"{args.table} x{args.copies}: {n} rows, {len(names)} fragments; whole write")
        print(f"  {whole:.2f} s ({1e6 * whole / n:.1f} us a row)")
        for share in args.shares:
            hit = names[: max(1, round(share * len(names)))]
            chosen = fragments.filter(fragments["fragment"].is_in(hit))
            first = chosen.group_by("fragment").agg("id")["id"].list.first()
            for mode in ("rewrite", "append"):
                took = _change(base, work, rows, mode, chosen, first)
                touched = chosen.height
                print(
                    f"  {mode:7s} {len(hit)} fragments ({touched} rows, {touched / n:.0%}): "
                    f"{took:.2f} s = {took / whole:.2f} x whole; "
                    f"{1e6 * took / touched:.1f} us a touched row"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Asset checks: every table has its declared schema, unique keys and no dangling ids; every
LanceDB table holds one vector of the configured model's width per row of its table.

They are blocking: a table that fails its check stops everything downstream of it, the
publish step included, so a broken version is never published (the last one stays). A
duplicate id or a dangling reference would otherwise flow into the merge, the communities,
the reports and the vectors; a Lance table out of step with its table would make a search
return rows the tables lack (or miss rows), and a vector of the wrong width fails every query.

A run checks what it changed: a table whose files, and the files of every table its rules
read, are still the published version's (same inode, or same bytes) passed these checks when
that version was published, so its rules are not run again (metadata `rules`); its schema is
(footers only). An edit at 40k documents spent ~3 s re-reading unchanged tables. Likewise
a Lance table's null-vector scan reads only the fragments the run wrote (`null_vectors`).
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetsDefinition,
    multi_asset_check,
)

from pipeline import schemas
from pipeline.config import Settings
from pipeline.ingest.find_stale import recorded_tail, tail_settings_digest
from pipeline.storage import store, validate
from pipeline.storage.run_changes import base_version, same_table
from resources import DocgraphConfig, EmbedderResource
from resources.output import run_dir
from resources.side_lane import SIDE_TAG

# Every table the index writes is an asset with an integrity check.
CHECKED_TABLES = tuple(schemas.TABLES)
# Tables that must have rows whenever at least one document was loaded.
NON_EMPTY = (
    "sections",
    "content_nodes",
    "chunks",
    "entities",
    "relationships",
    "text_units",
    "communities",
    "community_reports",
)


def integrity_checks(op: str, tables: list[str], op_tags=None) -> AssetChecksDefinition:
    """The integrity checks of the tables step `op` makes, in one step (a step of its own
    per table cost Dagster ~35 ms of events and planning each, 28 of them 1.2 s of a
    MuSiQue run); each table is still a blocking check of its own, and runs alone when it
    is the one selected."""

    @multi_asset_check(
        name=f"{op}_integrity",
        op_tags=op_tags,
        specs=[
            AssetCheckSpec(
                "integrity",
                asset=name,
                description="schema, unique keys, no dangling ids",
                blocking=True,
            )
            for name in tables
        ],
        can_subset=True,
    )
    def _checks(context: AssetCheckExecutionContext, docgraph: DocgraphConfig):
        root = run_dir(docgraph, context)
        base = checked_base(root, docgraph.settings())
        # row counts from the Parquet footers: no table is read for them
        loaded = store.table_rows(root, "documents")
        selected = {key.asset_key.path[-1] for key in context.selected_asset_check_keys}
        names = [name for name in tables if name in selected]
        # side by side: reading and joining are polars' and pyarrow's, outside the GIL (the
        # graph's three tables at 40k documents: 0.74 s one after another, 0.50 s so)
        with ThreadPoolExecutor(max_workers=CHECK_THREADS) as pool:
            found = list(pool.map(lambda name: _table_problems(root, base, name), names))
        for name, (problems, kept) in zip(names, found, strict=True):
            warnings = []
            if name in NON_EMPTY and loaded and not store.table_rows(root, name):
                warnings.append("no rows although documents were loaded")
            yield AssetCheckResult(
                asset_key=name,
                check_name="integrity",
                passed=not (problems or warnings),
                # an empty table is suspicious, not broken: it warns and does not block publishing
                severity=AssetCheckSeverity.ERROR if problems else AssetCheckSeverity.WARN,
                metadata={
                    "problems": "\n".join(problems + warnings) or "none",
                    "rules": "unchanged since the published version" if kept else "checked",
                },
            )

    return _checks


# Tables checked at once in one step; what they read is held at once.
CHECK_THREADS = 3


def _table_problems(root: Path, base: Path | None, name: str) -> tuple[list[str], bool]:
    """What is wrong with table `name` of `root`, and whether its rules were skipped: what
    they read is the base's (`base`: a version that passed them), so they pass again."""
    problems = validate.schema_problems(root, name)
    kept = base is not None and all(same_table(root, base, t) for t in validate.tables_read(name))
    if not problems and not kept:
        problems = validate.integrity_problems(root, name)
    return problems, kept


def checked_base(folder: Path, settings: Settings) -> Path | None:
    """The published version the run in `folder` started from, when its tables passed the
    same checks (it was published by this docgraph with these tail settings: every version
    is published only after its blocking checks pass); None otherwise."""
    if store.resolve(folder) == store.resolve(settings.output_dir):
        return None  # not a staging folder
    base = base_version(settings.output_dir)
    if base is None or recorded_tail(base) != tail_settings_digest(settings):
        return None
    return base


def lance_table_problems(
    root: Path, name: str, dim: int, base: Path | None = None
) -> tuple[list[str], dict[str, int]]:
    """What is wrong with the Lance table `name` next to its Parquet table, and the counts
    it was judged on. Cheap: row counts from the Parquet footers and Lance's count_rows, the
    width from the Lance schema; no vector is read but for the null scan (`null_vectors`;
    `base`: a checked version, see there)."""
    ds = store.lance_dataset(root, name)
    if ds is None:
        return [f"lance table {name} does not exist"], {}
    field = ds.schema.field("vector")
    width = getattr(field.type, "list_size", -1)  # -1: not a fixed-size list
    counts = {
        "lance_rows": ds.count_rows(),
        "parquet_rows": store.table_rows(root, name),
        "vector_width": width,
        "model_dim": dim,
        "null_vectors": null_vectors(ds, base and store.lance_dataset(base, name)),
    }
    problems = []
    if counts["lance_rows"] != counts["parquet_rows"]:
        problems.append(f"{counts['lance_rows']} vectors for {counts['parquet_rows']} rows")
    if width != dim:
        problems.append(f"vectors of width {width}, the embedding model's are {dim}")
    if counts["null_vectors"]:
        problems.append(f"{counts['null_vectors']} rows without a vector")
    return problems, counts


def null_vectors(ds, checked=None) -> int:
    """The rows of Lance dataset `ds` without a vector. With `checked`, the table as a
    version that passed this check has it, only the fragments whose data files it lacks are
    scanned: a kept fragment had none then, and deletions add none (the null scan of the
    490k relationships at 40k documents took 0.7 s, that of a run's new fragments ~0.01)."""
    if checked is None:
        return ds.count_rows("vector IS NULL")
    kept = {d.path for f in checked.get_fragments() for d in f.data_files()}
    fresh = [f for f in ds.get_fragments() if any(d.path not in kept for d in f.data_files())]
    return sum(f.count_rows("vector IS NULL") for f in fresh)


def lance_checks(op: str, names: list[str], op_tags=None) -> AssetChecksDefinition:
    """The `vectors` checks of the Lance tables step `op` writes (`<name>_vectors` assets),
    in one step, as `integrity_checks`."""

    @multi_asset_check(
        name=f"{op}_integrity",
        op_tags=op_tags,
        specs=[
            AssetCheckSpec(
                "vectors",
                asset=f"{name}_vectors",
                description=f"one vector of the model's width per row of {name}, none null",
                blocking=True,
            )
            for name in names
        ],
        can_subset=True,
    )
    def _checks(
        context: AssetCheckExecutionContext, docgraph: DocgraphConfig, embedder: EmbedderResource
    ):
        root, dim = run_dir(docgraph, context), embedder.get().dim
        base = checked_base(root, docgraph.settings())
        selected = {key.asset_key.path[-1] for key in context.selected_asset_check_keys}
        for name in (name for name in names if f"{name}_vectors" in selected):
            problems, counts = lance_table_problems(root, name, dim, base)
            yield AssetCheckResult(
                asset_key=f"{name}_vectors",
                check_name="vectors",
                passed=not problems,
                severity=AssetCheckSeverity.ERROR,
                metadata={"problems": "\n".join(problems) or "none", **counts},
            )

    return _checks


def index_checks(assets: list[AssetsDefinition]) -> list[AssetChecksDefinition]:
    """Every index check, a step per asset step: the tables' integrity, then the Lance tables
    against them. A side step's checks are side steps too (resources.side_lane): what waits
    for its tables waits for them, and they read only what it read and wrote."""
    checks = []
    for asset in assets:
        names = [key.path[-1] for key in asset.keys]
        op = asset.node_def.name
        tags = {SIDE_TAG: "true"} if asset.node_def.tags.get(SIDE_TAG) == "true" else None
        if tables := [name for name in names if name in CHECKED_TABLES]:
            checks.append(integrity_checks(op, tables, tags))
        lance = [name for name in schemas.VECTOR_TABLES if f"{name}_vectors" in names]
        if lance:
            checks.append(lance_checks(op, lance, tags))
    return checks

"""Asset checks: every table has its declared schema, unique keys and no dangling ids.

They are blocking: a table that fails its check stops everything downstream of it, the
publish step included, so a broken version is never published (the last one stays).
"""

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    asset_check,
)

from pipeline import schemas, validate
from pipeline.store import read_table
from resources import DocgraphConfig
from resources.output import run_dir

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


def _integrity_check(name: str) -> AssetChecksDefinition:
    @asset_check(
        asset=name,
        name="integrity",
        description="schema, unique keys, no dangling ids",
        blocking=True,
    )
    def _check(context: AssetCheckExecutionContext, docgraph: DocgraphConfig) -> AssetCheckResult:
        root = run_dir(docgraph, context)
        problems = validate.schema_problems(root, name)
        if not problems:
            problems = validate.integrity_problems(root, name)
        warnings = []
        loaded = read_table(root, "documents").height
        if name in NON_EMPTY and loaded and read_table(root, name).is_empty():
            warnings.append("no rows although documents were loaded")
        return AssetCheckResult(
            passed=not (problems or warnings),
            # an empty table is suspicious, not broken: it warns and does not block publishing
            severity=AssetCheckSeverity.ERROR if problems else AssetCheckSeverity.WARN,
            metadata={"problems": "\n".join(problems + warnings) or "none"},
        )

    return _check


integrity_checks = [_integrity_check(name) for name in CHECKED_TABLES]

"""Asset checks: every table has its declared schema, unique keys and no dangling ids."""

from dagster import AssetCheckResult, AssetChecksDefinition, asset_check

from pipeline import schemas, validate
from pipeline.store import read_table
from resources import DocgraphConfig

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
    @asset_check(asset=name, name="integrity", description="schema, unique keys, no dangling ids")
    def _check(docgraph: DocgraphConfig) -> AssetCheckResult:
        root = docgraph.settings().output_dir
        problems = validate.schema_problems(root, name)
        if not problems:
            problems = validate.integrity_problems(root, name)
        loaded = read_table(root, "documents").height
        if name in NON_EMPTY and loaded and read_table(root, name).is_empty():
            problems.append("no rows although documents were loaded")
        return AssetCheckResult(
            passed=not problems,
            metadata={"problems": "\n".join(problems) or "none"},
        )

    return _check


integrity_checks = [_integrity_check(name) for name in CHECKED_TABLES]

"""GraphRAG 3.x's output-table contract (graphrag_schema.json) and its check.

Standard library and pyarrow only: benchmarks/graphrag_compat.py runs in GraphRAG's own
venv (its pyarrow/lancedb/openai pins differ from ours) and imports this module there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

CONTRACT_PATH = Path(__file__).with_name("graphrag_schema.json")
MANIFEST = "index.json"  # pipeline.storage.store.MANIFEST
VERSIONS_DIR = "versions"  # pipeline.storage.store.VERSIONS_DIR
LANCE_DIR = "lancedb"  # pipeline.storage.store.LANCE_DIR


def load_contract() -> dict[str, Any]:
    """The contract: graphrag_version, sources, tables -> columns, vector_tables."""
    return json.loads(CONTRACT_PATH.read_text(encoding="utf-8"))


def current_folder(root: str | Path) -> Path:
    """The folder holding an output folder's current tables: the version its manifest
    names, or `root` itself (a version folder, or the flat layout). pipeline.storage.store.resolve
    without polars or object storage, for GraphRAG's venv."""
    root = Path(root)
    manifest = root / MANIFEST
    if not manifest.is_file():
        return root
    return root / VERSIONS_DIR / json.loads(manifest.read_text(encoding="utf-8"))["version"]


def type_ok(kind: str, typ: pa.DataType) -> bool:
    """Whether an Arrow type satisfies a contract type name (see the contract's `types`)."""
    t = pa.types
    if kind == "str":
        return t.is_string(typ) or t.is_large_string(typ)
    if kind == "int":
        return t.is_integer(typ)
    if kind == "float":
        return t.is_floating(typ) or t.is_integer(typ)
    if kind == "object":
        return t.is_string(typ) or t.is_struct(typ) or t.is_map(typ) or t.is_null(typ)
    if kind == "vector":
        return t.is_fixed_size_list(typ) and t.is_floating(typ.value_type)
    if kind.startswith("list[") and (t.is_list(typ) or t.is_large_list(typ)):
        return (
            type_ok(kind[5:-1], typ.value_type)
            if kind != "list[struct]"
            else (t.is_struct(typ.value_type))
        )
    if kind == "struct":
        return t.is_struct(typ)
    return False


def schema_problems(name: str, schema: pa.Schema, spec: dict[str, Any]) -> list[str]:
    """Contract columns of table `name` that `schema` lacks or types incompatibly."""
    problems = []
    for col, want in spec["columns"].items():
        if col not in schema.names:
            problems.append(f"{name}.{col}: missing")
        elif not type_ok(want["type"], schema.field(col).type):
            problems.append(f"{name}.{col}: {schema.field(col).type} is not {want['type']}")
    return problems


def table_files(folder: Path, name: str) -> list[Path]:
    """The Parquet files of table `name`: `name.parquet`, or a shard folder `name/*.parquet`."""
    single = folder / f"{name}.parquet"
    return [single] if single.is_file() else sorted((folder / name).glob("*.parquet"))


def read_table(folder: Path, name: str) -> pa.Table | None:
    """Table `name` of a version folder as one Arrow table; None when it does not exist."""
    files = table_files(folder, name)
    if not files:
        return None
    return pa.concat_tables([pq.read_table(f) for f in files])


def check_tables(root: str | Path) -> list[str]:
    """Every contract problem of the Parquet tables under `root` (an output folder): missing
    tables and columns, incompatible types, empty values where GraphRAG needs one."""
    folder = current_folder(root)
    problems = []
    for name, spec in load_contract()["tables"].items():
        files = table_files(folder, name)
        if not files:
            if not spec.get("optional"):
                problems.append(f"{name}: no table")
            continue
        schema = pq.read_schema(files[0])
        problems += schema_problems(name, schema, spec)
        nonempty = [c for c, w in spec["columns"].items() if w.get("nonempty")]
        for col in (c for c in nonempty if c in schema.names):
            values = pa.concat_arrays(
                [pq.read_table(f, columns=[col])[col].combine_chunks() for f in files]
            ).to_pylist()
            if any(v in (None, "") for v in values):
                problems.append(f"{name}.{col}: empty values")
    return problems

"""GraphRAG 3.3.0's own readers and search context builders over a docgraph index.

GraphRAG pins pyarrow 25, lancedb 0.38 and openai 2 (ours: pyarrow 26, lancedb 0.40, openai
3), so it cannot share docgraph's venv: this script runs in a venv of its own (the `compat`
extra names the version), and asks docgraph's venv for the question's vector only.

    python3.11 -m venv /tmp/grvenv && /tmp/grvenv/bin/pip install graphrag==3.3.0
    /tmp/grvenv/bin/python benchmarks/graphrag_compat.py --output data/output \
        [--question "..."] [--docgraph-python .venv/bin/python]

What runs is GraphRAG's code, as its query API (graphrag/api/query.py) runs it: its
DataReader over a Parquet table provider reads and types the tables, read_indexer_* turns
them into its data model, its LanceDB vector store opens our Lance tables under its names
(entity_description, community_full_content, text_unit_text), and LocalSearchMixedContext,
GlobalCommunityContext and BasicSearchContext build their contexts for the question. No LLM
is called: context building needs only an embedder, which returns docgraph's own query
vector (same model as the index). Tokens are counted by GraphRAG's default tokenizer
(tiktoken o200k_base, read from the copy bundled in litellm: nothing is downloaded).
Prints a table per step (rows read, records / tokens built, OK or the error).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.compat.contract import current_folder, load_contract, read_table  # noqa: E402

QUESTION = "Which physicists worked with Einstein, and on what?"
TABLES = ["entities", "relationships", "communities", "community_reports", "text_units"]


def embed_query(output: str, question: str) -> None:
    """Docgraph's venv: print the question's vector (GraphIndex's query embedder) as JSON."""
    from pipeline.query import GraphIndex

    vec = GraphIndex.open(output).embed_query(question)
    print(json.dumps([float(x) for x in vec]))


def query_vector(python: str, output: str, question: str) -> list[float]:
    """The question's vector, from docgraph's venv (a subprocess: the venvs' pins differ)."""
    cmd = [python, str(Path(__file__).resolve()), "--embed-query", question, "--output", output]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"embedding the question failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class FixedEmbedder:
    """GraphRAG's LLMEmbedding as its context builders use it
    (`embedding(input=[text]).first_embedding`), answering with a precomputed vector."""

    def __init__(self, vector: list[float]) -> None:
        self.vector = vector

    def embedding(self, input: list[str], **_: Any) -> Any:  # noqa: A002 - GraphRAG's name
        return type("Response", (), {"first_embedding": self.vector})()


def offline_env() -> None:
    """Nothing downloaded: tiktoken reads the encodings litellm ships (o200k_base among
    them; GraphRAG's default tokenizer would download it), litellm its bundled cost map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        bundled = Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils/tokenizers"
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))


def step(rows: list[list[str]], name: str, fn: Callable[[], tuple[str, str]]) -> Any:
    """Run one step; a row (name, what it built, seconds, OK or the error)."""
    started = time.perf_counter()
    try:
        built, detail = fn()
        status = "OK"
    except Exception as e:  # noqa: BLE001 - the report lists every failing step
        built, detail, status = "-", "", f"ERROR {type(e).__name__}: {e}"
        traceback.print_exc(file=sys.stderr)
    rows.append([name, built, detail, f"{time.perf_counter() - started:.3f}", status])


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for r in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def run(output: str, question: str, python: str, level: int) -> int:
    """GraphRAG's reading and context building over `output`; exit status 1 on any error."""
    offline_env()
    from graphrag.data_model.data_reader import DataReader
    from graphrag.data_model.dfs import documents_typed
    from graphrag.query.context_builder.entity_extraction import EntityVectorStoreKey
    from graphrag.query.indexer_adapters import (
        read_indexer_communities,
        read_indexer_entities,
        read_indexer_relationships,
        read_indexer_report_embeddings,
        read_indexer_reports,
        read_indexer_text_units,
    )
    from graphrag.query.structured_search.basic_search.basic_context import BasicSearchContext
    from graphrag.query.structured_search.global_search.community_context import (
        GlobalCommunityContext,
    )
    from graphrag.query.structured_search.local_search.mixed_context import (
        LocalSearchMixedContext,
    )
    from graphrag.tokenizer.get_tokenizer import get_tokenizer
    from graphrag_storage.file_storage import FileStorage
    from graphrag_storage.tables.parquet_table_provider import ParquetTableProvider
    from graphrag_vectors import IndexSchema, VectorStoreConfig, create_vector_store

    folder = current_folder(output)
    contract = load_contract()
    version = importlib.metadata.version("graphrag")
    print(f"graphrag {version} (contract: {contract['graphrag_version']}); tables: {folder}")
    reader = DataReader(ParquetTableProvider(FileStorage(base_dir=str(folder))))
    frames: dict[str, Any] = {}
    read_rows: list[list[str]] = []

    def read(name: str) -> Callable[[], tuple[str, str]]:
        def go() -> tuple[str, str]:
            frames[name] = asyncio.run(getattr(reader, name)())
            missing = [c for c in contract["tables"][name]["columns"] if c not in frames[name]]
            return f"{len(frames[name])} rows", f"contract columns missing: {missing or 'none'}"

        return go

    for name in TABLES:
        step(read_rows, f"DataReader.{name}", read(name))

    def documents() -> tuple[str, str]:
        # sharded (documents/<shard>.parquet): GraphRAG's provider reads one file per table
        df = documents_typed(read_table(folder, "documents").to_pandas())
        units = sum(len(u) for u in df["text_unit_ids"])
        return f"{len(df)} rows", f"{units} text_unit_ids"

    step(read_rows, "documents_typed (shards)", documents)
    model: dict[str, Any] = {}

    def adapt(key: str, fn: Callable[[], list]) -> Callable[[], tuple[str, str]]:
        def go() -> tuple[str, str]:
            model[key] = fn()
            return f"{len(model[key])} objects", ""

        return go

    f = frames
    step(read_rows, "read_indexer_entities", adapt("entities", lambda: read_indexer_entities(
        f["entities"], f["communities"], level)))  # fmt: skip
    step(read_rows, "read_indexer_relationships", adapt("relationships", lambda: (
        read_indexer_relationships(f["relationships"]))))  # fmt: skip
    step(read_rows, "read_indexer_reports", adapt("reports", lambda: read_indexer_reports(
        f["community_reports"], f["communities"], level)))  # fmt: skip
    step(read_rows, "read_indexer_communities", adapt("communities", lambda: (
        read_indexer_communities(f["communities"], f["community_reports"]))))  # fmt: skip
    step(read_rows, "read_indexer_text_units", adapt("text_units", lambda: (
        read_indexer_text_units(f["text_units"]))))  # fmt: skip
    print_table("GraphRAG readers", ["step", "read", "detail", "s", "status"], read_rows)

    vector = query_vector(python, output, question)
    embedder = FixedEmbedder(vector)
    stores: dict[str, Any] = {}
    lance_rows: list[list[str]] = []

    def open_store(index: str) -> Callable[[], tuple[str, str]]:
        def go() -> tuple[str, str]:
            config = VectorStoreConfig(type="lancedb", db_uri=str(folder / "lancedb"))
            store = create_vector_store(
                config, IndexSchema(index_name=index, vector_size=len(vector))
            )
            store.connect()
            stores[index] = store
            hits = store.similarity_search_by_vector(vector, k=3)
            return f"{store.count()} rows", f"top ids {[h.document.id[:8] for h in hits]}"

        return go

    for index in contract["vector_tables"]:
        step(lance_rows, f"LanceDBVectorStore {index}", open_store(index))

    def report_vectors() -> tuple[str, str]:
        read_indexer_report_embeddings(model["reports"], stores["community_full_content"])
        found = sum(r.full_content_embedding is not None for r in model["reports"])
        return f"{found}/{len(model['reports'])} reports", "search_by_id(report id)"

    step(lance_rows, "read_indexer_report_embeddings", report_vectors)
    print_table(
        "GraphRAG vector store (our Lance tables under its names)",
        ["step", "read", "detail", "s", "status"],
        lance_rows,
    )

    tokenizer = get_tokenizer()
    ctx_rows: list[list[str]] = []

    def built(result: Any) -> tuple[str, str]:
        chunks = result.context_chunks
        batches = [chunks] if isinstance(chunks, str) else list(chunks)
        tokens = sum(tokenizer.num_tokens(b) for b in batches)
        records = {k: len(v) for k, v in result.context_records.items() if hasattr(v, "__len__")}
        where = f" in {len(batches)} batches" if len(batches) > 1 else ""
        return f"{tokens} tokens{where}", f"records {records}"

    def local() -> tuple[str, str]:
        builder = LocalSearchMixedContext(
            community_reports=model["reports"],
            text_units=model["text_units"],
            entities=model["entities"],
            relationships=model["relationships"],
            covariates={"claims": []},
            entity_text_embeddings=stores["entity_description"],
            embedding_vectorstore_key=EntityVectorStoreKey.ID,
            text_embedder=embedder,
            tokenizer=tokenizer,
        )
        return built(builder.build_context(
            query=question, text_unit_prop=0.5, community_prop=0.25, top_k_mapped_entities=10,
            top_k_relationships=10, include_entity_rank=True, include_relationship_weight=True,
            include_community_rank=False, return_candidate_context=False,
            embedding_vectorstore_key=EntityVectorStoreKey.ID, max_context_tokens=12_000,
        ))  # fmt: skip

    def global_() -> tuple[str, str]:
        builder = GlobalCommunityContext(
            community_reports=model["reports"],
            communities=model["communities"],
            entities=model["entities"],
            tokenizer=tokenizer,
        )
        return built(asyncio.run(builder.build_context(
            query=question, use_community_summary=False, shuffle_data=True,
            include_community_rank=True, min_community_rank=0, community_rank_name="rank",
            include_community_weight=True, community_weight_name="occurrence weight",
            normalize_community_weight=True, max_context_tokens=12_000,
        )))  # fmt: skip

    def basic() -> tuple[str, str]:
        builder = BasicSearchContext(
            text_embedder=embedder,
            text_unit_embeddings=stores["text_unit_text"],
            text_units=model["text_units"],
            tokenizer=tokenizer,
        )
        return built(builder.build_context(query=question, k=10, max_context_tokens=12_000))

    step(ctx_rows, "LocalSearchMixedContext", local)
    step(ctx_rows, "GlobalCommunityContext", global_)
    step(ctx_rows, "BasicSearchContext", basic)
    print_table(
        f"GraphRAG context builders, question: {question!r}",
        ["builder", "context", "records", "s", "status"],
        ctx_rows,
    )
    failed = [r for r in read_rows + lance_rows + ctx_rows if r[-1] != "OK"]
    print(f"\n{len(failed)} step(s) failed" if failed else "\nall steps OK")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="a docgraph output folder")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument(
        "--docgraph-python",
        default=str(ROOT / ".venv" / "bin" / "python"),
        help="docgraph's venv Python (embeds the question)",
    )
    parser.add_argument("--community-level", type=int, default=2)
    parser.add_argument("--embed-query", help=argparse.SUPPRESS)  # docgraph's side
    args = parser.parse_args()
    if args.embed_query is not None:
        embed_query(args.output, args.embed_query)
        return 0
    return run(args.output, args.question, args.docgraph_python, args.community_level)


if __name__ == "__main__":
    sys.exit(main())

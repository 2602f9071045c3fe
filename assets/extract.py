"""Entity and relation extraction, shard by shard: each shard's chunks to raw mentions and
relations (pipeline.extract; the LLM extractor in LLM mode), failures kept as rows."""

from collections.abc import Iterator

import polars as pl
from dagster import AssetExecutionContext, multi_asset

from assets.metadata import counts_table, llm_delta
from assets.shards import SHARD_POLICY, run_shards, shard_carry, shard_partitions, specs
from pipeline.extract import extract_carried, get_extractor, kept_units, lexicon_preload
from pipeline.storage import shard_files, store
from resources import DocgraphConfig, LlmResource
from resources.llm import llm_mode
from resources.output import run_dir

# text units extracted and written at a time: a shard's mentions (~25 rows a unit) are never
# all in memory, whatever the size of its documents; 8 of extract_resilient's batches
PART_UNITS = 4096
EXTRACTION_TABLES = {
    "extracted_entities": "Raw entity mentions per text unit.",
    "extracted_relationships": "Raw relations per text unit.",
    "extraction_failures": "Text units whose extraction failed, and why.",
}


def extraction_asset(n_shards: int):
    @multi_asset(
        name="extracted_graph",
        specs=specs("semantic", EXTRACTION_TABLES, ["chunks"]),
        partitions_def=shard_partitions(n_shards),
        backfill_policy=SHARD_POLICY,
    )
    def extracted_graph(context: AssetExecutionContext, docgraph: DocgraphConfig, llm: LlmResource):
        settings = docgraph.settings()
        folder = run_dir(docgraph, context)
        client = llm.get() if llm_mode(settings) else None
        if client is not None:
            extraction = settings.extraction.model_copy(update={"extractor": "llm"})
            extractor = get_extractor(extraction, llm=client)
        else:
            extractor = get_extractor(settings.extraction)
        before = client.metadata() if client is not None else {}
        by_type: dict[str, int] = {}
        reasons: dict[str, str] = {}

        cache = client.cache if client is not None else None
        carry = shard_carry(context, settings)  # unchanged units: the base's rows

        def extract(key: str) -> Iterator[dict[str, pl.DataFrame]]:
            first = len(cache.used) if cache is not None else 0
            mentions = relations = 0
            kept = kept_units(carry, key)
            for units in shard_files.read_shard_parts(folder, "chunks", key, PART_UNITS):
                ents, rels, failures = extract_carried(extractor, units, carry, key, kept)
                mentions, relations = mentions + ents.height, relations + rels.height
                for row in failures.iter_rows(named=True):
                    context.log.warning(
                        f"extraction failed for unit {row['text_unit_id']}: {row['reason']}"
                    )
                    reasons[row["text_unit_id"]] = row["reason"]
                for kind, count in ents.group_by("type").len().iter_rows():
                    by_type[kind] = by_type.get(kind, 0) + count
                yield {
                    "extracted_entities": ents,
                    "extracted_relationships": rels,
                    "extraction_failures": failures,
                }
            if cache is not None:  # kept by the cache sweep while this shard's rows are
                store.record_cache_keys(folder, key, cache.used[first:])
            context.log.info(f"shard {key}: {mentions} mentions, {relations} relations")

        def metadata() -> dict:
            llm_meta = llm_delta(before, client.metadata()) if client is not None else {}
            return {
                "extractor": extractor.name,
                "by_type": counts_table(
                    dict(sorted(by_type.items(), key=lambda kv: -kv[1])), ("type", "mentions")
                ),
                "failures": counts_table(dict(list(reasons.items())[:100]), ("unit", "reason")),
                **llm_meta,
            }

        yield from run_shards(
            context, folder, EXTRACTION_TABLES, extract, metadata, carry, "text_units"
        )
        lexicon_preload.release()  # the corpus-wide steps after it hold the largest frames

    return extracted_graph

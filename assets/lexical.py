"""The BM25 index over the text units (pipeline.lexical): the lexical half of every query
mode's first stage, built once per run from the text_units and documents tables."""

import time

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets.shards import tail_changes
from pipeline.lexical.bm25 import index_dir
from pipeline.lexical.bm25_carry import lexical_run
from pipeline.storage import store
from resources import DocgraphConfig, output_root_metadata
from resources.output import run_dir
from resources.side_lane import SIDE_TAG


@asset(
    deps=["text_units", "documents"],
    group_name="lexical",
    description="BM25 index (bm25s) over the text units, each after its document's title; "
    "Cyrillic words stemmed as Russian, Latin ones in the corpus' language.",
    kinds={"bm25s"},
    # only published_index waits for it: on the side lane, after the vector tables
    op_tags={SIDE_TAG: "true", "dagster/priority": "-1"},
)
def lexical_index(context: AssetExecutionContext, docgraph: DocgraphConfig) -> MaterializeResult:
    started = time.perf_counter()
    folder = run_dir(docgraph, context)
    settings = docgraph.settings()
    # units of unchanged documents keep their analysed terms from the base version's index;
    # every score is written again (pipeline.lexical.bm25_carry)
    changes = tail_changes(context, settings, folder)
    index, carried = lexical_run(folder, changes)
    index.save(index_dir(store.resolve(folder), "text_units"))
    docs = store.read_table(folder, "documents", ["language"])
    languages = docs.group_by("language").len().sort("len", descending=True)
    lang = index.corpus_language
    reads = settings.embedding.reads(lang)
    weight = settings.query.lexical_weight
    return MaterializeResult(
        metadata={
            "rows": len(index.ids),
            "vocabulary": index.vocabulary,
            "document_languages": MetadataValue.json(
                {str(k): int(v) for k, v in languages.iter_rows()}
            ),
            "unit_languages": MetadataValue.json(index.languages),
            "corpus_language": lang,
            "latin_stemmer": index.latin,
            "embedding_reads_corpus": reads,
            "unit_ranking": f"cosine {1 - weight:g} + BM25 {weight:g}"
            if reads
            else f"BM25 ({settings.embedding.model} reads no {lang!r}: "
            "set embedding.model / embedding.languages for a model that does)",
            **carried,
            "elapsed_s": round(time.perf_counter() - started, 3),
            **output_root_metadata(docgraph),
        }
    )

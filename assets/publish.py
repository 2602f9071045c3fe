"""The last step of a run: publish the version it wrote, in one atomic step.

Readers (GraphIndex, `docgraph query`, notebooks) follow `<output>/index.json`; until this
step replaces it they read the previous version whole, and a run that fails anywhere
before it (a check included: the checks are blocking) publishes nothing. An object-store
output is published in its local mirror, then uploaded with index.json last
(pipeline.storage.remote.push).
"""

import time

from dagster import AssetExecutionContext, Failure, MaterializeResult, MetadataValue, asset

from pipeline.ingest.find_stale import record_tail
from pipeline.storage import lock, mirror, remote, store, validate
from pipeline.storage.object_store import RemoteError
from pipeline.vectors.embed_cache import compact_cache, embedding_cache_dir, sweep_unused
from resources import DocgraphConfig, output_root_metadata
from resources.output import run_dir


def published_index_asset(upstream: list):
    """The publish asset, after every asset in `upstream`."""

    @asset(
        name="published_index",
        deps=upstream,
        group_name="publish",
        description="Makes this run's tables and vectors the index readers see (index.json), "
        "after checking the vector tables against the tables; keeps the newest "
        "`storage.keep_versions` versions.",
    )
    def published_index(
        context: AssetExecutionContext, docgraph: DocgraphConfig
    ) -> MaterializeResult:
        started = time.perf_counter()
        settings = docgraph.settings()
        problems = validate.lance_problems(run_dir(docgraph, context))
        if problems:
            raise Failure(
                description="not published (the last version stays current): "
                + "; ".join(problems),
                metadata={"problems": MetadataValue.md("\n".join(f"- {p}" for p in problems))},
            )
        record_tail(run_dir(docgraph, context), settings)  # an unchanged folder is then up to date
        before = set(store.versions(settings.output_dir))
        url = mirror.url_of(settings.output_dir)  # an object store's local mirror
        carried = remote.carried_over(settings.output_dir) if url is not None else set()
        manifest = store.publish(
            settings.output_dir, context.run.run_id, keep=settings.storage.keep_versions
        )
        # the LLM cache entries no kept version used (deleted documents' answers) can go: the
        # tail refreshed the ones it used, each shard recorded the ones its rows came from;
        # so can the vectors of text no kept version holds (every run looks up all it holds)
        swept = store.sweep_cache(settings.output_dir)
        vectors = embedding_cache_dir(settings.output_dir)  # no step embeds now
        unused = sweep_unused(vectors, store.kept_since(settings.output_dir))
        merged = compact_cache(vectors)
        pushed: dict = {}
        if url is not None:  # upload the version, the caches, index.json last
            try:
                pushed = remote.push(settings.output_dir, manifest, carried)
            except RemoteError as exc:
                raise Failure(
                    description=f"not published to {url} (its last version stays current "
                    f"there; the next run starts over from it): {exc}"
                ) from None
        lock.release(settings.output_dir)
        pruned = sorted(before - set(store.versions(settings.output_dir)))
        return MaterializeResult(
            metadata={
                "version": manifest["version"],
                "previous": manifest["previous"] or "none",
                "versions_deleted": ", ".join(pruned) or "none",
                "llm_cache_entries_swept": swept,
                "embedding_cache_vectors_swept": unused,
                "embedding_cache_files_merged": merged,
                "tables": MetadataValue.json(manifest["tables"]),
                **({"store": url, **pushed} if url is not None else {}),
                "elapsed_s": round(time.perf_counter() - started, 3),
                **output_root_metadata(docgraph),
            }
        )

    return published_index

"""Settings of the output folder: versions kept, the writer lock, shards, process-per-step
runs, and the local mirror of an object-store output.
"""

from __future__ import annotations

from pydantic import Field

from pipeline.config.section import Section


class StorageSettings(Section):
    keep_versions: int = Field(
        2,
        ge=1,
        description="published index versions kept in <output>/versions (the current one and "
        "the newest before it); older ones, and the text of deleted documents in them, are "
        "deleted after each publish",
    )
    lock_wait_s: float = Field(
        0.0,
        ge=0,
        description="a run that finds another run writing the same output folder waits this "
        "long for it, then stops with an error naming that run",
    )
    shards: int = Field(
        16,
        ge=1,
        le=4096,
        description="document shards (the Dagster partitions of the per-document stages): a "
        "document's shard is a hash of its relative path, so a change re-runs only its shard; "
        "changing the count re-indexes every shard once",
    )
    multiprocess_from_documents: int = Field(
        20_000,
        ge=0,
        description="`docgraph index` over this many input files or more runs each step in a "
        "process of its own, one at a time (Dagster's multiprocess executor), unless "
        "$DOCGRAPH_EXECUTOR says otherwise: a process then holds one step's memory, not what "
        "every step before it left (40k documents: 1.39 GB instead of 1.54 GB), for a few "
        "seconds a step; 0: never",
    )
    multiprocess_from_file_mb: int = Field(
        32,
        ge=0,
        description="likewise when one input file has this many MB or more: a file is one "
        "shard, so its steps' memory grows with it (in one process the largest step peaked "
        "at 0.99 GB for a 10 MB text and 1.56 GB for 40 MB, ~1.5 GB from ~37 MB); 0: never",
    )
    mirror_dir: str | None = Field(
        None,
        description="an object-store output_dir (s3://bucket/prefix) is worked in a local "
        "mirror folder under this one (default $XDG_CACHE_HOME/docgraph/mirrors): runs "
        "pull the current version into it and publish it back (pipeline.storage.remote)",
    )

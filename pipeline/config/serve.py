"""Settings of `docgraph serve`: the bounds every request meets.

Why: without them one request (a 10 MB question) takes seconds of CPU and is echoed back
whole, and a few at once take every core from the others. Each bound says why its default
is what it is; app/serve/limits.py applies them.
"""

from __future__ import annotations

from pydantic import Field

from pipeline.config.section import Section


class ServeSettings(Section):
    max_body_bytes: int = Field(
        1 << 20,
        ge=1,
        description="a request body over this many bytes is 413: by its Content-Length "
        "before any of it is read, or as soon as a chunked body passes it. 1 MiB (nginx's "
        "client_max_body_size default) is ~10x the largest body the bounds below accept",
    )
    max_query_chars: int = Field(
        2000,
        ge=1,
        description="`query` (a question, or focus's uri) and focus's `question` longer than "
        "this are 422. The default query embedder reads 256 word pieces (~1,000 "
        "characters); 2,000 leaves room for a long question (a naive query of 2,000 "
        "characters: ~0.1 s on the sample index, of 10 MB: 5-10 s)",
    )
    max_name_chars: int = Field(
        200,
        ge=1,
        description="each `publication` id and `edge_types` name longer than this is 422 "
        "(ids are hashes or short slugs, edge types upper-case words)",
    )
    max_list_items: int = Field(
        100,
        ge=1,
        description="`publication` and `edge_types` with more names than this are 422 "
        "(an index has a handful of edge types; 100 publications is a broad filter)",
    )
    max_concurrent_queries: int = Field(
        0,
        ge=0,
        description="searches run at once; 0 = one a usable CPU (pipeline/cpu.py): a search "
        "is CPU-bound, so more at once only makes each slower",
    )
    max_queued_queries: int = Field(
        64,
        ge=0,
        description="queries waiting for a search slot at most; the next one is 503 with "
        "Retry-After at once (64 x ~50 ms warm queries is ~3 s of work on one slot)",
    )
    queue_wait_s: float = Field(
        10.0,
        ge=0,
        description="a query waits this long for a search slot, then it is 503 with "
        "Retry-After; under a client's usual 30-60 s timeout, so it hears why",
    )

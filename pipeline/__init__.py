"""docgraph domain library: pure functions and classes, no Dagster import."""

import os

# polars allocates through its own jemalloc, configured by polars to keep freed pages for
# 0.5-1 s and to return them only on its later allocations: a corpus-wide stage's
# intermediates (the merge's group-bys) stayed resident through the next stages, 600 MB at
# 10k documents. Return them at once (the merge ~8% slower). polars appends this variable to
# its own settings when it loads, so it is set before any module of this package imports
# polars; a value the user set is kept.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

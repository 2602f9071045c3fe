"""Keep an index process's memory near what its current stage holds.

The index runs its stages one after another in one process. What a stage frees stays in
the allocators' pools unless they are told to return it, so without this the process's RSS
only grows, stage by stage, to the sum of their peaks instead of the largest one:

- glibc's arenas (Python objects, numpy, Arrow, Lance): `release()` trims them after a
  stage, and `configure()` caps them at two (a pool per thread fragments: 170 MB more after
  a 10k-document tail with the default 8 per core);
- polars' own jemalloc, which polars configures to keep freed pages 0.5-1 s and to return
  them only on its later allocations: a merge's group-bys stayed resident through the next
  stages (600 MB at 10k documents). `configure()` gives it a background thread that returns
  them JEMALLOC_DECAY_MS after they were freed, allocations or not. Returning them at once
  (the setting before) made every polars operation fault its pages in anew: a one-file edit
  at 40k documents took 3.2M page faults and 11 s of its 30 s of CPU in the kernel. polars
  appends this variable to its settings when it loads, so `configure` must run first
  (pipeline/__init__.py calls it).
- Arrow's pool (Parquet and Lance I/O): `release()`.

Settings the user made (`MALLOC_ARENA_MAX`, `_RJEM_MALLOC_CONF`) are kept.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
from collections.abc import Iterator

_M_ARENA_MAX = -8  # glibc mallopt parameter
# How long polars' jemalloc keeps a freed page for its next allocation. A one-file edit at
# 40k documents (the 2-core machine; wall s, page faults, peak RSS): at once (0 ms) 20.7-21.6
# s, 3.2M, 1.75-1.77 GB; 100 ms 18.0 s, 1.9M, 1.83 GB; 250 ms 16.4-17.1 s, 1.6M, 1.79-1.84
# GB; 1 s 16.6 s, 1.3M, 1.88 GB (docs/scale.md, issue 49, session 32).
JEMALLOC_DECAY_MS = 250


def configure() -> None:
    """Allocator settings for the whole process; before polars loads, once."""
    decay = f"dirty_decay_ms:{JEMALLOC_DECAY_MS},muzzy_decay_ms:0"
    os.environ.setdefault("_RJEM_MALLOC_CONF", f"background_thread:true,{decay}")
    if "MALLOC_ARENA_MAX" not in os.environ:
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to cap
            ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, 2)


def release() -> None:
    """Return freed heap to the OS (a few milliseconds)."""
    with contextlib.suppress(Exception):  # optional: a pool without the call, not glibc
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def collect() -> None:
    """Free what only reference cycles keep (frames held by a finished step's context),
    then `release()`: between the stages of a run."""
    gc.collect()
    release()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """Leave what exists now (imports, definitions, the caller's objects) out of the
    collections made inside: a full collection walks every tracked object, ~0.25 s for the
    ~440k of an index process, and a run makes one per step input (3 s of a 10 s sample-corpus
    run). What the block creates is collected as before; on leaving, everything is again."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()

"""Keep an index process's memory near what its current stage holds.

The index runs its stages one after another in one process. What a stage frees stays in
the allocators' pools unless they are told to return it, so without this the process's RSS
only grows, stage by stage, to the sum of their peaks instead of the largest one:

- glibc's arenas (Python objects, numpy, Arrow, Lance): `release()` trims them after a
  stage, and `configure()` caps them at two (a pool per thread fragments: 170 MB more after
  a 10k-document tail with the default 8 per core);
- polars' own jemalloc, which polars configures to keep freed pages 0.5-1 s and to return
  them only on its later allocations: a merge's group-bys stayed resident through the next
  stages (600 MB at 10k documents). `configure()` makes it return them at once (the merge
  ~8% slower); polars appends this variable to its settings when it loads, so `configure`
  must run first (pipeline/__init__.py calls it). Returning them at once costs time: every
  polars operation faults its pages in anew (a one-file edit at 40k documents: 3.2M page
  faults, 11 of its 30 CPU s in the kernel). Kept a little from a background thread
  (`_RJEM_MALLOC_CONF=background_thread:true,dirty_decay_ms:250,muzzy_decay_ms:0`) the
  edit took ~17 s instead of ~21, adding 100 documents ~52 s instead of ~62, but the add
  run's peak rose from 1.84-1.86 to 1.93-2.07 GB, over the 1.88 GB the index is held to
  (any delay from 25 to 250 ms did; docs/scale.md, issue 49 session 32): a machine with
  memory to spare may set it.
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


def configure() -> None:
    """Allocator settings for the whole process; before polars loads, once."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
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

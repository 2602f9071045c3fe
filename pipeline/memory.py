"""Give memory a finished stage freed back to the operating system.

The index runs its stages one after another in one process. What a stage frees stays in
the allocators' pools unless they are asked to return it: glibc's arenas (numpy, Python,
torch) and Arrow's pool (Parquet and Lance I/O), so without this the process's RSS only
ever grows, stage by stage, to the sum of their peaks instead of the largest one.
"""

from __future__ import annotations

import contextlib
import ctypes


def release() -> None:
    """Return freed heap to the OS (a few milliseconds)."""
    with contextlib.suppress(Exception):  # optional: a pool without the call, not glibc
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)

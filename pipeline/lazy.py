"""Functions whose module is imported on their first call.

A format's reader or parser is registered for its suffix or mime type when the package
loads, but pymupdf takes ~0.45 s to import (a quarter of loading the Dagster definitions):
every step of a multiprocess or Dask run, and every `docgraph` command, paid it though
only the steps that read a PDF use it. Registered `deferred`, the PDF modules load when
the first PDF is read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def deferred(module: str, name: str) -> Callable[..., Any]:
    """A function calling `module.name`, importing `module` when it is first called."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__module__ = module
    return call

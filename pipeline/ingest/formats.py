"""What a loader is and which one reads a file: LoadedDoc, LoadError, the suffix registry
that the format modules (text, markdown, pdf, notes) fill with `register`, and `load_bytes`,
which hands one file's bytes to its format's loader. Kept apart from the folder loading
(loader.py) so the formats, and what they share (text.decode_text), import no walk."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class LoadError(Exception):
    """A file that cannot become a document; the message is the user-facing reason."""


@dataclass
class LoadedDoc:
    title: str
    mime_type: str
    text: str
    n_pages: int = 1
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # The format's open reader of the file, still open (a PDF's pymupdf Document): the
    # structure parse reads it instead of opening the file again. The caller closes it.
    source: Any = None


# (path, raw bytes) -> LoadedDoc, or raise LoadError. Keyed by lower-case suffix.
Loader = Callable[[Path, bytes], LoadedDoc]
LOADERS: dict[str, Loader] = {}


def register(*suffixes: str) -> Callable[[Loader], Loader]:
    """Registers a loader for file suffixes (so other formats plug in without editing this file)."""

    def deco(fn: Loader) -> Loader:
        for s in suffixes:
            LOADERS[s.lower()] = fn
        return fn

    return deco


def load_bytes(path: Path, data: bytes) -> LoadedDoc:
    """Loads one file's bytes by its suffix; raises LoadError with the reason when it cannot."""
    suffix = path.suffix.lower()
    loader = LOADERS.get(suffix)
    if loader is None:
        raise LoadError(
            f"unsupported file type {suffix}" if suffix else "unsupported file type (no extension)"
        )
    if not data or data.isspace():  # (not `strip()`: a copy of a file that may be huge)
        raise LoadError("empty file")
    return loader(path, data)

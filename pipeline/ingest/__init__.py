"""Document loaders: a folder of .txt / .md / .pdf / notes .json(l) files to the documents table.

Importing the format modules registers their loaders with `loader.LOADERS`.
"""

from pipeline.ingest import markdown, notes, pdf, text  # noqa: F401  (registers loaders)
from pipeline.ingest.loader import LOADERS, LoadedDoc, LoadError, load_bytes, load_folder, register
from pipeline.ingest.walk import (
    InputFolderError,
    check_input_folder,
    folder_fingerprint,
    own_folders,
    walk_input,
)

__all__ = [
    "InputFolderError",
    "LOADERS",
    "LoadError",
    "LoadedDoc",
    "check_input_folder",
    "folder_fingerprint",
    "load_bytes",
    "load_folder",
    "own_folders",
    "register",
    "walk_input",
]

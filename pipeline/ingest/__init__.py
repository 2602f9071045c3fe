"""The ingest layer: the input folder in (.txt / Markdown (.md .mdx .qmd .Rmd) / .pdf / notes
.json(l) files and the publications manifest); the documents and rejected_documents tables
out, shard by shard (`shards.py`), and the publications table. `walk.py` lists the folder,
`loader.py` reads each file with its format's loader (`formats.py`; importing the format
modules here registers them, the PDF one deferred: pipeline.lazy; PDFs are read in
`pipeline/pdf/read/`, scanned pages OCR'd there when the OCR extra is installed), and
`publications.py` maps the manifest onto files."""

from pipeline.ingest import load_notebooks, markdown, text  # noqa: F401  (registers loaders)
from pipeline.ingest.formats import LOADERS, LoadedDoc, LoadError, load_bytes, register
from pipeline.ingest.loader import load_folder
from pipeline.ingest.walk import (
    InputFolderError,
    check_input_folder,
    folder_fingerprint,
    own_folders,
    walk_input,
)
from pipeline.lazy import deferred

# pdf.py registers itself too, when it is imported: pymupdf loads with the first PDF read
LOADERS.setdefault(".pdf", deferred("pipeline.pdf.read.load", "load_pdf"))

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

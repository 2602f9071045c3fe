"""The structure layer: the documents table in (their text, and the file again where a
format needs it); sections, content nodes and structure edges of every document out. Each
format's parser (`markdown`, `notebook_sections`, `pdf.parse`, registered in `parsers`)
returns a DocStructure (`model.py`); `build.py` runs them, and a parser that fails on a
document falls back to the plain-text structure (one PARAGRAPH per blank-line block, so the
document is still chunked and indexed), the failure a `structure_failures` row with its
reason: one odd file never
costs the run, nor is it lost silently. Links between documents are resolved once all
documents are parsed (`links.py`).
"""

from pipeline.structure.build import build_structure
from pipeline.structure.model import DocStructure, position, slugify
from pipeline.structure.parsers import PARSERS

__all__ = ["DocStructure", "build_structure", "position", "slugify", "PARSERS"]

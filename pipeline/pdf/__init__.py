"""PDF files in, documents and document structures out: `read/` turns a PDF's text layer
(or OCR of its scanned pages) into a loaded document and page units, `layout/` (the layout
model, the default) or `rules/` (font and position rules) class those units, `build/`
makes the sections, nodes and edges; `parse` runs them, `thresholds` names their cut-offs."""

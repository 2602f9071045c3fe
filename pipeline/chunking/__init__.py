"""Chunking: document structures (sections, content nodes) in, text units out.

Splits each section's text into token-bounded chunks that respect sentence and structure
boundaries, with the section path as context and the content nodes each unit holds; the
`text_units` table is what extraction, vectors and every query mode read."""

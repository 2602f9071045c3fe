"""Chunking: document structures (sections, content nodes) in, text units out.

Splits each section's text into token-bounded chunks that respect sentence and structure
boundaries, with the section path as context and the content nodes each unit holds; the
`text_units` table is what extraction, vectors and every query mode read. `segments` turns a
text into sentences graded by the break after each (sentence rules from
`pipeline.sentences`); `simple` picks content-anchored cuts among them, a window of
sentences at a time (`sources` hands them out: a huge document is never held whole);
`smart` keeps sections, tables and code whole; `semantic` cuts where the topic changes;
`units` builds the table and its stable ids; `documents` is the entry point with its
fallbacks.
"""

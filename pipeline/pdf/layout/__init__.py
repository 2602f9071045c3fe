"""The layout-model path (the default): a PDF's pages in, classified items out. pymupdf's
layout model gives each page's regions (in worker processes), columns and gutters are
fixed, the text units are given to the regions and classed as headings, notes, captions."""

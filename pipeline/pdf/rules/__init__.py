"""The rule path (`pdf_structure: heuristic`): a PDF's page units in, classified items out,
by hand-written rules over font sizes, weights and positions, about 20x faster than the
layout model for very large corpora."""

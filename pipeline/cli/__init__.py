"""The `docgraph` command line: index, check, query, serve, export, fake-llm.

`main` parses the arguments and dispatches to the pipeline and the query module; `python -m
pipeline.cli` runs it too."""

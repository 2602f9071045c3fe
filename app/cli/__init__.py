"""The `docgraph` command line: index, check, query, serve, export, sample, fake-llm.

`main` parses the arguments and dispatches to one module per command group (`indexing`,
`querying`, `export`, `demo`; `args` holds the shared value types); `python -m app.cli`
runs it too."""

"""The application over the library: the `docgraph` command line (`cli`), the HTTP API
(`serve`) and the index job's runner (`run`), the three ways a person starts work.

In: command-line arguments, HTTP requests, a settings file and folders. Out: runs of the
Dagster job defined in `definitions.py`, query results printed or answered as JSON. The
layers point one way: `app` imports `definitions`, `assets`, `resources` and `pipeline`;
`assets` and `resources` import `pipeline`; `pipeline` imports none of them, nor Dagster."""

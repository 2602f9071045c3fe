"""The HTTP API: `docgraph serve` answers query requests over an index.

`request` is the request model shared with the CLI (mode, question, options); `server` is
the small threaded HTTP server that opens the index once and runs each request; `page`
(with `page_images` and `evidence`, its files in static/) is the query page at `/`."""

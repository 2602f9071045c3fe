"""The HTTP API: `docgraph serve` answers query requests over an index.

`request` is the request body, its fields the query modes' registry's options (as the
CLI's flags are); `server` is
the small threaded HTTP server that opens the index once and runs each request; `page`
(with `page_images` and `evidence`, its files in static/) is the query page at `/`."""

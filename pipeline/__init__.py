"""docgraph domain library: pure functions and classes, no Dagster import."""

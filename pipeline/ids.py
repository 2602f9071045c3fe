"""Content-addressed ids: the same input always gets the same id, across runs and machines."""

from __future__ import annotations

import hashlib

import polars as pl


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stable_id(*parts: str) -> str:
    """Hash of the parts joined by a separator no text contains (32 hex chars)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:32]


def stable_id_expr(*cols: str | pl.Expr) -> pl.Expr:
    """Vectorised stable_id over polars columns; equal to stable_id row by row."""
    exprs = [pl.col(c) if isinstance(c, str) else c for c in cols]
    joined = pl.concat_str([e.cast(pl.Utf8) + pl.lit("\x1f") for e in exprs])
    return joined.map_batches(
        lambda s: pl.Series([hashlib.sha256(v.encode("utf-8")).hexdigest()[:32] for v in s]),
        return_dtype=pl.Utf8,
    )

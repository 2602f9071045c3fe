"""Names (entity titles and aliases, document titles) found in a query.

The index view builds a name-key -> rows lookup once (`key_index`); `greedy_match` reads a
query against it. Pure functions over polars frames and strings, no index needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.query.word_keys import fold, is_stop_key, name_key, raw_words

# Longest entity name (in words) tried when matching query n-grams against names.
MAX_NAME_WORDS = 8


@dataclass(frozen=True)
class NameMatch:
    row: int  # entity row (match_entities) or text unit row (match_titles)
    key: str  # the folded name that matched
    proper: bool  # written like a name in the query (capitalised / digits)


def key_index(names: pl.DataFrame) -> dict[str, list[int]]:
    """(row, name) pairs -> {name key: rows}, skipping keys that cannot name anything."""
    names = names.drop_nulls("name").unique(maintain_order=True)
    out: dict[str, list[int]] = {}
    for row, name in zip(names["row"].to_list(), names["name"].to_list(), strict=True):
        key = name_key(name)
        if is_stop_key(key) or (key.isdigit() and len(key) < 3):
            continue
        rows = out.setdefault(key, [])
        if row not in rows:
            rows.append(row)
    return out


def greedy_match(query: str, index: dict[str, list[int]]) -> list[NameMatch]:
    """Names of `index` in the query: greedy longest n-gram match, left to right.

    Folded (casefolded, accent-free) word n-grams of the query are looked up, so 'new
    york city' matches 'NEW YORK CITY' and not also 'YORK'. A match is `proper` when
    the query writes it with a capital or digit (past the first word): a stronger sign
    of a name than a lower-case common word that happens to equal a title.
    """
    raw = raw_words(query)
    toks = [fold(w) for w in raw]
    out: list[NameMatch] = []
    i = 0
    while i < len(toks):
        for n in range(min(MAX_NAME_WORDS, len(toks) - i), 0, -1):
            key = " ".join(toks[i : i + n])
            if key in index:
                span = raw[i : i + n]
                proper = any(
                    w[:1].isupper() or w[:1].isdigit()
                    for j, w in enumerate(span)
                    if i + j > 0 or n > 1 or w[:1].isdigit()
                )
                out.extend(NameMatch(row, key, proper) for row in index[key])
                i += n
                break
        else:
            i += 1
    return out

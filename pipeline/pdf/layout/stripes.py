"""Columns that pymupdf4llm cut into stripes by chance, read as columns again.

pymupdf4llm orders a page's regions in horizontal stripes first, then each stripe column by
column. Unless the page is a clean set of columns (nothing across the gutter), it cuts a
stripe wherever an empty band ~12 pt high crosses the whole body. Under a title across two
columns (a paper's first page) or around a figure over both, such bands also occur by
chance: the space above a heading in one column level with the space around an equation in
the other. The page was then read across the columns, left top, right top, left middle...
(5 of 17 LaTeX and CSS-column documents made here; a paragraph cut at the foot of a
column was then not continued at the top of the next).

Here a stripe is joined to the one above it when together they are still columns of text:
each has two columns or more (or the lower one goes on, within STRIPE_GOES_ON, under the column of
the upper one that reaches lowest: a word processor's unbalanced columns, where the band
above a heading at the foot of the first column crosses the page because the second column
ended higher up), none of its regions crosses a gutter of the pair, each column
is a fifth of the body's width at least, and in each stripe each of its columns holds a
region that fills most of the column's width or starts at its left edge. Not joined: a
title or a figure across the columns, a row of authors (centred, narrow), a label beside a
line (texinfo's "[Function]"), a form's labels and fields of uneven widths. A stripe of
text columns is then read column by column, each top to bottom (`columns_in_stripe`), as
pymupdf4llm reads a page of clean columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pipeline.pdf.thresholds import (
    STRIPE_FULL,
    STRIPE_GAP,
    STRIPE_GOES_ON,
    STRIPE_INDENT,
    STRIPE_MIN_COLUMN,
)

Box = Sequence[Any]  # (x0, y0, x1, y1, class) as pymupdf4llm passes them


def join_stripes(stripes: list[list[Box]]) -> list[list[Box]]:
    """`stripes` (top to bottom) with those that continue the columns above them joined."""
    out: list[list[Box]] = []
    for stripe in stripes:
        if out and _columns_go_on(out[-1], stripe):
            out[-1] = out[-1] + stripe
        else:
            out.append(list(stripe))
    return out


def columns_in_stripe(
    stripe: list[Box], cluster: Callable[[list[Box]], list[list[Box]]]
) -> list[list[Box]]:
    """The columns of a stripe of text columns, left to right, each top to bottom; any
    other stripe as `cluster` (pymupdf4llm's) groups it. pymupdf4llm cuts a stripe at each
    region with nothing beside it, and a heading or a list item in one column beside a
    blank in the other was read between the halves of both columns; only a region of the
    first column other than a heading cuts it here."""
    groups = _groups(stripe)
    if not _text_columns(_spans(groups)) or not all(map(_stacked, groups)):
        return cluster(stripe)
    if any(_parts_columns(b, stripe, groups[1:]) for b in groups[0]):
        return cluster(stripe)
    return [sorted(column, key=lambda b: b[1]) for column in groups]


def _parts_columns(box: Box, stripe: list[Box], later: list[list[Box]]) -> bool:
    """Whether `box`, in the first column, parts the columns above it from those below it:
    nothing beside it, another column going on below it, and no heading (a caption or a
    note under both columns). A heading with a blank beside it (the space above a heading or
    an equation in the other column) stays in its column, and so does the foot of a column
    longer than the others (a last page's)."""
    alone = not any(o is not box and o[1] < box[3] and box[1] < o[3] for o in stripe)
    below = any(o[1] >= box[3] for column in later for o in column)
    return alone and below and box[4] != "section-header"


def _stacked(column: list[Box]) -> bool:
    """Whether the boxes of `column` stand one above another (any two share some width): a
    sidebar beside a text within one column is pymupdf4llm's to order."""
    return all(a[0] < b[2] and b[0] < a[2] for i, a in enumerate(column) for b in column[i + 1 :])


def _text_columns(columns: list[tuple[float, float, float]]) -> bool:
    """Whether `columns` are two or more, each a fifth of their width at least."""
    width = columns[-1][1] - columns[0][0]
    return len(columns) >= 2 and min(x1 - x0 for x0, x1, _ in columns) >= STRIPE_MIN_COLUMN * width


def _columns_go_on(above: list[Box], below: list[Box]) -> bool:
    both = _spans(_groups(above + below))
    if not _text_columns(both):
        return False
    for part in (above, below):
        own = _spans(_groups(part))
        if len(own) < 2 and not (part is below and _longest_goes_on(above, below)):
            return False
        for x0, x1, widest in own:
            c0, c1, _ = next(c for c in both if c[0] <= x0 and x1 <= c[1])
            if widest < STRIPE_FULL * (c1 - c0) and x0 - c0 > STRIPE_INDENT * (c1 - c0):
                return False
    return True


def _longest_goes_on(above: list[Box], below: list[Box]) -> bool:
    """Whether `below`, in one column, goes on with the column of `above` that reaches
    lowest, right under it (a heading at the foot of the first column, the second column
    having ended higher up: a word processor's columns before they are balanced)."""
    groups = _groups(above)
    foot = [max(b[3] for b in g) for g in groups]
    lowest = groups[foot.index(max(foot))]
    x0, x1 = min(b[0] for b in lowest), max(b[2] for b in lowest)
    inside = all(x0 - STRIPE_GAP <= b[0] and b[2] <= x1 + STRIPE_GAP for b in below)
    return inside and min(b[1] for b in below) - max(foot) <= STRIPE_GOES_ON


def _groups(boxes: list[Box]) -> list[list[Box]]:
    """The columns of `boxes`, left to right: sorted by their left edges, a column ends where
    the next box starts STRIPE_GAP right of all before it."""
    out: list[list[Box]] = []
    for b in sorted(boxes, key=lambda b: b[0]):
        if out and b[0] - max(o[2] for o in out[-1]) <= STRIPE_GAP:
            out[-1].append(b)
        else:
            out.append([b])
    return out


def _spans(groups: list[list[Box]]) -> list[tuple[float, float, float]]:
    """(x0, x1, widest box's width) of each column."""
    return [
        (min(b[0] for b in g), max(b[2] for b in g), max(b[2] - b[0] for b in g)) for g in groups
    ]


def install() -> None:
    """Make pymupdf4llm's reading order join its stripes here (it looks `cluster_stripes` up
    in its module at each call). A pymupdf4llm without that function keeps its own order."""
    from pymupdf4llm.helpers import utils

    cut = getattr(utils, "cluster_stripes", None)
    cluster = getattr(utils, "cluster_columns_in_stripe", None)
    if cut is None or cluster is None or getattr(cut, "joins_columns", False):
        return

    def cluster_stripes(*args: Any, **kwargs: Any) -> list[list[Box]]:
        return join_stripes(cut(*args, **kwargs))

    def cluster_columns_in_stripe(stripe: list[Box]) -> list[list[Box]]:
        return columns_in_stripe(stripe, cluster)

    cluster_stripes.joins_columns = True  # type: ignore[attr-defined]
    utils.cluster_stripes = cluster_stripes
    utils.cluster_columns_in_stripe = cluster_columns_in_stripe

"""Asking a model about many items in one call, and recovering when its answer is cut.

Why its own module: the extraction packs and the description-summary packs share the same
recovery (an answer cut at the token limit is worth nothing, so the batch is halved and each
half asked again); it depends only on LlmTruncated, not on the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pipeline.llm.errors import LlmTruncated

T = TypeVar("T")
R = TypeVar("R")


async def ask_in_halves(
    items: list[T],
    ask: Callable[[list[T]], Awaitable[R]],
    on_split: Callable[[], None] | None = None,
) -> list[tuple[list[T], R | Exception]]:
    """[(items, answer or error)]: `ask(items)`; when that answer is cut at the token limit,
    each half is asked again (recursively, down to one item), so a batch too big for one answer
    costs calls, not items. Errors come back as values, except fatal ones (`.fatal`)."""
    try:
        return [(items, await ask(items))]
    except LlmTruncated as exc:
        if len(items) < 2:
            return [(items, exc)]
    except Exception as exc:  # noqa: BLE001 - the caller records it per batch
        if getattr(exc, "fatal", False):
            raise
        return [(items, exc)]
    if on_split is not None:
        on_split()
    mid = len(items) // 2
    left, right = await asyncio.gather(
        ask_in_halves(items[:mid], ask, on_split), ask_in_halves(items[mid:], ask, on_split)
    )
    return left + right

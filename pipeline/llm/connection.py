"""The connection to an OpenAI-compatible endpoint: the SDK client bound to the running event
loop, bounded concurrency, counted retries with backoff, and per-stage call counters.

Why its own module: riding out 429/5xx/timeouts is its own concern, apart from what the answer
is for (`pipeline.llm.client.LlmClient`, which extends this with the cache, the JSON re-ask
and streaming). The SDK's own retries are disabled so every retry is counted; a 429's
Retry-After is honoured (capped), otherwise exponential backoff with jitter. A fatal failure
(a refused key, an unknown model) is raised at once, never retried.
"""

from __future__ import annotations

import asyncio
import logging
import random

import openai

from pipeline.config import LlmSettings
from pipeline.llm.accounting import StageCounters
from pipeline.llm.errors import (
    LlmError,
    connection_refused,
    describe_error,
    fatal_error,
    fatal_types,
    retry_after,
    retryable_types,
)

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0


class LlmConnection:
    """Counted, retried HTTP calls to one endpoint.

    `counters` holds one StageCounters per stage name. The SDK client and the semaphore are
    bound to the running event loop and rebuilt when it changes (each `run_many` uses a fresh
    loop), and so is the map of calls in flight (their futures belong to the loop).
    """

    def __init__(
        self,
        settings: LlmSettings,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        retry_refused: bool = True,
    ) -> None:
        self.settings = settings
        # False at query time: a refused connection (no server) fails at once, not after retries.
        self.retry_refused = retry_refused
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.counters: dict[str, StageCounters] = {}
        self._model_tokens: dict[tuple[str, str], list[int]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._sem: asyncio.Semaphore | None = None
        self._inflight: dict[str, asyncio.Future] = {}
        self._rng = random.Random()

    def _stage(self, stage: str) -> StageCounters:
        return self.counters.setdefault(stage, StageCounters())

    def _bind(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._client is None or self._sem is None:
            key = self.settings.api_key.get_secret_value() if self.settings.api_key else None
            self._client = openai.AsyncOpenAI(
                api_key=key or "not-needed",  # local servers want some value
                base_url=self.settings.base_url or None,
                timeout=self.settings.timeout_s,
                max_retries=0,  # retries are ours, so they are counted
            )
            self._sem = asyncio.Semaphore(max(1, self.settings.concurrency))
            self._inflight = {}
            self._loop = loop
        return self._client, self._sem

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
        self._client, self._sem, self._loop = None, None, None

    def _delay(self, attempt: int, exc: Exception) -> float:
        if isinstance(exc, openai.RateLimitError):
            after = retry_after(exc.response.headers)
            if after is not None:
                return min(after, self.backoff_cap_s)
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2**attempt)
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def _account(self, stage: str, model: str, prompt: int, completion: int) -> None:
        c = self._stage(stage)
        c.calls += 1
        c.prompt_tokens += prompt
        c.completion_tokens += completion
        tokens = self._model_tokens.setdefault((stage, model), [0, 0])
        tokens[0] += prompt
        tokens[1] += completion

    async def _with_retries(self, stage: str, model: str, call):
        """Run `call()` (one HTTP request under the semaphore) with counted retries."""
        _, sem = self._bind()
        counters = self._stage(stage)
        for attempt in range(self.settings.max_retries + 1):
            try:
                async with sem:
                    return await call()
            except retryable_types() as exc:
                await self._retry_or_raise(stage, attempt, exc, final=False)
            except fatal_types() as exc:
                counters.failures += 1
                raise fatal_error(exc, model, self.settings.base_url) from None
            except openai.OpenAIError as exc:
                counters.failures += 1
                raise LlmError(self._describe(exc)) from None
        raise AssertionError("unreachable")

    async def _retry_or_raise(
        self, stage: str, attempt: int, exc: Exception, final: bool, prefix: str = ""
    ) -> None:
        """Wait before the next attempt, or raise LlmError when retries are spent (or
        `final`: e.g. a stream that already yielded text cannot be retried)."""
        counters = self._stage(stage)
        reason = self._describe(exc)
        if not self.retry_refused and connection_refused(exc):
            final, reason = True, f"{reason} (connection refused)"
        if final or attempt >= self.settings.max_retries:
            counters.failures += 1
            raise LlmError(f"{prefix}{reason} after {attempt + 1} attempts") from None
        delay = self._delay(attempt, exc)
        counters.retries += 1
        log.info("llm %s: %s; retry %d in %.2fs", stage, reason, attempt + 1, delay)
        await asyncio.sleep(delay)

    def _describe(self, exc: Exception) -> str:
        """A short reason: status, class and the server's own message (a 400 says what was
        wrong), never request details; the key is masked should a server echo it."""
        reason = describe_error(exc)
        key = self.settings.api_key.get_secret_value() if self.settings.api_key else ""
        return reason.replace(key, "***") if key else reason

"""The connection to an OpenAI-compatible endpoint: the SDK client bound to the running event
loop, bounded concurrency, counted retries with backoff, and per-stage call counters.

Why its own module: riding out 429/5xx/timeouts is its own concern, apart from what the answer
is for (`pipeline.llm.client.LlmClient`, which extends this with the cache, the JSON re-ask
and streaming). The SDK's own retries are disabled so every retry is counted; a 429's
Retry-After is honoured (capped), otherwise exponential backoff with jitter. A fatal failure
(a refused key, an unknown model) is raised at once, never retried; so is an endpoint that no
call has reached (refused, unknown host, connect timeout), after UNREACHED_ATTEMPTS: once one
call was answered, a lost connection is retried and recorded per call like a 5xx.
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
    describe_error,
    fatal_error,
    fatal_types,
    retry_after,
    retryable_types,
    unreachable_error,
    unreachable_reason,
)

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0
# Attempts per call while no call has reached the endpoint (a wrong address, no server): one
# retry rides out a connection lost once or a server a moment from listening; the default
# llm.max_retries (5: ~8-15 s of back-off per call) would only delay the failure, on every unit.
UNREACHED_ATTEMPTS = 2


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
        # False at query time: an endpoint that cannot be reached (no server) fails the call at
        # once, not after retries. At index time it stops the run unless a call reached it.
        self.retry_refused = retry_refused
        self.reached = False  # some request got an HTTP answer (of any status) from the endpoint
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
                # connecting takes the SDK's own bound (5 s), not the whole answer's timeout
                timeout=openai.Timeout(
                    self.settings.timeout_s,
                    connect=min(self.settings.timeout_s, openai.DEFAULT_TIMEOUT.connect),
                ),
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
                    resp = await call()
                self.reached = True
                return resp
            except retryable_types() as exc:
                await self._retry_or_raise(stage, attempt, exc, final=False)
            except fatal_types() as exc:
                counters.failures += 1
                raise fatal_error(exc, model, self.settings.base_url) from None
            except openai.OpenAIError as exc:
                self.reached |= isinstance(exc, openai.APIStatusError)
                counters.failures += 1
                raise LlmError(self._describe(exc)) from None
        raise AssertionError("unreachable")

    async def _retry_or_raise(
        self, stage: str, attempt: int, exc: Exception, final: bool, prefix: str = ""
    ) -> None:
        """Wait before the next attempt, or raise LlmError when retries are spent (or
        `final`: e.g. a stream that already yielded text cannot be retried). An endpoint no
        call has reached raises LlmUnreachableError after UNREACHED_ATTEMPTS (see
        `_unreached`)."""
        counters = self._stage(stage)
        reason = self._describe(exc)
        self.reached |= isinstance(exc, openai.APIStatusError)
        why = unreachable_reason(exc)
        if why is not None:
            reason = f"{reason} ({why})"
            final = final or not self.retry_refused
            self._unreached(stage, attempt, why, final)
        if final or attempt >= self.settings.max_retries:
            counters.failures += 1
            raise LlmError(f"{prefix}{reason} after {attempt + 1} attempts") from None
        delay = self._delay(attempt, exc)
        counters.retries += 1
        log.info("llm %s: %s; retry %d in %.2fs", stage, reason, attempt + 1, delay)
        await asyncio.sleep(delay)

    def _unreached(self, stage: str, attempt: int, why: str, final: bool) -> None:
        """Raise LlmUnreachableError when no call has reached the endpoint and this one has
        spent its attempts: every unit would only fall back offline after the full retries,
        and an offline index is not what LLM mode asked for. Once a call was answered, a
        failed connection is transient and is recorded per call like any other failure."""
        if self.reached or not self.retry_refused:
            return
        last = final or attempt + 1 >= min(UNREACHED_ATTEMPTS, self.settings.max_retries + 1)
        if last:
            self._stage(stage).failures += 1
            raise unreachable_error(self.settings.base_url, why) from None

    def _describe(self, exc: Exception) -> str:
        """A short reason: status, class and the server's own message (a 400 says what was
        wrong), never request details; the key is masked should a server echo it."""
        reason = describe_error(exc)
        key = self.settings.api_key.get_secret_value() if self.settings.api_key else ""
        return reason.replace(key, "***") if key else reason

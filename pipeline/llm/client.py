"""OpenAI-compatible LLM client: async, bounded concurrency, retries, in-flight de-duplication,
the disk cache and the JSON re-ask, with token accounting per stage.

Why a wrapper round `openai.AsyncOpenAI`: a batch index makes tens of thousands of calls, so it
must (1) never pay twice for the same call — the disk cache (`pipeline.llm.cache`) holds only
usable answers (a JSON answer that validated), so a re-run asks again what failed; (2) ride out
429/5xx/timeouts with its own counted retries (the SDK's are disabled); (3) turn near-JSON into
validated pydantic objects (`pipeline.llm.json_repair`), with one re-ask before a failure;
(4) report failures as values from `run_many`, so one bad chunk never kills a run — except a
fatal one (`pipeline.llm.errors.LlmFatalError`: a refused key, an unknown model, an endpoint no
call could reach), which every call would repeat, so it stops the run. The api key is never
part of a cache key, a cache file, a log line, an error or the metadata.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import openai
from pydantic import BaseModel

from pipeline import progress
from pipeline.config import LlmSettings
from pipeline.llm.accounting import STAGE_HEADER, estimate_prompt_tokens, usage_metadata
from pipeline.llm.cache import DiskCache, cache_entry, cache_key
from pipeline.llm.connection import BACKOFF_BASE_S, BACKOFF_CAP_S, LlmConnection
from pipeline.llm.errors import (
    LlmError,
    LlmTruncated,
    fatal_error,
    fatal_types,
    retryable_types,
)
from pipeline.llm.json_repair import parse_json
from pipeline.tokens import count_tokens

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = TypeVar("P")

REASK = (
    "Your previous answer could not be used: {error}. Reply again with only the corrected JSON "
    "(no prose, no code fences) matching the requested format."
)


class LlmClient(LlmConnection):
    """Chat calls against an OpenAI-compatible endpoint; see the module docstring. The
    connection (event-loop binding, retries, counters) is `LlmConnection`'s."""

    def __init__(
        self,
        settings: LlmSettings,
        cache_dir: str | Path | None,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        retry_refused: bool = True,
    ) -> None:
        super().__init__(
            settings,
            backoff_base_s=backoff_base_s,
            backoff_cap_s=backoff_cap_s,
            retry_refused=retry_refused,
        )
        self.cache = DiskCache(cache_dir) if (cache_dir is not None and settings.cache) else None

    def __repr__(self) -> str:
        return f"LlmClient(model={self.settings.chat_model!r}, cache={self.cache is not None})"

    def _request(self, messages: list[dict], params: dict[str, Any]) -> tuple[str, dict, str]:
        params = dict(params)
        model = params.pop("model", None) or self.settings.chat_model
        merged = {"temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens}
        merged.update(params)
        return model, merged, cache_key(model, messages, merged)

    # -- public API
    async def chat(self, messages: list[dict], *, stage: str, **params: Any) -> str:
        """The answer text; cached on disk and de-duplicated while in flight."""
        text, _ = await self._answer(messages, stage, params, _any_text)
        return text

    async def _answer(
        self,
        messages: list[dict],
        stage: str,
        params: dict[str, Any],
        check: Callable[[str], tuple[P, bool]],
        remember_cut: bool = False,
    ) -> tuple[str, P]:
        """(answer text, `check(text)`'s value). Only an answer that `check` accepts is cached
        (and a cached one it rejects is asked again): a malformed answer cached would make
        every re-run repeat the failure without a call. An answer cut at the token limit
        raises LlmTruncated and its text is never cached; with `remember_cut` (a batch the
        caller will split) the cut itself is, so a re-run splits without paying for it again."""
        model, merged, key = self._request(messages, params)
        client, _ = self._bind()
        counters = self._stage(stage)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and hit.get("cut") is True:
                if remember_cut:
                    counters.cache_hits += 1
                    raise LlmTruncated("answer cut at the token limit (remembered)")
            elif hit is not None:
                value, ok = check(hit["text"])
                if ok:
                    counters.cache_hits += 1
                    return hit["text"], value
        pending = self._inflight.get(key)
        if pending is not None:  # the same call is already on its way: share its answer
            counters.cache_hits += 1
            text = await asyncio.shield(pending)
            return text, check(text)[0]
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:

            async def call():
                return await client.chat.completions.create(
                    model=model,
                    messages=messages,
                    extra_headers={STAGE_HEADER: stage},
                    **merged,
                )

            resp = await self._with_retries(stage, model, call)
            choice = resp.choices[0] if resp.choices else None
            text = (choice.message.content if choice else None) or ""
            usage = resp.usage
            prompt = usage.prompt_tokens if usage else estimate_prompt_tokens(messages)
            completion = usage.completion_tokens if usage else count_tokens(text)
            self._account(stage, model, prompt, completion)
            if choice is not None and choice.finish_reason == "length":
                counters.truncations += 1
                if remember_cut and self.cache is not None:
                    self.cache.put(
                        key, {**cache_entry(model, stage, "", prompt, completion), "cut": True}
                    )
                raise LlmTruncated(
                    f"answer cut at the token limit ({completion} of max_tokens "
                    f"{merged.get('max_tokens')})"
                )
            value, ok = check(text)
            if ok and self.cache is not None:
                self.cache.put(key, cache_entry(model, stage, text, prompt, completion))
            future.set_result(text)
            return text, value
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, Exception) else LlmError("cancelled"))
            future.exception()  # mark retrieved: no "never retrieved" warning when unshared
            raise
        finally:
            self._inflight.pop(key, None)

    async def chat_json(
        self,
        messages: list[dict],
        schema: type[M],
        *,
        stage: str,
        remember_cut: bool = False,
        **params: Any,
    ) -> M:
        """A validated `schema` instance: the answer as is, else repaired, else one re-ask
        (the bad answer and a correction appended), else LlmError. Only answers that validate
        are cached, so a re-run asks again what failed; a re-ask's answer is cached under the
        first prompt's key too, so a re-run pays for neither. An answer cut at the token limit
        raises LlmTruncated at once (a re-ask would be cut too); `remember_cut`: see `_answer`."""
        counters = self._stage(stage)

        def check(text: str) -> tuple[tuple[M | None, bool, str], bool]:
            parsed = parse_json(text, schema)
            return parsed, parsed[0] is not None

        text, (obj, repaired, error) = await self._answer(
            messages, stage, params, check, remember_cut
        )
        if obj is not None:
            counters.repairs += repaired
            return obj
        counters.repairs += 1
        log.info("llm %s: invalid JSON answer (%s); re-asking once", stage, error)
        reask = [
            *messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": REASK.format(error=error or "not valid JSON")},
        ]
        _, (obj, _, error) = await self._answer(reask, stage, params, check, remember_cut)
        if obj is not None:
            self._cache_as(messages, reask, params)
            return obj
        counters.failures += 1
        raise LlmError(f"invalid JSON for {schema.__name__} after one re-ask: {error}")

    def _cache_as(self, messages: list[dict], reask: list[dict], params: dict[str, Any]) -> None:
        """Hold the re-ask's validated answer under `messages`' key too: a re-run with the same
        inputs asks `messages` first, and would otherwise pay for it (and its re-ask) again."""
        if self.cache is not None:
            entry = self.cache.get(self._request(reask, params)[2])
            if entry is not None:
                self.cache.put(self._request(messages, params)[2], entry)

    async def stream(
        self, messages: list[dict], *, stage: str, **params: Any
    ) -> AsyncIterator[str]:
        """Answer text as it arrives. Retries only before the first piece is yielded; a cache
        hit yields the whole cached text at once; the full answer is cached at the end, unless
        it was cut at the token limit (counted in `truncations` and logged: the text is already
        with the reader, so it is not raised)."""
        model, merged, key = self._request(messages, params)
        client, sem = self._bind()
        counters = self._stage(stage)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and hit.get("cut") is not True:
                counters.cache_hits += 1
                yield hit["text"]
                return
        for attempt in range(self.settings.max_retries + 1):
            pieces: list[str] = []
            usage, finish = None, None
            try:
                async with sem:
                    resp = await client.chat.completions.create(
                        model=model,
                        messages=messages,
                        stream=True,
                        stream_options={"include_usage": True},
                        extra_headers={STAGE_HEADER: stage},
                        **merged,
                    )
                    self.reached = True
                    async for chunk in resp:
                        usage = chunk.usage or usage
                        for choice in chunk.choices:
                            finish = choice.finish_reason or finish
                            if choice.delta and choice.delta.content:
                                pieces.append(choice.delta.content)
                                yield choice.delta.content
                break
            except retryable_types() as exc:
                await self._retry_or_raise(stage, attempt, exc, bool(pieces), "stream: ")
            except fatal_types() as exc:
                counters.failures += 1
                raise fatal_error(exc, model, self.settings.base_url) from None
            except openai.OpenAIError as exc:
                self.reached |= isinstance(exc, openai.APIStatusError)
                counters.failures += 1
                raise LlmError(f"stream: {self._describe(exc)}") from None
        text = "".join(pieces)
        prompt = usage.prompt_tokens if usage else estimate_prompt_tokens(messages)
        completion = usage.completion_tokens if usage else count_tokens(text)
        self._account(stage, model, prompt, completion)
        if finish == "length":
            counters.truncations += 1
            log.warning("llm %s: streamed answer cut at the token limit; not cached", stage)
        elif self.cache is not None:
            self.cache.put(key, cache_entry(model, stage, text, prompt, completion))

    def run_many(self, coros: list[Awaitable[T]]) -> list[T | LlmError]:
        """Await all `coros` concurrently in a fresh event loop (HTTP bounded by
        settings.concurrency); an LlmError comes back in its slot instead of being raised.
        From inside a running loop (a notebook) it runs on a helper thread."""

        bar = progress.start("LLM calls", len(coros))

        async def one(coro: Awaitable[T]) -> T | LlmError:
            try:
                return await coro
            except LlmError as exc:
                return exc
            finally:
                bar.advance()

        async def main() -> list[T | LlmError]:
            try:
                return list(await asyncio.gather(*(one(c) for c in coros)))
            finally:
                await self.aclose()
                bar.finish()

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(main())
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, main()).result()

    def metadata(self) -> dict[str, Any]:
        """Totals, per-stage counters and cost: see `pipeline.llm.accounting.usage_metadata`."""
        return usage_metadata(
            self.counters, self._model_tokens, self.settings.chat_model, self.settings.prices
        )


def _any_text(text: str) -> tuple[str, bool]:
    """A plain-text answer is always usable (and so cacheable)."""
    return text, True

"""OpenAI-compatible LLM client: async, bounded concurrency, retries, JSON repair, disk cache,
token accounting per stage.

Why a wrapper round `openai.AsyncOpenAI`: a batch index makes tens of thousands of calls, so it
must (1) never pay twice for the same call — a disk cache keyed by (model, messages, params)
that survives a killed run, written atomically so a SIGKILL leaves no partial entry, holding
only usable answers (a JSON answer that validated), so a re-run asks again what failed;
(2) ride out 429/5xx/timeouts with its own counted retries (the SDK's are disabled); (3) turn
near-JSON into validated pydantic objects, with one re-ask before a failure; (4) report
failures as values from `run_many`, so one bad chunk never kills a run — except a fatal one
(LlmFatalError: a refused key, an unknown model), which every call would repeat, so it stops the
run. The api key is never part of a cache key, a cache file, a log line, an error or the
metadata.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import openai
from pydantic import BaseModel, ValidationError

from pipeline import progress
from pipeline.config import LlmSettings
from pipeline.storage.files import atomic_write_text
from pipeline.tokens import count_tokens

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = TypeVar("P")
R = TypeVar("R")

STAGE_HEADER = "X-Docgraph-Stage"
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0
REASK = (
    "Your previous answer could not be used: {error}. Reply again with only the corrected JSON "
    "(no prose, no code fences) matching the requested format."
)
_FATAL = (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError)
_RETRYABLE = (
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.RateLimitError,
    openai.InternalServerError,
)


class LlmError(Exception):
    """A call that failed for good (after retries, repair and the re-ask); `.reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LlmFatalError(RuntimeError):
    """A failure no retry, split or other call can fix (a refused key, an unknown model or
    path): every call would fail alike, so it stops the run rather than turn it into an offline
    index. Not an LlmError, so nothing that records per-item failures swallows it; `fatal` lets
    code that never imports this module (`extract_resilient`) re-raise it. Never holds the key."""

    fatal = True


class LlmAuthError(LlmFatalError):
    """The endpoint refused the API key (HTTP 401/403)."""


class LlmTruncated(LlmError):
    """The answer was cut at the token limit (finish_reason "length"): never parsed or cached.
    Asking again the same way gets the same cut, so the caller asks for less (a smaller pack)."""


@dataclass
class StageCounters:
    """Per stage. Tokens count real calls only (what was paid for), not cache hits."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    repairs: int = 0
    failures: int = 0
    truncations: int = 0


# ---------------------------------------------------------------------------- JSON repair


def _fix_outside_strings(text: str, single_quotes: bool) -> str:
    """Drop trailing commas, map Python literals, and (optionally) turn 'x' strings into "x"
    — all outside double-quoted strings, so string contents are never touched."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif ch == "'" and single_quotes:
            j, buf = i + 1, []
            while j < n and text[j] != "'":
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j : j + 2] if text[j + 1] != "'" else "'")
                    j += 2
                    continue
                buf.append('\\"' if text[j] == '"' else text[j])
                j += 1
            out.append('"' + "".join(buf) + '"')
            i = j + 1
        elif ch == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] in "}]":
                i += 1  # trailing comma
                continue
            out.append(ch)
            i += 1
        elif ch.isalpha():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append({"True": "true", "False": "false", "None": "null"}.get(word, word))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)```", re.S)


def repair_json(text: str) -> str:
    """Best-effort near-JSON -> JSON text: strip code fences, keep the outermost {...}/[...],
    drop trailing commas, map True/False/None; single quotes are converted only when the text
    still does not parse (an apostrophe inside a "..." string is safe either way)."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        end = body.rfind("}" if body[start] == "{" else "]")
        if end > start:
            body = body[start : end + 1]
    fixed = _fix_outside_strings(body, single_quotes=False)
    try:
        json.loads(fixed, strict=False)
        return fixed
    except ValueError:
        return _fix_outside_strings(body, single_quotes=True)


def parse_json(text: str, schema: type[M]) -> tuple[M | None, bool, str]:
    """(object or None, whether repair was needed, error text)."""
    try:
        return schema.model_validate_json(text), False, ""
    except ValidationError as exc:
        first_error = _short(exc)
    try:
        data = json.loads(repair_json(text), strict=False)
        return schema.model_validate(data), True, ""
    except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
        return None, True, _short(exc) if isinstance(exc, ValidationError) else first_error


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()[:3]
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'root'}: {e['msg']}" for e in errs)
    return str(exc)[:200]


# ---------------------------------------------------------------------------- disk cache


class DiskCache:
    """One JSON file per key: `<root>/<key[:2]>/<key>.json`. Written to a temp file in the same
    folder then `os.replace`d, so a reader sees a whole entry or none; stray temp files (a
    killed writer) are never read. An unreadable entry is a miss. A hit refreshes the entry's
    mtime: entries no kept index version used are swept after a publish (store.sweep_cache),
    so answers drawn from a deleted document do not stay on disk."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.used: list[str] = []  # keys read or written, in order: what a shard's run used

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self.path(key)
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):
            return None
        if not (isinstance(entry, dict) and isinstance(entry.get("text"), str)):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        self.used.append(key)
        return entry

    def put(self, key: str, entry: dict) -> None:
        text = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        atomic_write_text(self.path(key), text, fsync=True)
        self.used.append(key)


def cache_key(model: str, messages: list[dict], params: dict[str, Any]) -> str:
    """sha256 of (model, messages, params) — never the key or the endpoint."""
    blob = json.dumps(
        {"model": model, "messages": messages, "params": params},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- client


class LlmClient:
    """Chat calls against an OpenAI-compatible endpoint; see the module docstring.

    `counters` holds one StageCounters per stage name. The SDK client and the semaphore are
    bound to the running event loop and rebuilt when it changes (each `run_many` uses a fresh
    loop).
    """

    def __init__(
        self,
        settings: LlmSettings,
        cache_dir: str | Path | None,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        retry_refused: bool = True,
    ) -> None:
        self.settings = settings
        # False at query time: a refused connection (no server) fails at once, not after retries.
        self.retry_refused = retry_refused
        self.cache = DiskCache(cache_dir) if (cache_dir is not None and settings.cache) else None
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.counters: dict[str, StageCounters] = {}
        self._model_tokens: dict[tuple[str, str], list[int]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._sem: asyncio.Semaphore | None = None
        self._inflight: dict[str, asyncio.Future] = {}
        self._rng = random.Random()

    def __repr__(self) -> str:
        return f"LlmClient(model={self.settings.chat_model!r}, cache={self.cache is not None})"

    # -- plumbing
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

    def _request(self, messages: list[dict], params: dict[str, Any]) -> tuple[str, dict, str]:
        params = dict(params)
        model = params.pop("model", None) or self.settings.chat_model
        merged = {"temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens}
        merged.update(params)
        return model, merged, cache_key(model, messages, merged)

    def _delay(self, attempt: int, exc: Exception) -> float:
        if isinstance(exc, openai.RateLimitError):
            after = _retry_after(exc.response.headers)
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
            except _RETRYABLE as exc:
                await self._retry_or_raise(stage, attempt, exc, final=False)
            except _FATAL as exc:
                counters.failures += 1
                raise self._fatal(exc, model) from None
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
        if not self.retry_refused and _refused(exc):
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
        reason = _describe(exc)
        key = self.settings.api_key.get_secret_value() if self.settings.api_key else ""
        return reason.replace(key, "***") if key else reason

    def _fatal(self, exc: openai.APIStatusError, model: str) -> LlmFatalError:
        """What to check, naming the setting and the endpoint's host, never the key."""
        host = _host(self.settings.base_url)
        status = f"HTTP {exc.status_code}"
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return LlmAuthError(
                f"the LLM endpoint {host} refused the API key ({status}): check OPENAI_API_KEY "
                "(or llm.api_key) and llm.base_url / OPENAI_BASE_URL"
            )
        return LlmFatalError(
            f"the LLM endpoint {host} answered {status} (not found) for model "
            f"{model!r}: check llm.chat_model and llm.base_url / "
            "OPENAI_BASE_URL (an OpenAI-compatible base URL usually ends in /v1)"
        )

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
            prompt = usage.prompt_tokens if usage else _estimate(messages)
            completion = usage.completion_tokens if usage else count_tokens(text)
            self._account(stage, model, prompt, completion)
            if choice is not None and choice.finish_reason == "length":
                counters.truncations += 1
                if remember_cut and self.cache is not None:
                    self.cache.put(
                        key, {**_entry(model, stage, "", prompt, completion), "cut": True}
                    )
                raise LlmTruncated(
                    f"answer cut at the token limit ({completion} of max_tokens "
                    f"{merged.get('max_tokens')})"
                )
            value, ok = check(text)
            if ok and self.cache is not None:
                self.cache.put(key, _entry(model, stage, text, prompt, completion))
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
        are cached, so a re-run asks again what failed. An answer cut at the token limit
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
            return obj
        counters.failures += 1
        raise LlmError(f"invalid JSON for {schema.__name__} after one re-ask: {error}")

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
                    async for chunk in resp:
                        usage = chunk.usage or usage
                        for choice in chunk.choices:
                            finish = choice.finish_reason or finish
                            if choice.delta and choice.delta.content:
                                pieces.append(choice.delta.content)
                                yield choice.delta.content
                break
            except _RETRYABLE as exc:
                await self._retry_or_raise(stage, attempt, exc, bool(pieces), "stream: ")
            except _FATAL as exc:
                counters.failures += 1
                raise self._fatal(exc, model) from None
            except openai.OpenAIError as exc:
                counters.failures += 1
                raise LlmError(f"stream: {self._describe(exc)}") from None
        text = "".join(pieces)
        prompt = usage.prompt_tokens if usage else _estimate(messages)
        completion = usage.completion_tokens if usage else count_tokens(text)
        self._account(stage, model, prompt, completion)
        if finish == "length":
            counters.truncations += 1
            log.warning("llm %s: streamed answer cut at the token limit; not cached", stage)
        elif self.cache is not None:
            self.cache.put(key, _entry(model, stage, text, prompt, completion))

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
        """Totals and per-stage counters (plus USD cost where `prices` covers the model), as
        plain values fit for Dagster metadata. No key, no endpoint."""
        totals = StageCounters()
        by_stage: dict[str, dict[str, Any]] = {}
        for stage, c in sorted(self.counters.items()):
            by_stage[stage] = asdict(c)
            for field, value in asdict(c).items():
                setattr(totals, field, getattr(totals, field) + value)
        out: dict[str, Any] = {f"llm_{k}": v for k, v in asdict(totals).items()}
        out["llm_model"] = self.settings.chat_model
        prices = self.settings.prices
        if prices:
            total_cost, unpriced = 0.0, set()
            for (stage, model), (p, c) in sorted(self._model_tokens.items()):
                if model not in prices:
                    unpriced.add(model)
                    continue
                cost = (p * prices[model][0] + c * prices[model][1]) / 1e6
                by_stage[stage]["cost_usd"] = round(by_stage[stage].get("cost_usd", 0.0) + cost, 6)
                total_cost += cost
            out["llm_cost_usd"] = round(total_cost, 6)
            if unpriced:
                out["llm_unpriced_models"] = ", ".join(sorted(unpriced))
        out["llm_by_stage"] = by_stage
        return out


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


def _any_text(text: str) -> tuple[str, bool]:
    """A plain-text answer is always usable (and so cacheable)."""
    return text, True


def _entry(model: str, stage: str, text: str, prompt: int, completion: int) -> dict:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"model": model, "stage": stage, "text": text, "usage": usage}


def _estimate(messages: list[dict]) -> int:
    return sum(count_tokens(m["content"]) for m in messages if isinstance(m.get("content"), str))


def _retry_after(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value is not None:
            try:
                return max(0.0, float(value) / scale)
            except ValueError:
                continue  # an HTTP date: fall back to backoff
    return None


def _refused(exc: BaseException | None) -> bool:
    """Whether a ConnectionRefusedError lies in the exception's cause chain."""
    while exc is not None:
        if isinstance(exc, ConnectionRefusedError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _describe(exc: Exception) -> str:
    """A short reason without request details (no headers, so no key)."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        nested = body.get("error")
        message = (nested if isinstance(nested, dict) else body).get("message")
        detail = f": {' '.join(str(message).split())[:200]}" if message else ""
        return f"HTTP {exc.status_code} {type(exc).__name__}{detail}"
    return type(exc).__name__


def _host(base_url: str | None) -> str:
    """host[:port] of the endpoint (no scheme, path or credentials), for error messages."""
    parts = urlsplit(base_url or "https://api.openai.com/v1")
    host = parts.hostname or "?"
    return f"{host}:{parts.port}" if parts.port else host

"""How a failed LLM call is told apart and reported.

Why its own module: every stage that calls a model catches these exceptions (LlmError per item,
LlmFatalError for the whole run: a refused key, an unknown model, an endpoint never reached;
LlmTruncated for an answer cut at the token limit), and the client classifies openai's errors
into them. The helpers here describe a failure without request details (no headers, so never
the api key) and name only the endpoint's host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import openai


def fatal_types() -> tuple[type[Exception], ...]:
    """openai's errors no retry can fix. Functions, not constants: importing openai costs
    ~0.45 s, and every process that loads the asset graph (each step's own, above
    `storage.multiprocess_from_documents`) imports this module, offline runs included."""
    import openai

    return (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError)


def retryable_types() -> tuple[type[Exception], ...]:
    """openai's errors worth another try (timeouts, lost connections, 429s, 5xx)."""
    import openai

    return (
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


class LlmUnreachableError(LlmFatalError):
    """No call reached the endpoint (connection refused, unknown host, connect timeout) and
    none ever had: a wrong `llm.base_url`, or a server that is not running."""


class LlmTruncated(LlmError):
    """The answer was cut at the token limit (finish_reason "length"): never parsed or cached.
    Asking again the same way gets the same cut, so the caller asks for less (a smaller pack)."""


def fatal_error(exc: openai.APIStatusError, model: str, base_url: str | None) -> LlmFatalError:
    """What to check, naming the setting and the endpoint's host, never the key."""
    import openai

    host = endpoint_host(base_url)
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


def retry_after(headers: Any) -> float | None:
    """Seconds a 429 asks to wait (Retry-After-Ms or Retry-After), or None."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value is not None:
            try:
                return max(0.0, float(value) / scale)
            except ValueError:
                continue  # an HTTP date: fall back to backoff
    return None


def unreachable_error(base_url: str | None, reason: str) -> LlmUnreachableError:
    """What to check, naming the endpoint's host (never the key)."""
    return LlmUnreachableError(
        f"the LLM endpoint {endpoint_host(base_url)} cannot be reached ({reason}) and no call "
        "has reached it: check llm.base_url / OPENAI_BASE_URL and that the server is running"
    )


def unreachable_reason(exc: BaseException | None) -> str | None:
    """Why a request never reached a server (from the exception's cause chain), or None when
    one was there: a read timeout or a dropped answer means the endpoint is reachable."""
    import socket

    import httpx

    chain = []
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for kind, reason in (
        (ConnectionRefusedError, "connection refused"),
        (socket.gaierror, "unknown host"),
        (httpx.ConnectTimeout, "connect timeout"),
        (httpx.ConnectError, "cannot connect"),
    ):
        if any(isinstance(e, kind) for e in chain):
            return reason
    return None


def describe_error(exc: Exception) -> str:
    """A short reason without request details (no headers, so no key)."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        nested = body.get("error")
        message = (nested if isinstance(nested, dict) else body).get("message")
        detail = f": {' '.join(str(message).split())[:200]}" if message else ""
        return f"HTTP {exc.status_code} {type(exc).__name__}{detail}"
    return type(exc).__name__


def endpoint_host(base_url: str | None) -> str:
    """host[:port] of the endpoint (no scheme, path or credentials), for error messages."""
    parts = urlsplit(base_url or "https://api.openai.com/v1")
    host = parts.hostname or "?"
    return f"{host}:{parts.port}" if parts.port else host

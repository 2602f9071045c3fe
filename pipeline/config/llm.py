"""Settings of the OpenAI-compatible LLM endpoint (LLM mode), its key kept a SecretStr."""

from __future__ import annotations

import os

from pydantic import Field, SecretStr

from pipeline.config.section import Section


def _env_secret(name: str) -> SecretStr | None:
    value = os.environ.get(name)
    return SecretStr(value) if value else None


class LlmSettings(Section):
    """LLM mode: any OpenAI-compatible endpoint. The key is a SecretStr so it never shows in a
    repr, a log line or Dagster metadata; it is read from env/config, never written anywhere."""

    enabled: bool = Field(False, description="offline default; true: the LLM extracts/reports")
    base_url: str | None = Field(
        default_factory=lambda: os.environ.get("OPENAI_BASE_URL") or None,
        description="OpenAI-compatible base URL (default: $OPENAI_BASE_URL, else api.openai.com)",
    )
    api_key: SecretStr | None = Field(
        default_factory=lambda: _env_secret("OPENAI_API_KEY"),
        description="default: $OPENAI_API_KEY; local servers accept any value",
    )
    chat_model: str = "gpt-4o-mini"
    temperature: float = 0.0
    max_tokens: int = Field(
        4096, description="answer limit per call; extraction packs are sized to fit in it"
    )
    timeout_s: float = Field(60.0, description="per HTTP request")
    max_retries: int = Field(5, description="on timeouts, connection errors, 429 and 5xx")
    concurrency: int = Field(8, description="requests in flight at most, per client")
    cache: bool = Field(True, description="disk cache of every call (needs a cache folder)")
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="model -> (USD per 1M prompt tokens, USD per 1M completion tokens)",
    )

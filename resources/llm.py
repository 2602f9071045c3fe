"""The LLM client as a resource: one per process and settings, its call cache under the
output folder (so a killed run resumes without repeating a completed call)."""

# No `from __future__ import annotations`: Dagster reads the `config` annotation as a class to
# accept the launch-configured `docgraph` resource there (see resources.config).
from pathlib import Path

from dagster import ConfigurableResource

from pipeline.config import Settings
from resources.config import DocgraphConfig

_CLIENTS: dict[str, object] = {}


class LlmResource(ConfigurableResource):
    config: DocgraphConfig  # the run's `docgraph` resource (build_resources)

    def get(self):
        from pipeline.llm.client import LlmClient

        settings = self.config.settings()
        if settings.llm.api_key is None and not settings.llm.base_url:
            raise ValueError(
                "LLM mode needs an endpoint: set OPENAI_API_KEY for OpenAI, or llm.base_url "
                "(or OPENAI_BASE_URL) for a local server such as vLLM, Ollama or "
                "`docgraph fake-llm`"
            )
        cache_dir = Path(settings.output_dir) / "cache" / "llm"
        # The key has no secret in it: the JSON of the settings holds the key as "**********".
        key = f"{cache_dir}|{settings.llm.model_dump_json()}"
        if key not in _CLIENTS:
            _CLIENTS[key] = LlmClient(settings.llm, cache_dir)
        return _CLIENTS[key]


def llm_mode(settings: Settings) -> bool:
    """Whether a run calls the LLM (extraction, summaries, reports): the steps that then ask
    this resource for its client."""
    return settings.llm.enabled or settings.extraction.extractor == "llm"

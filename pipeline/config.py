"""Settings: every default declared once, here.

Precedence (lowest first): these defaults, a YAML file (`DOCGRAPH_CONFIG` or an
explicit path), environment variables `DOCGRAPH_<SECTION>__<FIELD>` (or
`DOCGRAPH_<FIELD>` for top-level fields), then explicit overrides from code.
pydantic-settings reads the file and the variables; every model forbids unknown keys, and a
DOCGRAPH_ variable that sets nothing is refused too, so a typo is a ConfigError (one line,
with the nearest valid name) instead of a silently ignored setting.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from importlib.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

PACKAGED_MODEL = "packaged:all-MiniLM-L6-v2"


class ConfigError(ValueError):
    """A settings mistake, as one line naming the key, the file or variable, and a fix."""


class _Section(BaseModel):
    """A settings model: an unknown key is an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


class ChunkingSettings(_Section):
    chunk_size: int = Field(300, description="target max tokens (o200k) per text unit")
    overlap: int = Field(30, description="tokens of trailing sentences repeated at the next unit")
    min_size: int = Field(
        100,
        description="content-defined cuts are at least this many tokens apart (the anchor "
        "window); only forced splits of an over-long span or the last unit may be shorter",
    )
    cut_divisor: int = Field(
        3,
        description="a sentence end inside a paragraph is a cut candidate when its hash % "
        "divisor == 0 (paragraph, page and heading boundaries always are)",
    )
    method: Literal["smart", "simple", "semantic"] = Field(
        "smart",
        description="smart: chunks inside sections with a section-path prefix, tables whole, "
        "tiny sections merged; simple: the document text alone; semantic: smart's structure, "
        "cut where adjacent sentences' embeddings diverge (embeds every sentence: slow on CPU)",
    )
    heading_prefix: bool = Field(
        True,
        description="smart/semantic: start each unit with '# section path' (counted in chunk_size)",
    )
    semantic_percentile: float = Field(
        10.0,
        description="semantic: a boundary is a topic cut when its adjacent-sentence cosine is "
        "at or below this percentile of the section's boundaries",
    )
    semantic_window: int = Field(
        2, description="semantic: sentences averaged on each side of a boundary"
    )


class ExtractionSettings(_Section):
    extractor: str = "nlp"
    max_entities_per_unit: int = 40
    keyphrases_per_unit: int = 5
    keyphrase_method: str = Field(
        "rake", description="CONCEPT keyphrases: 'rake' (fast, default) or 'yake' (~50x slower)"
    )
    max_relation_distance: int = Field(
        1, description="relate entities in the same sentence or up to N sentences apart"
    )
    llm_pack_tokens: int = Field(
        2400, description="llm: short units of one document are packed into one call up to this"
    )
    llm_answer_ratio: float = Field(
        4.0,
        description="llm: expected answer tokens per text token; a pack holds at most "
        "llm.max_tokens / this many text tokens so its answer fits (measured: 3.1 on prose, "
        "10-14 on dense text, whose cut answers are split and retried; see extract/llm.py)",
    )
    llm_pack_max_units: int = Field(16, description="llm: at most this many units per call")
    gleanings: int = Field(0, description="llm: extra 'what was missed?' rounds per call")
    prompt_path: str | None = Field(
        None,
        description="llm: a file replacing extract_graph.txt, or a folder of <name>.txt prompt "
        "overrides",
    )


class GraphSettings(_Section):
    description_max_tokens: int = 150
    max_cluster_size: int = 10
    seed: int = 42
    max_levels: int = 4
    llm_summary_min_descriptions: int = Field(
        4, description="llm: items with more distinct raw descriptions than this get an LLM summary"
    )
    incremental_max_change: float = Field(
        0.1,
        description="re-runs: when at most this fraction of the previously clustered entities is "
        "new or gone, kept entities keep their communities (new ones join their most strongly "
        "linked neighbour's); above it, or without a previous table, Leiden runs from scratch. "
        "Also applies to the change accumulated since the last full recompute (counted in "
        "communities_state.json of the index version), and a change of seed, max_cluster_size or "
        "max_levels recomputes; 0: always recompute",
    )


class ReportSettings(_Section):
    max_findings: int = 5
    max_report_tokens: int = 600
    llm_min_size: int = Field(
        10,
        description="llm: smaller communities keep their extractive report (no call); 10 keeps "
        "a whole index within ~1.5 calls per 1k corpus tokens",
    )
    llm_context_tokens: int = Field(1500, description="llm: context budget of one report prompt")
    llm_reuse_max_change: float = Field(
        0.2,
        description="llm re-runs: a community whose report context differs from the one its last "
        "LLM report was written from by at most this fraction (added + removed lines over "
        "all lines) keeps that report, with no call; 0: re-report on any change",
    )


class EmbeddingSettings(_Section):
    model: str = Field(
        PACKAGED_MODEL, description="sentence-transformers name or path, or the packaged model"
    )
    batch_size: int = Field(
        16,
        description="texts per forward pass; on CPU 16 is as fast as 64 (less padding) and "
        "peaks ~370 MB lower (1,000 MuSiQue passages: 12.6 s / 837 MB vs 15.0 s / 1,204 MB)",
    )
    device: str = "cpu"
    process: Literal["worker", "inline"] = Field(
        "worker",
        description="where an index runs the model: worker: a child process (the index's own "
        "process never loads torch, ~450 MB less, and it can go on while texts embed); "
        "inline: in the index's process. Queries always embed inline.",
    )
    entity_vectors: Literal["name+context", "text"] = Field(
        "name+context",
        description="name+context: the embedded title plus the mean of its text units' vectors;"
        " text: embed 'title (TYPE): description' (several times slower on CPU)",
    )
    relationship_vectors: Literal["context", "text"] = Field(
        "context",
        description="context: source + target entity vectors + mean of its text units' vectors"
        " (no model call); text: embed 'source -> target: description'",
    )
    node_vectors: Literal["derived", "text"] = Field(
        "derived",
        description="derived: PARAGRAPH/LIST_ITEM nodes take the mean vector of the text units "
        "holding them (no model call), other node types are embedded; text: embed every node",
    )
    report_vectors: Literal["context", "text"] = Field(
        "context",
        description="context: mean of the member entities' vectors (no model call);"
        " text: embed the report's full content",
    )


class SameTopicSettings(_Section):
    enabled: bool = True
    min_similarity: float = Field(0.6, description="cosine of two sections' vectors to link")
    max_connections: int = Field(5, description="SAME_TOPIC edges per section at most")
    cross_doc_only: bool = Field(True, description="link sections of different documents only")
    vectors: Literal["units", "text"] = Field(
        "units",
        description="units: a section's vector is the mean of its text units' vectors (no model"
        " call); text: embed its path and first `text_tokens` tokens",
    )
    text_tokens: int = Field(
        128, description="text: a section's vector embeds its path and its first N tokens"
    )


class QuerySettings(_Section):
    top_k_units: int = 10
    top_k_entities: int = 10
    max_context_tokens: int = 8000
    text_unit_prop: float = 0.5
    community_prop: float = 0.2
    global_top_reports: int = 20
    global_dynamic_threshold: float = Field(
        1.0, description="global, level=None: descend into communities rated at least this"
    )
    local_dense_seeds: int = Field(3, description="top dense units that seed local PageRank")
    local_damping: float = Field(0.85, description="local PageRank continuation probability")
    local_graph_weight: float = Field(
        0.7,
        description="local ranking = w * (PageRank / max) ** 0.25 + (1 - w) * cosine",
    )
    local_context_tokens: int = Field(
        2500,
        ge=1,
        description="local: context budget in tokens; the ranked text units are paid for "
        "first (MuSiQue R@5 by budget: benchmarks/retrieval.py)",
    )
    expand_max_hops: int = Field(2, description="expand: graph hops from the vector seeds")
    expand_max_nodes: int = Field(60, description="expand: nodes kept after expansion")
    focus_budget_tokens: int = Field(2000, description="focus: token budget of the context")
    flow_max_nodes: int = Field(15, description="flow: entities in the context at most")
    flow_max_edges: int = Field(20, description="flow: relationships in the context at most")


class StructureSettings(_Section):
    pdf_structure: Literal["layout", "heuristic"] = Field(
        "layout",
        description="how PDF structure is read: 'layout' classes page regions (headings, "
        "captions, footnotes, tables, page headers/footers, margin text) and orders them with "
        "pymupdf's layout model (~0.3-0.5 s of CPU a page; long PDFs over worker processes); "
        "'heuristic': font-size and position rules, ~10-20 ms a page, for very large corpora",
    )
    pdf_tables: bool = Field(
        False,
        description="heuristic path: detect tables with pymupdf find_tables (~0.15 s/page; "
        "the time spent is kept in the document section's metadata); the layout path takes "
        "tables, with their cells, from the model",
    )
    header_footer_margin: float = Field(
        0.12, description="top/bottom page fraction where running headers/footers are looked for"
    )
    header_footer_min_repeat: float = Field(
        0.3,
        description="a margin line repeating (digits ignored) on this share of pages is a "
        "running header/footer",
    )
    heading_max_words: int = Field(20, description="longer lines are never headings")
    footnote_zone: float = Field(
        0.4, description="footnotes are looked for in this bottom fraction of the page"
    )
    ocr: Literal["auto", "off"] = Field(
        "auto",
        description="scanned (image-only) PDF pages: 'auto' OCRs them when the optional OCR "
        "engine is installed (pip install 'docgraph[ocr]'; models in the package, CPU, ~seconds "
        "a page), else they are skipped with the reason; 'off' never OCRs",
    )


class StorageSettings(_Section):
    keep_versions: int = Field(
        2,
        ge=1,
        description="published index versions kept in <output>/versions (the current one and "
        "the newest before it); older ones, and the text of deleted documents in them, are "
        "deleted after each publish",
    )
    lock_wait_s: float = Field(
        0.0,
        ge=0,
        description="a run that finds another run writing the same output folder waits this "
        "long for it, then stops with an error naming that run",
    )
    shards: int = Field(
        16,
        ge=1,
        le=4096,
        description="document shards (the Dagster partitions of the per-document stages): a "
        "document's shard is a hash of its relative path, so a change re-runs only its shard; "
        "changing the count re-indexes every shard once",
    )
    multiprocess_from_documents: int = Field(
        20_000,
        ge=0,
        description="`docgraph index` over this many input files or more runs each step in a "
        "process of its own, one at a time (Dagster's multiprocess executor), unless "
        "$DOCGRAPH_EXECUTOR says otherwise: a process then holds one step's memory, not what "
        "every step before it left (40k documents: 1.39 GB instead of 1.54 GB), for a few "
        "seconds a step; 0: never",
    )
    mirror_dir: str | None = Field(
        None,
        description="an object-store output_dir (s3://bucket/prefix) is worked in a local "
        "mirror folder under this one (default $XDG_CACHE_HOME/docgraph/mirrors): runs "
        "pull the current version into it and publish it back (pipeline.storage.remote)",
    )


def _env_secret(name: str) -> SecretStr | None:
    value = os.environ.get(name)
    return SecretStr(value) if value else None


class LlmSettings(_Section):
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


class Settings(_Section):
    input_dir: str = "data/input"
    output_dir: str = "data/output"
    chunking: ChunkingSettings = ChunkingSettings()
    extraction: ExtractionSettings = ExtractionSettings()
    graph: GraphSettings = GraphSettings()
    reports: ReportSettings = ReportSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    query: QuerySettings = QuerySettings()
    same_topic: SameTopicSettings = SameTopicSettings()
    structure: StructureSettings = StructureSettings()
    storage: StorageSettings = StorageSettings()
    llm: LlmSettings = Field(default_factory=LlmSettings)

    @model_validator(mode="after")
    def _object_store_output(self) -> Settings:
        """`output_dir: s3://bucket/prefix` becomes its local mirror folder, which records the
        URL: every writer (tables, Lance, caches, the lock) works there unchanged, and runs
        pull from and publish to the store (pipeline.storage.remote)."""
        from pipeline.storage import remote

        if remote.is_url(self.output_dir):
            self.output_dir = str(remote.mirror_for(self.output_dir, self.storage.mirror_dir))
        return self


def _deep_update(base: dict[str, Any], upd: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_update(out[k], v)
        else:
            out[k] = v
    return out


# ---------------------------------------------------------------------------- loading

ENV_PREFIX = "DOCGRAPH_"
ENV_CONFIG = "DOCGRAPH_CONFIG"  # the YAML file's path, not a setting
# DOCGRAPH_ variables that are no settings: read by the query notebook itself, and the
# Dagster executor of the index job (resources.executors: chosen when the job is defined).
ENV_NOT_SETTINGS = frozenset(
    {ENV_CONFIG, "DOCGRAPH_INDEX", "DOCGRAPH_QUESTION", "DOCGRAPH_EXECUTOR"}
)
ENV_NESTED = "__"
_SHOWN_INPUT_CHARS = 40


class _SettingsSources(Settings, BaseSettings):
    """Settings' fields as pydantic-settings reads them: `DOCGRAPH_` variables, `__` nesting,
    JSON for dicts; values are validated by Settings itself, so there is one set of models."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_NESTED, extra="forbid"
    )


class _EnvSource(EnvSettingsSource):
    """The env source over an explicit mapping (tests, callers) instead of os.environ."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(_SettingsSources)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


class _YamlSource(YamlConfigSettingsSource):
    """The YAML source, with malformed files as one line (file, line, column, problem)."""

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            data = super()._read_file(file_path)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"config file {file_path}{where}: {problem}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {file_path} is not UTF-8 text") from None
        except OSError as exc:
            raise ConfigError(f"cannot read config file {file_path}: {exc.strerror}") from None
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise ConfigError(
                f"config file {file_path} must hold a mapping of settings, not a {kind}"
            )
        return data


def _section_model(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _model_at(path: tuple[str, ...]) -> type[BaseModel] | None:
    """The settings model holding the keys at `path` (() is Settings), or None."""
    model: type[BaseModel] | None = Settings
    for part in path:
        field = model.model_fields.get(part) if model else None
        model = _section_model(field.annotation) if field else None
    return model


def _env_names() -> dict[str, tuple[str, ...]]:
    """Every valid DOCGRAPH_ variable name -> the settings path it sets."""
    names: dict[str, tuple[str, ...]] = {}
    for name, field in Settings.model_fields.items():
        names[f"{ENV_PREFIX}{name}".upper()] = (name,)
        for sub in (section := _section_model(field.annotation)) and section.model_fields or ():
            names[f"{ENV_PREFIX}{name}{ENV_NESTED}{sub}".upper()] = (name, sub)
    return names


def _check_env_names(environ: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """{variable: settings path} of the DOCGRAPH_ variables set; ConfigError for one that sets
    nothing (pydantic-settings would ignore it silently), naming the nearest valid one."""
    valid = _env_names()
    found: dict[str, tuple[str, ...]] = {}
    for var in environ:
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX) or upper in ENV_NOT_SETTINGS:
            continue
        if upper not in valid:
            near = difflib.get_close_matches(upper, [*valid, ENV_CONFIG], n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}?" if near else "see pipeline/config.py"
            raise ConfigError(f"unknown environment variable {var} ({hint})")
        found[var] = valid[upper]
    return found


def _read_yaml(path: str | Path) -> dict[str, Any]:
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"config file {file} does not exist")
    if not file.is_file():
        raise ConfigError(f"config file {file} is not a file")
    data = _YamlSource(_SettingsSources, yaml_file=file)()
    # `llm:` with every line commented out is None: the section keeps its defaults.
    return {k: v for k, v in data.items() if not (v is None and _model_at((k,)))}


def _read_env(environ: Mapping[str, str], env_vars: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    try:
        return _EnvSource(environ)()
    except SettingsError:
        bad = sorted(var for var in env_vars if not _is_json(environ[var]))
        raise ConfigError(
            f"environment variable {' or '.join(bad) or ENV_PREFIX + '...'} is not valid JSON "
            "(a dict setting or a whole section is given as JSON)"
        ) from None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _has(data: Any, path: tuple[Any, ...]) -> bool:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _origin(loc: tuple[Any, ...], layers: list[tuple[str, dict[str, Any]]], env_vars) -> str:
    """Where the winning value at `loc` came from: overrides, a variable, or the YAML file."""
    for where, data in reversed(layers):
        if where == "env":
            for var, path in env_vars.items():
                if loc[: len(path)] == path:
                    return f"from {var}"
        elif _has(data, loc):
            return f"in {where}"
    return "in the defaults"


def _shown_input(loc: tuple[Any, ...], value: Any) -> str:
    """' (got ...)' for a short scalar of a known, non-secret field; '' otherwise (an unknown
    key may be a misspelled api_key, a whole section may be the key itself)."""
    model = _model_at(tuple(str(p) for p in loc[:-1]))
    field = model.model_fields.get(str(loc[-1])) if model and loc else None
    secret = field is None or "SecretStr" in str(field.annotation)
    if secret or _section_model(field.annotation) or not isinstance(value, str | int | float):
        return ""
    return f" (got {str(repr(value))[:_SHOWN_INPUT_CHARS]})"


def _explain(exc: ValidationError, layers, env_vars) -> str:
    """A ValidationError as one line per problem (the first three): path, origin, reason."""
    lines = []
    for err in exc.errors()[:3]:
        loc = tuple(err["loc"])
        dotted = ".".join(map(str, loc))
        where = _origin(loc, layers, env_vars)
        if err["type"] == "extra_forbidden":
            model = _model_at(tuple(map(str, loc[:-1])))
            near = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
            hint = f" (did you mean {'.'.join([*map(str, loc[:-1]), near[0]])}?)" if near else ""
            lines.append(f"unknown setting {dotted} {where}{hint}")
        else:
            lines.append(f"setting {dotted} {where}: {err['msg']}{_shown_input(loc, err['input'])}")
    more = exc.error_count() - len(lines)
    return "; ".join(lines) + (f" (and {more} more)" if more > 0 else "")


def load_settings(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Defaults < YAML (`path`, else $DOCGRAPH_CONFIG) < DOCGRAPH_ variables < `overrides`.
    Any mistake (unknown key or variable, malformed YAML, wrong type) is a ConfigError."""
    environ = os.environ if environ is None else environ
    env_vars = _check_env_names(environ)
    path = path or environ.get(ENV_CONFIG)
    layers = [
        (str(path), _read_yaml(path) if path else {}),
        ("env", _read_env(environ, env_vars)),
        ("overrides", overrides or {}),
    ]
    data: dict[str, Any] = {}
    for _, layer in layers:
        data = _deep_update(data, layer)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, layers, env_vars)) from None

"""Settings: every default declared once, in this package.

Precedence (lowest first): these defaults, a YAML file (`DOCGRAPH_CONFIG` or an
explicit path), environment variables `DOCGRAPH_<SECTION>__<FIELD>` (or
`DOCGRAPH_<FIELD>` for top-level fields), then explicit overrides from code.
pydantic-settings reads the file and the variables; every model forbids unknown keys, and a
DOCGRAPH_ variable that sets nothing is refused too, so a typo is a ConfigError (one line,
with the nearest valid name) instead of a silently ignored setting.

This package is the one import point of the settings: `Settings`, `load_settings` and the
loading live here; each stage group's section models live in a module of their own
(documents, graph, vectors, query, storage, serve, llm) and are imported from here.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from pipeline.config.documents import ChunkingSettings, ExtractionSettings, StructureSettings
from pipeline.config.graph import GraphSettings, ReportSettings
from pipeline.config.llm import LlmSettings
from pipeline.config.query import QuerySettings
from pipeline.config.section import Section
from pipeline.config.serve import ServeSettings
from pipeline.config.storage import StorageSettings
from pipeline.config.vectors import PACKAGED_MODEL, EmbeddingSettings, SameTopicSettings

__all__ = [
    "PACKAGED_MODEL",
    "ChunkingSettings",
    "ConfigError",
    "EmbeddingSettings",
    "ExtractionSettings",
    "GraphSettings",
    "LlmSettings",
    "QuerySettings",
    "ReportSettings",
    "SameTopicSettings",
    "ServeSettings",
    "Settings",
    "StorageSettings",
    "StructureSettings",
    "load_settings",
]


class ConfigError(ValueError):
    """A settings mistake, as one line naming the key, the file or variable, and a fix."""


class Settings(Section):
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
    serve: ServeSettings = ServeSettings()
    llm: LlmSettings = Field(default_factory=LlmSettings)

    @model_validator(mode="after")
    def _object_store_output(self) -> Settings:
        """`output_dir: s3://bucket/prefix` becomes its local mirror folder, which records the
        URL: every writer (tables, Lance, caches, the lock) works there unchanged, and runs
        pull from and publish to the store (pipeline.storage.remote)."""
        from pipeline.storage import mirror

        if mirror.is_url(self.output_dir):
            self.output_dir = str(mirror.mirror_for(self.output_dir, self.storage.mirror_dir))
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
# DOCGRAPH_ variables that are no settings: read by the query notebook itself, the Dagster
# executor of the index job (resources.executors: chosen when the job is defined), and the
# test suite's skip policy (tests/conftest.py; .ci/run sets it).
ENV_NOT_SETTINGS = frozenset(
    {
        ENV_CONFIG,
        "DOCGRAPH_INDEX",
        "DOCGRAPH_QUESTION",
        "DOCGRAPH_EXECUTOR",
        "DOCGRAPH_STRICT_SKIPS",
    }
)
ENV_NESTED = "__"
_SHOWN_INPUT_CHARS = 40
_NEAR_CUTOFF = 0.6  # difflib's ratio a suggested name must reach


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


def _nearest_env_name(var: str, valid: Mapping[str, Any]) -> str | None:
    """The valid variable a misspelt one meant. DOCGRAPH_<SECTION>__<FIELD>: the closest
    section first, then the closest field of that section (DOCGRAPH_CHUNKNG__SIZE: CHUNKING,
    then CHUNK_SIZE), since a field name alone is often closer to another section's field;
    otherwise, or when nothing is close, the closest whole name."""
    section, nested, field = var.removeprefix(ENV_PREFIX).partition(ENV_NESTED)
    sections = {
        name.upper(): [name.upper()]
        for name, info in Settings.model_fields.items()
        if _section_model(info.annotation)
    }
    near_section = _closest(section, sections) if nested else None
    if near_section:
        fields = _model_at((near_section.lower(),)).model_fields
        near_field = _closest(field, _field_spellings(near_section, fields))
        if near_field:
            return f"{ENV_PREFIX}{near_section}{ENV_NESTED}{near_field}"
    near = difflib.get_close_matches(var, [*valid, ENV_CONFIG], n=1, cutoff=_NEAR_CUTOFF)
    return near[0] if near else None


def _field_spellings(section: str, fields: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each field's upper-case name, and that name without the words that repeat the
    section's (CHUNK_SIZE of CHUNKING is also SIZE): users leave them out of the variable."""
    out = {}
    for name in fields:
        upper = name.upper()
        words = [w for w in upper.split("_") if not (len(w) >= 3 and section.startswith(w))]
        out[upper] = [upper, "_".join(words)] if words else [upper]
    return out


def _closest(word: str, spellings: Mapping[str, list[str]]) -> str | None:
    """The name one of whose spellings is closest to `word` (difflib's ratio, at least
    the cutoff of difflib.get_close_matches used elsewhere), or None."""

    def score(name: str) -> float:
        return max(difflib.SequenceMatcher(None, word, s).ratio() for s in spellings[name])

    best = max(spellings, key=score, default=None)
    return best if best is not None and score(best) >= _NEAR_CUTOFF else None


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
            near = _nearest_env_name(upper, valid)
            hint = f"did you mean {near}?" if near else "see pipeline/config/"
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

"""Settings: defaults < YAML < DOCGRAPH_ env < overrides; every mistake is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main
from pipeline.config import ConfigError, Settings, load_settings

SECRET = "sk-test-0123456789-do-not-print"


def yaml_file(tmp_path: Path, body: str, name: str = "settings.yaml") -> str:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return str(path)


def test_precedence_defaults_yaml_env_overrides(tmp_path):
    cfg = yaml_file(
        tmp_path, "chunking:\n  chunk_size: 200\n  overlap: 20\nquery:\n  top_k_units: 3\n"
    )
    env = {"DOCGRAPH_CHUNKING__CHUNK_SIZE": "250", "DOCGRAPH_CHUNKING__OVERLAP": "25"}
    s = load_settings(cfg, {"chunking": {"overlap": 26}}, environ=env)
    assert s.chunking.chunk_size == 250  # env over YAML
    assert s.chunking.overlap == 26  # overrides over env
    assert s.query.top_k_units == 3  # YAML over defaults
    assert s.query.top_k_entities == Settings().query.top_k_entities  # default kept
    assert isinstance(s, Settings)


def test_config_path_from_the_environment_and_top_level_and_json_values(tmp_path):
    cfg = yaml_file(tmp_path, "output_dir: from-yaml\n")
    env = {
        "DOCGRAPH_CONFIG": cfg,
        "DOCGRAPH_INPUT_DIR": "from-env",
        "docgraph_llm__prices": '{"m": [1.5, 2]}',  # names are case-insensitive
    }
    s = load_settings(environ=env)
    assert (s.output_dir, s.input_dir) == ("from-yaml", "from-env")
    assert s.llm.prices == {"m": (1.5, 2.0)}


def test_an_empty_section_keeps_its_defaults(tmp_path):
    cfg = yaml_file(tmp_path, "llm:\n  # enabled: true\nchunking:\n")
    assert load_settings(cfg, environ={}) == load_settings(environ={})


@pytest.mark.parametrize(
    ("body", "wrong", "nearest"),
    [
        ("outptu_dir: x\n", "outptu_dir", "output_dir"),
        ("chunking:\n  chunk_sise: 5\n", "chunking.chunk_sise", "chunking.chunk_size"),
        ("chunkng:\n  chunk_size: 5\n", "chunkng", "chunking"),
    ],
)
def test_an_unknown_yaml_key_names_it_and_the_nearest_valid_one(tmp_path, body, wrong, nearest):
    cfg = yaml_file(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    msg = str(err.value)
    assert f"unknown setting {wrong}" in msg and f"did you mean {nearest}?" in msg
    assert cfg in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("var", "nearest"),
    [
        ("DOCGRAPH_CHUNKING__CHUNKSIZE", "DOCGRAPH_CHUNKING__CHUNK_SIZE"),
        ("DOCGRAPH_CHUNKNG__CHUNK_SIZE", "DOCGRAPH_CHUNKING__CHUNK_SIZE"),
        ("DOCGRAPH_OUTPUT_DIRS", "DOCGRAPH_OUTPUT_DIR"),
        ("DOCGRAPH_LLM_ENABLED", "DOCGRAPH_LLM__ENABLED"),
        # the section first, then the field of that section (issue 45): SIZE is nearer to
        # MIN_SIZE as a name, but CHUNK_SIZE is CHUNKING's size; TOKENS is no section
        ("DOCGRAPH_CHUNKNG__SIZE", "DOCGRAPH_CHUNKING__CHUNK_SIZE"),
        ("DOCGRAPH_REPOTRS__TOKENS", "DOCGRAPH_REPORTS__MAX_REPORT_TOKENS"),
    ],
)
def test_a_misspelled_environment_variable_is_an_error(var, nearest):
    with pytest.raises(ConfigError) as err:
        load_settings(environ={var: "1", "DOCGRAPH_CONFIG": ""})
    msg = str(err.value)
    assert f"unknown environment variable {var}" in msg and f"did you mean {nearest}?" in msg


def test_malformed_yaml_is_one_line_with_file_and_line(tmp_path):
    cfg = yaml_file(tmp_path, "chunking:\n  chunk_size: 5\n bad: [\n")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    msg = str(err.value)
    assert msg.startswith(f"config file {cfg}, line 3") and "\n" not in msg


def test_a_yaml_list_or_a_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_settings(yaml_file(tmp_path, "- a\n- b\n"), environ={})
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=f"config file {missing} does not exist"):
        load_settings(missing, environ={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(environ={"DOCGRAPH_CONFIG": missing})


def test_a_wrong_type_names_the_field_and_where_it_came_from(tmp_path):
    cfg = yaml_file(tmp_path, "chunking:\n  chunk_size: lots\n")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    assert "chunking.chunk_size" in str(err.value) and cfg in str(err.value)
    assert "valid integer" in str(err.value) and "'lots'" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"DOCGRAPH_QUERY__TOP_K_UNITS": "ten"})
    assert "query.top_k_units" in str(err.value)
    assert "DOCGRAPH_QUERY__TOP_K_UNITS" in str(err.value)
    with pytest.raises(ConfigError, match="chunking.method.*overrides"):
        load_settings(overrides={"chunking": {"method": "fancy"}}, environ={})
    with pytest.raises(ConfigError, match="DOCGRAPH_LLM__PRICES is not valid JSON"):
        load_settings(environ={"DOCGRAPH_LLM__PRICES": "gpt: 1, 2"})


def test_the_notebook_ci_and_executor_variables_are_no_settings_and_no_errors():
    """.ci/run exports DOCGRAPH_STRICT_SKIPS; a settings error for it failed CI at collection."""
    env = {"DOCGRAPH_INDEX": "data/output", "DOCGRAPH_QUESTION": "Who?", "DOCGRAPH_CONFIG": ""}
    env |= {"DOCGRAPH_STRICT_SKIPS": "1", "DOCGRAPH_EXECUTOR": "in_process"}
    assert load_settings(environ=env) == load_settings(environ={})


def test_the_api_key_never_appears_in_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert load_settings(environ={}).llm.api_key.get_secret_value() == SECRET  # default kept
    bodies = [
        f"llm:\n  api_key: {SECRET}\n  max_retries: many\n",  # sibling field wrong
        f"llm:\n  apikey: {SECRET}\n",  # misspelled: the value is not echoed
        f"llm:\n  api_key: [{SECRET}]\n",  # the key itself of a wrong type
        f"llm: {SECRET}\n",  # a whole section of a wrong type
    ]
    for body in bodies:
        with pytest.raises(ConfigError) as err:
            load_settings(yaml_file(tmp_path, body), environ={})
        assert SECRET not in str(err.value) and "llm" in str(err.value), body
    env = {"DOCGRAPH_LLM__API_KEY": SECRET, "DOCGRAPH_LLM__TIMEOUT_S": "soon"}
    with pytest.raises(ConfigError) as err:
        load_settings(environ=env)
    assert SECRET not in str(err.value) and "llm.timeout_s" in str(err.value)


def test_the_cli_prints_a_config_error_as_one_line_and_exits_2(tmp_path, capsys):
    cfg = yaml_file(tmp_path, "query:\n  top_k_unit: 5\n")
    code = main(["query", "naive", "radium", "--config", cfg, "--output", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("docgraph: ") and err.count("\n") == 1
    assert "query.top_k_unit" in err and "query.top_k_units" in err

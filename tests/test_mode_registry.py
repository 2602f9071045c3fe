"""The query modes are listed once (pipeline/query/modes.py): GraphIndex's methods, the
`docgraph query` options and the HTTP API's endpoints and request body are made from that
list, so they cannot drift apart."""

from __future__ import annotations

import inspect

import pytest

from app.cli.main import build_parser
from app.serve.request import QueryRequest
from app.serve.server import create_app
from pipeline.config import Settings
from pipeline.query import GraphIndex
from pipeline.query.modes import MODES, OPTIONS, QUERY_MODES, STREAM_MODES, get_mode

EXPOSED = [name for name, o in OPTIONS.items() if o.exposed]


def test_every_mode_is_a_graph_index_method_with_its_options_in_order():
    for mode in MODES.values():
        params = list(inspect.signature(getattr(GraphIndex, mode.method)).parameters)
        expected = ["self", mode.query_name, *(OPTIONS[o].parameter for o in mode.options)]
        assert params == expected + (["llm_answer"] if mode.streams else []), mode.name
    # the public method names the docs and notebooks use
    assert [m.method for m in MODES.values()] == [
        "naive_search",
        "local_search",
        "global_search",
        "expand_search",
        "focus_context",
        "flow_search",
    ]
    assert STREAM_MODES == ("naive", "local", "expand", "flow")


def test_the_cli_offers_every_mode_and_every_exposed_option():
    args = build_parser().parse_args(
        ["query", "expand", "q", "--edge-types", "SIBLING,REFERS_TO", "--max-hops", "3"]
    )
    assert args.edge_types == ["SIBLING", "REFERS_TO"] and args.max_hops == 3
    query = next(
        a
        for a in build_parser()._subparsers._group_actions[0].choices["query"]._actions
        if a.dest == "mode"
    )
    assert tuple(query.choices) == QUERY_MODES
    for name in EXPOSED:
        assert hasattr(args, name), name
    with pytest.raises(SystemExit):  # the bounds are the registry's: a level >= 0
        build_parser().parse_args(["query", "global", "q", "--level", "-1"])


def test_the_http_api_has_an_endpoint_per_mode_and_a_field_per_option():
    assert set(QueryRequest.model_fields) == {"query", "stream", "publication", *EXPOSED}
    focus = {"budget_tokens": 5, "question": None}
    assert QueryRequest(query="q", budget=5).options("focus") == focus
    assert QueryRequest(query="q", top_k=3).options("global") == {"level": None}

    class NoIndex:  # create_app reads settings only
        settings = Settings()

    routes = {r.path for r in create_app(NoIndex()).routes}
    assert {f"/query/{m}" for m in QUERY_MODES} <= routes


def test_defaults_come_from_the_settings_and_unknown_options_are_refused():
    qs = Settings().query
    assert get_mode("expand").arguments(qs, {"top_k": 2}) == {
        "max_hops": qs.expand_max_hops,
        "max_nodes": qs.expand_max_nodes,
        "edge_types": None,
        "weights": None,
        "top_k": 2,
    }
    assert get_mode("global").arguments(qs, {}) == {"level": None}
    with pytest.raises(TypeError, match="top_k"):
        get_mode("focus").arguments(qs, {"top_k": 1})
    with pytest.raises(ValueError, match="unknown query mode 'nope': one of naive, local"):
        get_mode("nope")

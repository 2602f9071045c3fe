"""The layout docs/architecture.md describes (issue 12): no import cycle, small modules,
packages that say what goes in and comes out; and a README that stays a front door (issue 47)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAX_LINES = 400


def _import_cycles_script():
    spec = importlib.util.spec_from_file_location(
        "import_cycles", REPO / "scripts/import_cycles.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_between_modules():
    script = _import_cycles_script()
    edges = script.graph()
    assert len(edges) > 100  # the graph really covers the project
    assert "pipeline.query.index" in edges and edges["pipeline.query.index"]
    assert script.cycles(edges) == []


def test_cycle_finder_finds_a_cycle():
    """The check above can fail: a two-module and a three-module cycle are both reported."""
    script = _import_cycles_script()
    edges = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": set()}
    assert sorted(script.cycles(edges)) == [["a", "b"], ["c", "d", "e"]]


def test_modules_stay_small():
    big = {
        str(p.relative_to(REPO)): n
        for folder in ("pipeline", "assets", "resources")
        for p in (REPO / folder).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert big == {}


def test_every_package_says_what_goes_in_and_out():
    for init in [*(REPO / "pipeline").rglob("__init__.py"), REPO / "assets/__init__.py"]:
        docstring = ast.get_docstring(ast.parse(init.read_text()))
        assert docstring and len(docstring.split()) >= 12, init


def test_architecture_doc_names_every_module():
    doc = (REPO / "docs/architecture.md").read_text()
    section = doc[doc.index("## Layout") :]
    tree = section.split("```")[1]
    named = set(re.findall(r"[a-z][a-z0-9_]*", tree))
    missing = [
        str(p.relative_to(REPO))
        for folder in ("pipeline", "assets", "resources")
        for p in (REPO / folder).rglob("*.py")
        if p.stem not in ("__init__", "__main__") and p.stem not in named
    ] + [
        str(p.parent.relative_to(REPO))
        for p in (REPO / "pipeline").rglob("__init__.py")
        if p.parent.name not in named
    ]
    assert missing == []


README_MAX_LINES = 150


def _relative_links(markdown: str) -> list[str]:
    """Targets of the Markdown links and images that are not URLs or in-page anchors."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)  # nor do code spans
    targets = re.findall(r'!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)', text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def test_readme_is_a_front_door():
    """The README stays short (the design lives in docs/), and every file it links exists."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    links = _relative_links(readme)
    assert "docs/architecture.md" in links and "docs/graph-view.png" in links
    missing = [t for t in links if not (REPO / t.split("#")[0]).is_file()]
    assert missing == []

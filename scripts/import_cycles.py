"""Find import cycles between the project's own modules.

Builds the module import graph from the source with ``ast`` (every ``import`` and
``from ... import`` statement, including those inside functions, so a cycle hidden behind
a lazy import still counts) and prints each strongly connected component with more than
one module.  Exit status 1 when there is a cycle, so CI and a test can run it.

    python scripts/import_cycles.py            # packages: app pipeline assets resources
    python scripts/import_cycles.py --graph    # also print every module's imports
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "pipeline", "assets", "resources")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found = {module_name(p): p for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    if (ROOT / "definitions.py").exists():
        found["definitions"] = ROOT / "definitions.py"
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` names or lies inside."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` imports the submodule when there is one.
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for candidate in candidates:
            target = _resolve(candidate, known)
            if target and target != name:
                targets.add(target)
                break
    return targets


def graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    known = modules(packages)
    return {name: imports_of(name, path, known) for name, path in sorted(known.items())}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="store_true", help="print every module's imports")
    args = parser.parse_args()
    edges = graph()
    if args.graph:
        for name, targets in edges.items():
            print(f"{name}: {', '.join(sorted(targets))}")
    found = cycles(edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, {len(found)} cycles")
    for component in found:
        print("cycle:", " <-> ".join(component))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

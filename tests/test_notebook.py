"""The query notebook runs top to bottom on a real index, through a real Jupyter kernel."""

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "query_modes.ipynb"
MODES = {"naive", "local", "global", "expand", "focus", "flow"}


def _stdout(cell) -> str:
    return "".join(
        o.get("text", "") for o in cell.get("outputs", []) if o["output_type"] == "stream"
    )


def test_notebook_runs_every_mode(sample_index, monkeypatch):
    _, out, _, _ = sample_index
    monkeypatch.setenv("DOCGRAPH_INDEX", str(out))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    try:
        client.execute()
    except Exception as exc:  # the cell error names the failing cell's code and traceback
        pytest.fail(f"notebook failed: {exc}")
    code = [c for c in nb.cells if c.cell_type == "code"]
    printed = "\n".join(_stdout(c) for c in code)
    for mode in MODES:
        assert f"[{mode}] " in printed, f"{mode} result not shown"
    assert "graph " in printed  # the Mermaid diagram of the flow search
    summary = json.loads(_stdout(code[-1]).strip().splitlines()[-1])
    assert set(summary) == MODES | {"flow quick"}
    assert all(n > 0 for n in summary.values()), summary

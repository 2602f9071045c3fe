#!/usr/bin/env bash
# Command 1 of the README: a virtual environment with the CPU build of torch and the project,
# then the index job on the bundled sample corpus (written to data/input if that is empty).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), "docgraph needs Python 3.11"'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch first, CPU build: pinned exactly, so no later requirement can pull a CUDA build.
# Where the CPU wheel is not on a local index, set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
.venv/bin/pip install --quiet ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==2.13.0"
.venv/bin/pip install --quiet -e '.[dev]'
# docgraph index refuses a missing or empty input folder; the sample goes in only here.
if [ -z "$(ls -A data/input 2>/dev/null)" ]; then
  .venv/bin/docgraph sample data/input >/dev/null
fi
.venv/bin/docgraph index "$@"

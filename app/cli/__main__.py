"""`python -m app.cli`: the `docgraph` command."""

import sys

from app.cli.main import cli

sys.exit(cli())

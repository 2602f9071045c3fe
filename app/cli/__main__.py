"""`python -m app.cli`: the `docgraph` command."""

import sys

from app.cli.main import main

sys.exit(main())

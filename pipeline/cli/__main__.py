"""`python -m pipeline.cli`: the `docgraph` command."""

import sys

from pipeline.cli.main import main

sys.exit(main())

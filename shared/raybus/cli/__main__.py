"""`python -m raybus.cli` is the `raybus` command."""

import sys

from raybus.cli import main

sys.exit(main())
